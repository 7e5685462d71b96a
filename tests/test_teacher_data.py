"""Joining the teacher decisions of several train-selector runs (``--teacher-data``): what may differ
between them (the episodes drawn) and what may not (what an observation or a return means).
The end-to-end run on LIBERO is in test_learning."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from recovery.learning.env import RewardConfig, SelectorEnvConfig
from recovery.learning.train import PPOConfig, TrainSelectorConfig
from recovery.learning.warm_start import TeacherDataError, TeacherDecisions, WarmStartConfig, load_collections
from recovery.supervision.observation import ObservationLayout

CONFIG = TrainSelectorConfig(env=SelectorEnvConfig(suite="libero_object"))


def _run(path: Path, config: TrainSelectorConfig, episodes: int, seed: int) -> str:
    """A run directory as train-selector leaves it: its settings and ``episodes`` episodes of 3 decisions."""
    rng = np.random.default_rng(seed)
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config.identity()))
    TeacherDecisions(observations=rng.normal(size=(3 * episodes, 5)).astype(np.float32),
                     actions=rng.integers(0, 2, 3 * episodes), returns=rng.normal(size=3 * episodes),
                     episode=np.repeat(np.arange(episodes), 3), successes=rng.random(episodes) < .5
                     ).save(path / "warm_start.npz")
    return str(path)


def test_runs_on_other_seeds_and_disturbances_join_with_distinct_episodes(tmp_path):
    first = _run(tmp_path / "a", CONFIG, episodes=2, seed=0)
    other_mix = replace(CONFIG, seed=1, env=replace(CONFIG.env, disturbances=("gripper_open",), disturbed_share=1.0))
    second = _run(tmp_path / "b", other_mix, episodes=3, seed=1)
    joined = load_collections((first, second), CONFIG.identity())
    parts = [TeacherDecisions.load(Path(run) / "warm_start.npz") for run in (first, second)]
    assert np.array_equal(joined.observations, np.concatenate([p.observations for p in parts]))
    assert list(joined.episode) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert list(joined.successes) == list(parts[0].successes) + list(parts[1].successes)


@pytest.mark.parametrize("change, named", [
    (lambda c: replace(c, env=replace(c.env, observation=ObservationLayout(history=10))), "observation"),
    (lambda c: replace(c, env=replace(c.env, critic="other.pt")), "critic"),
    (lambda c: replace(c, warm_start=WarmStartConfig(teacher="oracle")), "teacher"),
    (lambda c: replace(c, ppo=PPOConfig(gamma=0.9)), "gamma"),
])
def test_a_run_whose_decisions_mean_something_else_is_refused(tmp_path, change, named):
    good = _run(tmp_path / "good", CONFIG, episodes=1, seed=0)
    other = _run(tmp_path / "other", change(CONFIG), episodes=1, seed=1)
    with pytest.raises(TeacherDataError, match=rf"other settings \([^)]*{named}"):
        load_collections((good, other), CONFIG.identity())


def test_collections_join_where_they_name_one_teacher_for_every_kind_of_episode_both_drew(tmp_path):
    """A burst-only oracle collection joins one whose ``gripper_open`` episodes the rule taught (it
    drew no such episode), and a run that names both teachers so; not one whose oracle taught them."""
    oracle = replace(CONFIG, warm_start=WarmStartConfig(teacher="oracle"))
    burst = _run(tmp_path / "burst", oracle, episodes=1, seed=0)
    drops = replace(oracle, env=replace(CONFIG.env, disturbances=("gripper_open",)))
    ruled = WarmStartConfig(teacher="oracle", rule_teaches=("gripper_open",))
    by_rule = _run(tmp_path / "by_rule", replace(drops, warm_start=ruled), episodes=2, seed=1)
    by_oracle = _run(tmp_path / "by_oracle", drops, episodes=1, seed=2)
    both = replace(oracle, env=replace(CONFIG.env, disturbances=("action_noise", "gripper_open")),
                   warm_start=ruled)
    assert len(load_collections((burst, by_rule), both.identity()).successes) == 3
    with pytest.raises(TeacherDataError, match=r"by_oracle collected its decisions with other settings \(teacher"):
        load_collections((burst, by_oracle), both.identity())


def test_only_the_oracle_hands_episodes_to_the_rule_and_only_under_known_disturbances():
    with pytest.raises(ValueError, match="needs the oracle as the teacher"):
        WarmStartConfig(teacher="rule", rule_teaches=("gripper_open",))
    with pytest.raises(ValueError, match="unknown disturbance 'gripper_shut'"):
        WarmStartConfig(teacher="oracle", rule_teaches=("gripper_shut",))
    with pytest.raises(ValueError, match="nominal episodes are the oracle's"):
        WarmStartConfig(teacher="oracle", rule_teaches=("none",))


def test_a_run_started_before_a_setting_existed_joins_if_it_is_at_its_default(tmp_path):
    """``reward.counterfactual`` came after the collections the shipped selectors were cloned from."""
    older = _run(tmp_path / "older", CONFIG, episodes=1, seed=0)
    settings = json.loads((Path(older) / "config.json").read_text())
    del settings["env"]["reward"]["counterfactual"]
    (Path(older) / "config.json").write_text(json.dumps(settings))
    assert len(load_collections((older,), CONFIG.identity(), TrainSelectorConfig().identity()).successes) == 1
    paid_otherwise = replace(CONFIG, env=replace(CONFIG.env, reward=RewardConfig(counterfactual="episode")))
    with pytest.raises(TeacherDataError, match=r"other settings \(reward differ\)"):
        load_collections((older,), paid_otherwise.identity(), TrainSelectorConfig().identity())


def test_a_directory_without_collected_decisions_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TeacherDataError, match="empty holds no collected teacher decisions"):
        load_collections((str(tmp_path / "empty"),), CONFIG.identity())
