"""The learned selector: its observation, its Gymnasium environment on real LIBERO, PPO training
(stable-baselines3) with checkpoints and resume, loading checks, and Ray on a local instance."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from recovery.core.decision import DecisionContext
from recovery.core.modes import Mode
from recovery.evaluation.reproduce import reproduce
from recovery.evaluation.results import ResultsFile
from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.learning.env import RewardConfig, SelectorEnv, SelectorEnvConfig
from recovery.learning.train import PPOConfig, TrainSelectorConfig, train_selector
from recovery.learning.warm_start import TeacherDecisions, WarmStartConfig, clone
from recovery.ray_cluster import RayUnavailableError
from recovery.supervision.build import critic_path
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.observation import LEARNED_MODES, ObservationLayout
from recovery.supervision.ppo import PPOSelector, SelectorCheckpointError, selector_meta
from recovery.supervision.selectors import RuleConfig
from sim.disturbances import UnknownDisturbanceError

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[1]

ENV = SelectorEnvConfig(suite="libero_object", tasks=(0,), max_steps=60)
SMALL_PPO = PPOConfig(n_steps=32, batch_size=32, n_epochs=2)
NO_WARM_START = WarmStartConfig(decisions=0)
CRITIC = critic_path(RecoveryOptions(), "libero_object")  # the shipped one, which ENV's selector reads


def _context(steps: int, quality_steps: int) -> DecisionContext:
    history = {"state": np.ones((steps, 8)), "action": np.full((steps, 7), 0.5), "quality": np.full(quality_steps, .9),
               "value": np.full(steps, .7), "risk": np.full(steps, .1), "tracking": np.full(quality_steps, .04)}
    return DecisionContext(step=steps, quality=.9, value=.7, risk=.1, flags={}, rollbacks_left=2,
                           steps_since_rollback=steps, last_rollback_mode=None, history=history)


def test_observation_pads_the_past_and_flags_what_is_real():
    layout = ObservationLayout(history=20)
    encoded = layout.encode(_context(steps=5, quality_steps=3), Mode.RETRY)
    rows = encoded[:20 * layout.row_size].reshape(20, layout.row_size)
    assert rows.shape[1] == 21 and not rows[:15].any()  # before the episode: zeros, flags off
    assert (rows[15:, :8] == 1).all() and (rows[15:, 8:15] == .5).all() and (rows[15:, 19] == 1).all()
    assert (rows[17:, 15] == np.float32(.9)).all() and (rows[15:17, 20] == 0).all() and (rows[17:, 20] == 1).all()
    assert np.allclose(rows[17:, 18], .8) and (rows[15:17, 18] == 0).all()  # tracking, in units of 5 cm
    assert encoded.shape == (layout.size,) and list(encoded[-4:]) == [0, 1, 0, 0]  # the rule's advice: RETRY
    assert list(layout.encode(_context(steps=5, quality_steps=3), Mode.HOLD)[-4:]) == [1, 0, 0, 0]
    full = layout.encode(_context(steps=50, quality_steps=50), Mode.EXECUTE)
    assert (full[:20 * layout.row_size].reshape(20, -1)[:, 19] == 1).all()
    with pytest.raises(ValueError, match="advice"):
        layout.encode(_context(steps=5, quality_steps=3))


def test_a_first_version_observation_keeps_its_columns():
    """Selectors of layout 1 read what they were trained on: no tracking column."""
    layout = ObservationLayout(history=20, version=1)
    encoded = layout.encode(_context(steps=5, quality_steps=3))
    assert encoded.shape == (layout.size,) == (20 * 20 + 3,)
    rows = encoded[:-3].reshape(20, layout.row_size)
    assert rows.shape[1] == 20 and (rows[15:, 18] == 1).all() and (rows[17:, 19] == 1).all()
    assert (rows[15:, 17] == np.float32(.1)).all()  # risk, then the flags
    with pytest.raises(ValueError, match="version 7"):
        ObservationLayout(version=7)


def test_env_passes_the_gymnasium_checker_and_pays_the_source_rewards():
    env = SelectorEnv(replace(ENV, disturbed_share=0.0))
    try:
        check_env(env, skip_render_check=True)
        obs, info = env.reset(seed=5)
        assert env.observation_space.contains(obs) and info["task"] == 0
        _, reward, done, truncated, info = env.step(LEARNED_MODES.index(Mode.RETRY))
        assert info["mode"] == "RETRY" and reward == pytest.approx(-0.02 - 0.1) and not truncated
        rewards = []
        while not done:
            _, reward, done, _, info = env.step(0)
            rewards.append(reward)
        assert info["is_success"] is False and info["steps"] + info["recovery_steps"] >= 60  # budget of 60 steps
        assert rewards[-1] == pytest.approx(-0.02 - 1.0) and set(rewards[:-1]) == {-0.02}
    finally:
        env.close()


def _play(env: SelectorEnv, seed: int, retry_at: tuple[int, ...] = ()) -> tuple[list, list, dict]:
    """One episode asking EXECUTE at every decision but a RETRY at the decisions ``retry_at``: its
    observations, rewards and last info."""
    observations, rewards = [env.reset(seed=seed)[0]], []
    done, decision = False, 0
    while not done:
        action = LEARNED_MODES.index(Mode.RETRY if decision in retry_at else Mode.EXECUTE)
        obs, reward, done, _, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        decision += 1
    return observations, rewards, info


def _outcome(success: bool) -> float:
    return 1.0 if success else -1.0


BURST = replace(ENV, disturbed_share=1.0, max_steps=None)


def test_the_counterfactual_reward_plays_the_base_policy_alone_and_then_undoes_it():
    """Under the burst, episodes asking for one RETRY run step for step as without the
    counterfactual (the branch is undone: simulator, disturbance clock, broker); the branch's outcome
    is the one the same episode reaches asking for nothing; the end reward is the difference of the
    two outcomes' rewards. Seed 7's RETRY wins an episode the base policy loses alone."""
    counterfactual = replace(BURST, reward=RewardConfig(counterfactual="episode"))
    env = SelectorEnv(BURST)
    try:
        outcomes = []
        for seed, retry_at in ((1, 4), (7, 10)):
            observations, rewards, info = _play(env, seed, (retry_at,))
            env.config = counterfactual
            cf_observations, cf_rewards, cf_info = _play(env, seed, (retry_at,))
            env.config = BURST
            alone = _play(env, seed)[2]
            assert np.array_equal(np.array(observations), np.array(cf_observations))
            assert cf_rewards[:-1] == rewards[:-1] and info["left_alone"] is None and info["rollbacks"] >= 1
            assert {k: v for k, v in cf_info.items() if k != "left_alone"} == \
                {k: v for k, v in info.items() if k != "left_alone"}
            assert cf_info["left_alone"] == alone["is_success"] and alone["rollbacks"] == 0
            costs = rewards[-1] - _outcome(info["is_success"])
            assert cf_rewards[-1] == pytest.approx(costs + _outcome(info["is_success"]) - _outcome(alone["is_success"]))
            outcomes.append((info["is_success"], alone["is_success"]))
    finally:
        env.close()
    assert (True, False) in outcomes, outcomes  # a non-zero difference was measured


def test_each_recovery_is_paid_what_it_changed_and_the_payments_add_up_to_the_episodes():
    """``counterfactual="intervention"``: a recovery is paid at once the outcome played alone after
    it against the one played alone before it (which is the outcome of the episode with the earlier
    recoveries only); the episode runs step for step as without the play-outs."""
    seed, retries = 7, (2, 10)  # a RETRY before the burst, then the one that wins the episode
    env = SelectorEnv(BURST)
    try:
        observations, rewards, info = _play(env, seed, retries)
        first_only, alone = _play(env, seed, retries[:1])[2], _play(env, seed)[2]
        env.config = replace(BURST, reward=RewardConfig(counterfactual="intervention"))
        cf_observations, cf_rewards, cf_info = _play(env, seed, retries)
    finally:
        env.close()
    assert np.array_equal(np.array(observations), np.array(cf_observations)) and info["rollbacks"] == 2
    assert cf_info["left_alone"] == alone["is_success"]
    paid = [cf - plain for cf, plain in zip(cf_rewards, rewards)]
    changed = [_outcome(first_only["is_success"]) - _outcome(alone["is_success"]),
               _outcome(info["is_success"]) - _outcome(first_only["is_success"])]
    assert paid[:retries[0]] == [0.0] * retries[0] and paid[retries[0]] == pytest.approx(changed[0])
    assert paid[retries[1]] == pytest.approx(changed[1]) and paid[-1] == pytest.approx(-_outcome(info["is_success"]))
    assert sum(paid) == pytest.approx(changed[0] + changed[1] - _outcome(info["is_success"]))
    assert (info["is_success"], alone["is_success"]) == (True, False) and changed[1] == 2.0, (info, first_only, alone)


def test_disturbed_episodes_draw_from_the_curriculum():
    env = SelectorEnv(replace(ENV, disturbances=("action_noise", "gripper_open"), disturbed_share=1.0))
    try:
        drawn = [env.reset(seed=seed)[1]["disturbance"] for seed in range(8)]
        assert env._backend.config.name == drawn[-1]  # the episode runs under what its info says
    finally:
        env.close()
    assert set(drawn) == {"action_noise", "gripper_open"}
    with pytest.raises(UnknownDisturbanceError, match="'bump'"):
        SelectorEnv(replace(ENV, disturbances=("bump",)))


def test_ppo_trains_on_real_libero_and_the_selector_reloads(tmp_path):
    out = tmp_path / "run"
    config = TrainSelectorConfig(env=ENV, ppo=SMALL_PPO, warm_start=WarmStartConfig(decisions=40, epochs=5),
                                 decisions=128, envs=1, out=out, checkpoint_every=64, eval_every=64,
                                 eval_episodes=1, device="cpu", progress=False)
    final = train_selector(config)
    warm = json.loads((out / "warm_start.json").read_text())  # 60 steps = 12 decisions an episode: 4 episodes
    assert warm["teacher_decisions"] >= 40 and warm["teacher_episodes"] == len(TeacherDecisions.load(
        out / "warm_start.npz").successes) >= 4 and 0 <= warm["held_out"]["agreement"] <= 1
    throughput = json.loads((out / "throughput.json").read_text())
    assert throughput["decisions"] == 128 and 0 < throughput["update_share"] < throughput["simulation_share"] < 1
    curve = (out / "curve.csv").read_text().splitlines()
    assert curve[0].startswith("decisions,") and [int(line.split(",")[0]) for line in curve[1:]] == [32, 64, 96, 128]
    assert (out / "learning_curve.png").stat().st_size > 0 and (out / "evaluations.npz").exists()
    assert any((out / "tb").rglob("events.out.tfevents.*"))
    selector = PPOSelector(final, CRITIC)
    assert selector.model.num_timesteps == 128
    assert RuleConfig.from_dict(selector.settings()["advised_by"]) == ENV.rule  # advised by the rule it trained beside
    assert selector.decide(_context(steps=20, quality_steps=20)) in LEARNED_MODES
    joined = replace(config, warm_start=WarmStartConfig(epochs=1, teacher_data=(str(out), str(out))), decisions=0,
                     eval_every=0, out=tmp_path / "joined")  # --teacher-data: clone collections instead of collecting
    train_selector(joined)
    rejoined = json.loads((joined.out / "warm_start.json").read_text())
    assert rejoined["teacher_decisions"] == 2 * warm["teacher_decisions"] and rejoined["joined_from"] == [str(out)] * 2


def test_the_oracle_teacher_advises_a_retry_right_after_the_burst_and_nothing_else():
    """The privileged teacher reads the environment's own simulated disturbance: EXECUTE before the
    burst and once its RETRY window has passed, RETRY at the decisions right after it."""
    env = SelectorEnv(replace(ENV, disturbed_share=1.0, max_steps=150))
    try:
        env.reset(seed=3)
        advice, done = [], False
        while not done:
            advice.append((env._backend.steps_since_disturbance, env.teacher_advice("oracle")))
            done = env.step(LEARNED_MODES.index(Mode.EXECUTE))[2]
    finally:
        env.close()
    retries = [since for since, mode in advice if mode == Mode.RETRY]
    assert retries and all(0 <= since < ENV.supervisor.retry_horizon for since in retries), advice
    assert all(mode == Mode.EXECUTE for since, mode in advice if since is None or since >= ENV.supervisor.retry_horizon)


def test_the_oracle_hands_a_gripper_fault_to_the_rule_from_its_onset():
    """``rule_teaches``: under ``gripper_open`` the teacher is the oracle (EXECUTE) until the fault,
    then the rule, here where the two disagree (the rule still asks for a RETRY once the oracle's
    window after the fault has passed)."""
    env = SelectorEnv(replace(ENV, disturbances=("gripper_open",), disturbed_share=1.0, max_steps=90))
    try:
        env.reset(seed=13)
        advice, done = [], False
        while not done:
            began = env._backend.record()["fired_at"] is not None
            advice.append((began, env.teacher_advice("oracle", ("gripper_open",)), env.teacher_advice("rule"),
                           env.teacher_advice("oracle")))
            done = env.step(LEARNED_MODES.index(Mode.EXECUTE))[2]
    finally:
        env.close()
    assert all(mode == Mode.EXECUTE for began, mode, _, _ in advice if not began), advice
    after = [(mode, rule, oracle) for began, mode, rule, oracle in advice if began]
    assert after and all(mode == rule for mode, rule, _ in after), advice
    assert any(mode != oracle for mode, _, oracle in after), advice


def test_the_warm_start_clones_the_rule_selector_onto_unseen_decisions():
    """Constructed decision points: quality traces with and without a drop, varying budgets and
    cooldowns, labelled by the real rule; the clone must reproduce it on held-out episodes."""
    from stable_baselines3.common.policies import ActorCriticPolicy

    from recovery.supervision.selectors import RuleSelector

    rng, layout, rule = np.random.default_rng(0), ObservationLayout(), RuleSelector()
    observations, actions = [], []
    for _ in range(3000):
        quality = np.clip(rng.uniform(.45, 1.) + np.cumsum(rng.normal(0, .01, 20)), 0, 1)
        if rng.random() < .4:
            quality[rng.integers(5, 20):] -= rng.uniform(.05, .4)
        ctx = DecisionContext(step=100, quality=float(quality[-1]), value=.5, risk=.1, flags={},
                              rollbacks_left=int(rng.integers(0, 4)), steps_since_rollback=int(rng.integers(0, 100)),
                              last_rollback_mode=None, history={"quality": quality, "state": np.zeros((20, 8)),
                                                                "action": np.zeros((20, 7))})
        observations.append(layout.encode(ctx, rule.decide(ctx)))
        actions.append(LEARNED_MODES.index(rule.decide(ctx)))
    actions = np.array(actions)
    data = TeacherDecisions(observations=np.array(observations), actions=actions,
                            returns=np.where(actions == 0, .5, -.5).astype(np.float32),
                            episode=np.arange(len(actions)) // 10, successes=np.ones(300, dtype=bool))
    spaces = (gym.spaces.Box(-np.inf, np.inf, (layout.size,), np.float32), gym.spaces.Discrete(len(LEARNED_MODES)))
    policy = ActorCriticPolicy(*spaces, lr_schedule=lambda _: 1e-4, net_arch=[128, 128])
    report = clone(policy, data, WarmStartConfig())
    held = report["held_out"]
    assert held["decisions"] == 600 and held["teacher_interventions"] > 60  # the rule fires on a fair share
    assert held["agreement"] > .9 and held["caught"] > .85, report
    untrained = ActorCriticPolicy(*spaces, lr_schedule=lambda _: 1e-4, net_arch=[128, 128])
    assert clone(untrained, data, WarmStartConfig(epochs=0))["held_out"]["agreement"] < held["agreement"]


def test_checkpoint_of_another_layout_or_no_selector_is_refused(tmp_path):
    from stable_baselines3 import PPO

    env = SelectorEnv(ENV)
    try:
        model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, device="cpu")
        model.selector_meta = selector_meta(ObservationLayout(history=10), CRITIC, RuleConfig())
        model.save(tmp_path / "other.zip")
        model.selector_meta = selector_meta(ObservationLayout(), CRITIC, RuleConfig())
        model.save(tmp_path / "ours.zip")
        del model.selector_meta
        model.save(tmp_path / "plain.zip")
    finally:
        env.close()
    with pytest.raises(SelectorCheckpointError, match=r"'history': 10.*'history': 20"):
        PPOSelector(tmp_path / "other.zip", CRITIC)
    with pytest.raises(SelectorCheckpointError, match="not a selector checkpoint"):
        PPOSelector(tmp_path / "plain.zip", CRITIC)
    with pytest.raises(FileNotFoundError, match="train-selector"):
        PPOSelector(tmp_path / "missing.zip", CRITIC)
    assert PPOSelector(tmp_path / "ours.zip", CRITIC).path == tmp_path / "ours.zip"
    another_critic = tmp_path / "retrained.pt"  # same kind of file, other weights: another digest
    another_critic.write_bytes(CRITIC.read_bytes() + b"\0")
    trained, other = (selector_meta(ObservationLayout(), path, RuleConfig())["critic"]
                      for path in (CRITIC, another_critic))
    with pytest.raises(SelectorCheckpointError, match=rf"digest {trained}.*retrained.pt \(digest {other}"):
        PPOSelector(tmp_path / "ours.zip", another_critic)


def test_interrupted_training_resumes_from_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "recovery", "train-selector", "--suite", "libero_object", "--tasks", "0",
               "--max-steps", "60", "--decisions", "256", "--envs", "1", "--n-steps", "32", "--checkpoint-every",
               "32", "--eval-every", "0", "--warm-start", "0", "--device", "cpu", "--out", str(out), "--no-progress"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not (out / "checkpoint.zip").exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.5)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=180)
    assert first.returncode == 130 and "resume" in err
    from stable_baselines3 import PPO

    saved = PPO.load(out / "checkpoint.zip").num_timesteps
    assert 32 <= saved < 256
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    final = PPOSelector(out / "selector.zip", CRITIC).model.num_timesteps
    assert 256 <= final < 256 + 32  # Ctrl-C stops between two decisions: the resumed run ends on a rollout
    decisions = [int(line.split(",")[0]) for line in (out / "curve.csv").read_text().splitlines()[1:]]
    assert decisions == sorted(set(decisions)) and decisions[-1] == final  # no row twice after the resume
    changed = subprocess.run(command[:-1] + ["--disturbed-share", "0.9", "--no-progress"], capture_output=True,
                             text=True)
    assert changed.returncode == 2 and "other settings (env differ)" in changed.stderr
    started = tmp_path / "from_another_run"  # another run's checkpoint as the start: this run's PPO settings apply
    started.mkdir()
    shutil.copy(out / "selector.zip", started / "checkpoint.zip")
    options = {"--out": str(started), "--n-steps": "16", "--decisions": str(final + 32)}
    other = [options.get(previous, arg) for previous, arg in zip([None, *command], command)] + ["--ent-coef", "0",
                                                                                          "--target-kl", "0.02",
                                                                                          "--gamma", "0"]
    done = subprocess.run(other, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    model = PPO.load(started / "selector.zip")
    assert (model.ent_coef, model.target_kl, model.gamma, model.n_steps, model.rollout_buffer.buffer_size) == (
        0.0, 0.02, 0.0, 16, 16)
    assert model.num_timesteps >= final + 32 and any((started / "tb").rglob("events.out.tfevents.*"))


def test_unreachable_ray_address_fails_before_anything_runs(tmp_path):
    out = tmp_path / "eval.jsonl"
    config = EvalConfig(suite="libero_object", tasks=(0,), episodes=1, policy="zero", out=out,
                        ray_address="127.0.0.1:9", progress=False)
    with pytest.raises(RayUnavailableError, match="cannot be reached"):
        evaluate(config)
    assert not out.exists()
    training = TrainSelectorConfig(env=ENV, out=tmp_path / "run", ray_address="127.0.0.1:9", progress=False)
    # (the warm start is on by default: the address fails before it collects anything)
    with pytest.raises(RayUnavailableError, match="cannot be reached"):
        train_selector(training)
    assert not training.out.exists()


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def test_evaluation_sharded_over_local_ray_matches_in_process(tmp_path, local_ray):
    base = EvalConfig(suite="libero_object", tasks=(0, 1), episodes=1, policy="embedded", max_steps=30,
                      recovery=RecoveryOptions(selector="rule"), progress=False)
    local = evaluate(replace(base, out=tmp_path / "local.jsonl"))
    sharded = evaluate(replace(base, out=tmp_path / "ray.jsonl", workers=2, ray_address="auto"))
    keep = ("task", "init", "success", "steps", "error")
    assert sorted(tuple(r[k] for k in keep) for r in sharded) == sorted(tuple(r[k] for k in keep) for r in local)
    assert len(sharded) == 2 and all(r["error"] is None for r in sharded)


def test_training_collects_with_ray_actors(tmp_path, local_ray):
    config = TrainSelectorConfig(env=ENV, ppo=SMALL_PPO, warm_start=NO_WARM_START, decisions=64, envs=2,
                                 out=tmp_path / "run", eval_every=0, device="cpu", ray_address="auto", progress=False)
    assert PPOSelector(train_selector(config), CRITIC).model.num_timesteps == 64
    assert json.loads((tmp_path / "run" / "throughput.json").read_text())["ray"] is True


@pytest.mark.parametrize("suite, let_go", [("libero_object", None), ("libero_spatial", True)])
def test_the_shipped_selector_loads_with_its_suites_critic(suite, let_go):
    """Advised as in training: libero_object's selector predates the drop trigger and its checkpoint
    does not record it (advised without it); libero_spatial's (2026-12-07) was trained with it on."""
    from recovery.supervision.ppo import shipped_selector

    selector = PPOSelector(shipped_selector(suite), critic_path(RecoveryOptions(), suite))
    assert selector.layout.version == 2 and selector.advisor is not None  # reads tracking and the rule's advice
    assert selector.settings()["advised_by"].get("retry_on_let_go") is let_go
    assert selector.advisor.config.retry_on_let_go is bool(let_go)
    assert selector.decide(_context(steps=20, quality_steps=20)) in LEARNED_MODES


def test_the_shipped_selector_reproduces_a_published_burst_episode(tmp_path):
    """The shipped libero_object selector rolls back once after the burst and the episode ends as in the
    published column (reports/shipped/libero_object_ppo_noise.jsonl, task 0, init state 0)."""
    published = ResultsFile(REPO / "reports/shipped/libero_object_ppo_noise.jsonl").load()
    live, = evaluate(EvalConfig(suite="libero_object", tasks=(0,), episodes=1, policy="embedded",
                                recovery=RecoveryOptions(selector="ppo"), disturbance="action_noise",
                                out=tmp_path / "live.jsonl", progress=False))
    assert live["recovery"]["modes"].get("RETRY", 0) >= 1
    assert reproduce([live], published).matched == 1  # success, steps, rollbacks and their steps


def test_a_decision_is_labelled_by_playing_out_a_retry_and_leaving_alone_both_undone():
    """``label_decision``: only the decisions of the first ``window`` steps after the burst are
    labelled; the episode runs step for step as without the play-outs; a label's outcomes are those
    of the same episode asking for nothing, and asking for one RETRY there and nothing after. Seed 7's
    RETRY at decision 10 wins an episode the base policy loses alone."""
    env, window = SelectorEnv(BURST), 30
    try:
        observations, labels = [env.reset(seed=7)[0]], []
        done = False
        while not done:
            labels.append(env.label_decision(window))
            obs, _, done, _, info = env.step(LEARNED_MODES.index(Mode.EXECUTE))
            observations.append(obs)
        plain_observations, _, alone = _play(env, 7)
        retried = {at: _play(env, 7, (at,))[2]["is_success"] for at in (10, 12)}
    finally:
        env.close()
    assert np.array_equal(np.array(observations), np.array(plain_observations))
    labelled = [at for at, label in enumerate(labels) if label is not None]
    assert labelled and all(0 <= labels[at]["since"] < window for at in labelled)
    assert labelled == list(range(labelled[0], labelled[-1] + 1)) and 10 in labelled
    assert all(labels[at]["alone"] == alone["is_success"] == info["is_success"] is False for at in labelled)
    for at, success in retried.items():
        assert labels[at]["ran"] and labels[at]["after"] == success
    assert retried[10] is True
