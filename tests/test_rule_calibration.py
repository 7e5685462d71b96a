"""Calibrating the rule selector's thresholds: on constructed quality traces, and on a real LIBERO task."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from recovery.evaluation.assembly import RecoveryOptions, make_selector
from recovery.modes import Mode
from recovery.rule_calibration import (
    CalibrationConfig, RuleConfigError, calibrate, rule_config_for, rule_statistics, thresholds,
)
from recovery.selectors import DecisionContext, RuleConfig, RuleSelector
from recovery.supervisor import SupervisorConfig

EVERY = SupervisorConfig().decision_every


def _fires(rule: RuleConfig, quality: np.ndarray) -> bool:
    """Replay the real RuleSelector over an episode without rollbacks, as the supervisor would call it."""
    selector = RuleSelector(rule)
    for step in range(EVERY, len(quality), EVERY):
        ctx = DecisionContext(step=step, quality=float(quality[step]), value=1.0, risk=0.0, flags={},
                              rollbacks_left=3, steps_since_rollback=step, last_rollback_mode=None,
                              history={"quality": quality[max(0, step + 1 - SupervisorConfig().history): step + 1]})
        if selector.decide(ctx) != Mode.EXECUTE:
            return True
    return False


def _weak_policy_successes(n: int, seed: int = 0) -> list[np.ndarray]:
    """Quality traces of a policy that wins while scoring low: levels 0.2-0.45, wobbling by up to 0.1."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.2, 0.45) + 0.05 * np.sin(np.arange(150) / rng.uniform(3, 9)) + rng.normal(0, 0.01, 150)
            for _ in range(n)]


def test_calibrated_rule_is_quiet_on_successes_and_still_catches_a_sharp_drop():
    successes = _weak_policy_successes(60)
    assert sum(_fires(RuleConfig(), q) for q in successes) == 60  # the defaults fire on every one
    config = CalibrationConfig(suite="any", false_alarm=0.1)
    lowest, drop = np.array([rule_statistics(q, config.base, EVERY) for q in successes]).T
    rule = thresholds(lowest, drop, config)
    assert sum(_fires(rule, q) for q in successes) <= 6
    dropped = successes[0].copy()
    dropped[80:] -= 0.4  # a burst knocks the arm off its course
    assert _fires(rule, dropped)
    assert rule_statistics(dropped, rule, EVERY, 80, 105)[1] >= rule.quality_drop  # caught right after the onset
    assert rule_statistics(dropped, rule, EVERY, 0, 80)[1] < rule.quality_drop  # and not before it


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
