"""Calibrating the rule selector's thresholds: on constructed quality traces, and on a real LIBERO task."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from recovery.core.decision import Decision, DecisionContext
from recovery.core.modes import Mode
from recovery.evaluation.assembly import make_selector
from recovery.pipelines.calibrate_rule import (
    Calibrated, CalibrationConfig, Statistics, TrackingScales, calibrate, calibrate_at, fires, largest_tracking,
    rule_statistics, thresholds,
)
from recovery.supervision.build import RuleConfigError, rule_config_for
from recovery.supervision.config import RecoveryOptions, SupervisorConfig
from recovery.supervision.selectors import RuleConfig, RuleSelector

EVERY = SupervisorConfig().decision_every


def _fires(rule: RuleConfig, quality: np.ndarray, tracking: np.ndarray | None = None) -> bool:
    """Replay the real RuleSelector over an episode without rollbacks, as the supervisor would call it."""
    selector = RuleSelector(rule)
    tracking = np.zeros_like(quality) if tracking is None else tracking
    for step in range(EVERY, len(quality), EVERY):
        first = max(0, step + 1 - SupervisorConfig().history)
        ctx = DecisionContext(step=step, quality=float(quality[step]), value=1.0, risk=0.0, flags={},
                              rollbacks_left=3, steps_since_rollback=step, last_rollback_mode=None,
                              history={"quality": quality[first: step + 1], "tracking": tracking[first: step + 1]})
        if selector.decide(ctx) != Mode.EXECUTE:
            return True
    return False


def _tracking_traces(n: int, seed: int = 0) -> list[np.ndarray]:
    """Tracking errors of undisturbed runs: a few millimetres, with the odd contact up to ~2 cm."""
    rng = np.random.default_rng(seed)
    return [np.abs(rng.normal(0.005, 0.003, 150)) + 0.015 * (rng.random(150) < 0.02) for _ in range(n)]


def _weak_policy_successes(n: int, seed: int = 0) -> list[np.ndarray]:
    """Quality traces of a policy that wins while scoring low: levels 0.2-0.45, wobbling by up to 0.1."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.2, 0.45) + 0.05 * np.sin(np.arange(150) / rng.uniform(3, 9)) + rng.normal(0, 0.01, 150)
            for _ in range(n)]


def test_calibrated_rule_is_quiet_on_successes_and_still_catches_a_sharp_drop():
    successes = _weak_policy_successes(60)
    assert sum(_fires(RuleConfig(), q) for q in successes) == 60  # the defaults fire on every one
    tracking = _tracking_traces(60)
    config = CalibrationConfig(suite="any", false_alarm=0.1)
    lowest, drop = np.array([rule_statistics(q, config.base, EVERY) for q in successes]).T
    rule = thresholds(Statistics(lowest, drop, np.array([largest_tracking(t, config.base) for t in tracking])), config)
    assert sum(_fires(rule, q, t) for q, t in zip(successes, tracking)) <= 6
    dropped = successes[0].copy()
    dropped[80:] -= 0.4  # a burst knocks the arm off its course
    assert _fires(rule, dropped)
    assert rule_statistics(dropped, rule, EVERY, 80, 105)[1] >= rule.quality_drop  # caught right after the onset
    assert rule_statistics(dropped, rule, EVERY, 0, 80)[1] < rule.quality_drop  # and not before it
    pushed = tracking[1].copy()
    pushed[62:67] = 0.06  # a burst shoves the arm 6 cm off its commands for five steps
    assert _fires(rule, successes[1], pushed) and largest_tracking(pushed, rule, 60, 85) >= rule.tracking_max


def test_the_three_triggers_together_stay_within_the_false_alarm_budget():
    """Each trigger's most extreme success is a different episode: a third of a 10% budget each would
    fire on 3 of 20 successes."""
    lowest = np.linspace(0.5, 0.7, 20)  # episode 0 scores lowest
    drop = np.linspace(0.05, 0.15, 20)  # episode 19 drops deepest
    tracking = np.roll(np.linspace(0.010, 0.020, 20), 10)  # episode 9 strays furthest
    rule = thresholds(Statistics(lowest, drop, tracking), CalibrationConfig(suite="any", false_alarm=0.1))
    assert np.sum(fires(rule, lowest, drop, tracking)) == 2  # 10%, and no stricter than needed


def test_the_budget_goes_to_the_trigger_that_catches_the_disturbance():
    """Bursts that push the arm 2.4 cm off its commands and leave quality alone: the equal split
    spends two thirds of the budget on quality and misses them; the split that catches the most puts
    it all on the tracking error, within the same budget."""
    successes = Statistics(np.linspace(0.5, 0.7, 40), np.linspace(0.05, 0.15, 40),
                           np.roll(np.linspace(0.010, 0.025, 40), 20))
    bursts = Statistics(np.full(10, 0.8), np.full(10, 0.02), np.linspace(0.024, 0.0245, 10))
    config = CalibrationConfig(suite="any", false_alarm=0.1)
    equal = thresholds(successes, config)
    assert np.sum(fires(equal, *bursts)) < 5
    split = thresholds(successes, config, bursts)
    assert np.sum(fires(split, *bursts)) == 10 and np.mean(fires(split, *successes)) <= 0.1
    assert split.quality_min == 0.0 and split.quality_drop == np.inf  # off: they caught nothing


def test_the_metric_settling_after_a_rollback_is_no_drop():
    rule = RuleConfig(quality_min=0.0, quality_drop=0.2)

    def decide(quality, steps_since_rollback):
        ctx = DecisionContext(step=100, quality=float(quality[-1]), value=1.0, risk=0.0, flags={}, rollbacks_left=2,
                              steps_since_rollback=steps_since_rollback, last_rollback_mode=Mode.RETRY,
                              history={"quality": quality[-20:], "tracking": np.zeros(len(quality[-20:]))})
        return RuleSelector(rule).decide(ctx)

    settling = 0.55 + 0.45 * 0.7 ** np.arange(16)  # restarts at 1 after the rollback, settles to 0.55
    assert decide(settling, 15) == Mode.EXECUTE  # read as a 0.3 drop, each rollback triggered the next
    fallen = np.concatenate([settling, np.full(10, 0.55), np.linspace(0.55, 0.3, 5)])  # then a real drop
    assert decide(fallen, 30) == Mode.REPAIR


def test_a_drop_triggers_a_retry_once():
    """The hand let go of what it held (recovery.supervision.grasp): a RETRY, unless a rollback came since."""
    def decide(let_go_at, steps_since_rollback=40, rule=RuleConfig()):
        ctx = DecisionContext(step=40, quality=0.9, value=1.0, risk=0.0, flags={}, rollbacks_left=3,
                              steps_since_rollback=steps_since_rollback, last_rollback_mode=None,
                              history={"quality": np.full(20, 0.9), "tracking": np.zeros(20)}, let_go_at=let_go_at)
        return RuleSelector(rule).decide(ctx)

    assert decide(None) == Mode.EXECUTE
    assert decide(37) == Mode.RETRY
    assert decide(37, steps_since_rollback=2) == Mode.EXECUTE  # the cooldown after a rollback
    assert decide(25, steps_since_rollback=12) == Mode.EXECUTE  # dropped before the last rollback: dealt with
    assert decide(37, rule=RuleConfig(retry_on_let_go=False)) == Mode.EXECUTE


def test_the_tracking_trigger_waits_until_the_push_is_over():
    rule = RuleConfig(quality_min=0.0, quality_drop=1.0, tracking_max=0.03)
    tracking = np.full(40, 0.005)

    def decide(trace):
        ctx = DecisionContext(step=40, quality=0.9, value=1.0, risk=0.0, flags={}, rollbacks_left=3,
                              steps_since_rollback=40, last_rollback_mode=None,
                              history={"quality": np.full(20, 0.9), "tracking": trace[-20:]})
        return RuleSelector(rule).decide(ctx)

    assert decide(tracking) == Mode.EXECUTE
    during = tracking.copy()
    during[-3:] = 0.06  # still being pushed: a rollback now would be pushed off again
    assert decide(during) == Mode.EXECUTE
    after = tracking.copy()
    after[-8:-3] = 0.06  # pushed at steps 33-37 (the history's last entry is step 40), and calm for the last steps
    assert decide(after) == Mode.RETRY
    rule = replace(rule, retry_before_push=True)
    assert decide(after) == Decision(Mode.RETRY, before=33)  # the target: from before the push began
    assert RuleConfig.from_dict(RuleSelector(rule).settings()) == rule
    long_ago = tracking.copy()
    long_ago[-25:-20] = 0.06  # out of the drop window: its pre-push states are gone from the RETRY window too
    assert decide(long_ago) == Mode.EXECUTE


def test_each_task_is_judged_against_how_far_its_own_arm_strays():
    """Task 0's successes stray ~6 cm (a drawer pulls the arm), task 1's ~2 cm: one pooled threshold
    misses a 4 cm burst on task 1; relative to each task's scale, it is caught, and task 0's
    successes stay quiet."""
    tasks = [0] * 10 + [1] * 10
    strays = np.concatenate([np.linspace(0.055, 0.060, 10), np.linspace(0.016, 0.021, 10)])
    scales = TrackingScales.fit(tasks, strays)
    relative = scales.relative(tasks, strays, left_out=True)
    successes = Statistics(np.full(20, 0.8), np.full(20, 0.05), relative)
    bursts = Statistics(np.full(4, 0.8), np.full(4, 0.05), scales.relative([1, 1, 0, 0], np.array([0.04, 0.04, 0.07, 0.08])))
    config = CalibrationConfig(suite="any", false_alarm=0.1)
    rule = scales.per_task(thresholds(successes, config, bursts), {0: "open the drawer", 1: "pick the bowl"})
    limits = rule.tracking_max_by_task
    assert limits["pick the bowl"] < 0.04 < 0.06 < limits["open the drawer"] < 0.07
    assert limits["pick the bowl"] < rule.tracking_max < 0.045 < limits["open the drawer"]  # pooled: any other task

    def decide(instruction: str) -> Mode:
        trace = np.concatenate([np.full(10, 0.01), np.full(5, 0.045), np.full(5, 0.01)])  # a 4.5 cm push, over
        ctx = DecisionContext(step=40, quality=0.9, value=1.0, risk=0.0, flags={}, rollbacks_left=3,
                              steps_since_rollback=40, last_rollback_mode=None, instruction=instruction,
                              history={"quality": np.full(20, 0.9), "tracking": trace})
        return RuleSelector(rule).advise(ctx)

    assert decide("pick the bowl") == Mode.RETRY
    assert decide("open the drawer") == Mode.EXECUTE  # its successes stray further than this
    assert decide("a task calibration never saw") == Mode.RETRY
    assert RuleConfig.from_dict(RuleSelector(rule).settings()) == rule  # results records keep the table
    # and a rule without one records what it did before tables existed: files begun then still resume
    assert "tracking_max_by_task" not in RuleSelector(RuleConfig()).settings()


def test_the_start_transient_is_not_judged_when_a_warm_up_catches_more():
    """Every success of task 0 strays 6 cm at steps 11-12 (the arm setting off from rest), under 2 cm
    after; bursts after step 20 push it 4 cm. Judged from the start, the threshold must clear the
    transient and misses them; a 20-step warm-up leaves the transient out, and the real rule then
    catches a burst at step 40 and sits out the transient of the next episode."""
    rng = np.random.default_rng(0)

    def trace(burst_at: int | None = None, noise: float = 0.002) -> np.ndarray:
        tracking = np.abs(rng.normal(0.006, noise, 120))
        tracking[11:13] = rng.uniform(0.055, 0.06)
        if burst_at is not None:
            tracking[burst_at: burst_at + 5] = 0.04
        return tracking

    def record(tracking: np.ndarray, success: bool, fired_at: int | None = None) -> dict:
        return {"task": 0, "success": success, "disturbance_info": {"fired_at": fired_at},
                "recovery": {"trace": {"quality": np.full(120, 0.9).tolist(), "tracking": tracking.tolist()}}}

    won = [record(trace(), True) for _ in range(20)]
    fired = [record(trace(onset), False, onset) for onset in range(25, 75, 5)]
    config = CalibrationConfig(suite="any", false_alarm=0.1)
    judged_throughout = calibrate_at(won, fired, config)
    warmed_up = calibrate_at(won, fired, replace(config, base=replace(config.base, tracking_warmup=20)))
    assert judged_throughout.key()[0] == 0 and warmed_up.key()[0] == len(fired)
    assert max([judged_throughout, warmed_up], key=Calibrated.key) is warmed_up
    rule = warmed_up.scales.per_task(warmed_up.relative, {0: "open the drawer"})
    assert rule.tracking_warmup == 20 and rule.tracking_max_by_task["open the drawer"] < 0.04
    assert _fires(rule, np.full(120, 0.9), trace(40, noise=0)) and not _fires(rule, np.full(120, 0.9), trace(noise=0))
    assert _fires(replace(rule, tracking_warmup=0), np.full(120, 0.9), trace(noise=0))  # without it, the transient
    assert RuleConfig.from_dict(RuleSelector(rule).settings()) == rule
    assert "tracking_warmup" not in RuleSelector(RuleConfig()).settings()  # older results files still resume


@pytest.mark.sim
def test_calibration_on_a_real_task_is_read_back_by_the_rule_selector(tmp_path):
    out = tmp_path / "rule.json"
    rule, report = calibrate(CalibrationConfig(suite="libero_object", tasks=(0,), episodes_per_task=2,
                                               data_dir=tmp_path / "data", out=out, progress=False))
    assert report["episodes"] == 2 and report["successes"] >= 1
    detection = report["detection"]  # the same two layouts under the action-noise burst
    assert detection["disturbance"] == "action_noise" and detection["episodes"] <= 2
    assert 0 <= detection["caught"] <= detection["episodes"]
    assert json.loads(out.read_text())["rule"]["quality_min"] == rule.quality_min
    selector = make_selector(RecoveryOptions(selector="rule", rule_config=out), "libero_object", "embedded")
    assert selector.config == rule
    assert rule_config_for("libero_object", "no_such_policy") == RuleConfig()


@pytest.mark.slow
def test_a_missing_or_foreign_thresholds_file_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="recovery calibrate-rule"):
        rule_config_for("libero_object", "embedded", tmp_path / "missing.json")
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"quality_min": 0.3}')
    with pytest.raises(RuleConfigError, match="not a `recovery calibrate-rule` file"):
        make_selector(RecoveryOptions(selector="rule", rule_config=foreign), "libero_object", "embedded")
    with pytest.raises(RuleConfigError, match="between 0 and 1"):
        CalibrationConfig(suite="libero_object", false_alarm=10)
    failed = subprocess.run([sys.executable, "-m", "recovery", "eval", "--suite", "libero_object", "--policy", "zero",
                             "--selector", "rule", "--rule-config", str(foreign)], capture_output=True, text=True)
    assert failed.returncode == 2 and "not a `recovery calibrate-rule` file" in failed.stderr  # before any episode
