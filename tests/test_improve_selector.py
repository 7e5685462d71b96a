"""``recovery improve-selector``: labels kept and resumed, the fit moving the real SB3 actor where
a RETRY won or lost and nowhere else, and the command end to end on LIBERO."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.policies import ActorCriticPolicy

from recovery.cli import main
from recovery.pipelines.improve_selector import EXECUTE, RETRY, ImproveConfig, Labels, fit
from recovery.supervision.observation import LEARNED_MODES


REPO = Path(__file__).resolve().parents[1]


def _labels(rng: np.random.Generator, episodes: int = 200, per_episode: int = 20) -> Labels:
    """A selector that executed throughout; half of the decisions labelled (the second feature says
    which); a RETRY wins where the first feature is high (an object was displaced) and loses where it is low."""
    n = episodes * per_episode
    obs = rng.normal(size=(n, 6)).astype(np.float32)
    labelled = rng.random(n) < 0.5
    obs[:, 1] = 3.0 * labelled  # the labelled decisions (after a burst) look different from the rest
    high, low = obs[:, 0] > 1.0, obs[:, 0] < -1.0
    return Labels(observations=obs, actions=np.full(n, EXECUTE), labelled=labelled,
                  since=np.where(labelled, 5, -1), alone=labelled & low, after=labelled & high, ran=labelled,
                  episode=np.repeat(np.arange(episodes), per_episode), successes=np.zeros(episodes, dtype=bool),
                  displaced=np.where(labelled, 0.1 * high, np.nan), tilted=np.where(labelled, rng.random(n), np.nan),
                  holding=np.where(labelled, 0.0, np.nan))


@pytest.mark.slow
def test_the_fit_asks_where_a_retry_won_and_keeps_the_selector_elsewhere():
    rng = np.random.default_rng(0)
    labels = _labels(rng, episodes=60)
    policy = ActorCriticPolicy(gym.spaces.Box(-np.inf, np.inf, (6,), np.float32),
                               gym.spaces.Discrete(len(LEARNED_MODES)), lambda _: 1e-3)
    report = fit(policy, labels, ImproveConfig(epochs=40, learning_rate=1e-3, folds=3))
    before, after = report["selector"], report["out_of_fold"]
    assert report["retry_won"] == int(labels.won.sum()) > 0 and report["retry_lost"] == int(labels.lost.sum()) > 0
    assert after["where_retry_won"]["asks"] > 0.8 and after["where_retry_lost"]["asks"] < 0.05
    assert after["unlabelled"]["asks"] < 0.2 and after["auroc_won"] > 0.9 and after["auroc_lost"] < 0.2
    assert before["where_retry_won"]["decisions"] == after["where_retry_won"]["decisions"] == int(labels.won.sum())
    unobserved = report["unobserved"]
    assert unobserved["decisions"] == int(labels.labelled.sum()) and unobserved["auroc_won_by_displaced"] == 1.0
    assert abs(unobserved["auroc_won_by_tilted"] - 0.5) < 0.1 and unobserved["auroc_won_by_holding"] == 0.5
    fitted = policy.predict(labels.observations, deterministic=True)[0]  # the final fit, on every episode
    assert (fitted[labels.won] == RETRY).mean() > 0.9 and (fitted[labels.lost] == EXECUTE).all()


def test_labels_round_trip_and_join_with_distinct_episodes(tmp_path):
    rng = np.random.default_rng(1)
    first, second = _labels(rng, episodes=3), _labels(rng, episodes=2)
    second.episode += 3
    first.save(tmp_path / "labels.npz")
    joined = Labels.join(Labels.load(tmp_path / "labels.npz"), second)
    unrecorded = ("displaced", "tilted", "holding")
    np.savez(tmp_path / "before.npz", **{key: value for key, value in vars(first).items() if key not in unrecorded})
    assert np.isnan(Labels.load(tmp_path / "before.npz").displaced).all()  # labels collected before they were recorded
    assert len(joined.successes) == 5 and np.array_equal(np.unique(joined.episode), np.arange(5))
    assert np.array_equal(joined.won, np.concatenate([first.won, second.won]))
    assert RETRY != EXECUTE


@pytest.mark.sim
def test_improve_selector_labels_resumes_and_refuses_other_settings(tmp_path, capsys):
    """One episode, then a rerun asking for two labels one more and keeps the first; a rerun with
    another window is refused before anything is written. The improved selector loads for eval."""
    out = tmp_path / "run"
    rule = REPO / "reports/counterfactual/libero_object_rule_as_shipped_selector.json"  # the shipped selector's
    args = ["improve-selector", "--suite", "libero_object", "--tasks", "0", "--envs", "1", "--epochs", "2",
            "--rule-config", str(rule), "--out", str(out)]
    assert main([*args, "--episodes", "1"]) == 0
    first = Labels.load(out / "labels.npz")
    assert main([*args, "--episodes", "2"]) == 0
    both = Labels.load(out / "labels.npz")
    assert len(first.successes) == 1 and len(both.successes) == 2
    assert np.array_equal(both.observations[both.episode == 0], first.observations)
    assert both.labelled.any() and set(np.unique(both.since[both.labelled])) <= set(range(ImproveConfig.window))
    report = json.loads((out / "report.json").read_text())
    assert report["episodes"] == 2 and report["labelled"] == int(both.labelled.sum())
    assert main([*args, "--episodes", "3", "--window", "10"]) == 2
    assert "other settings" in capsys.readouterr().err
    assert len(Labels.load(out / "labels.npz").successes) == 2
    assert main(["eval", "--suite", "libero_object", "--tasks", "0", "--episodes", "1", "--selector", "ppo",
                 "--selector-path", str(out / "selector.zip"), "--max-steps", "20",
                 "--out", str(tmp_path / "eval.jsonl")]) == 0
