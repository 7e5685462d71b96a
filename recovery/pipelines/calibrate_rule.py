"""``recovery calibrate-rule``: set the rule selector's thresholds for one suite and policy.

Execution quality is relative: a weak base policy scores low even in episodes it wins, so
thresholds that suit one suite fire on every episode of another. Calibration runs the policy
under the never-intervening supervisor on sampled layouts (never the evaluation init states),
and on its successful episodes picks the thresholds (low quality, a quality drop, a tracking
error from critics.tracking) that together would have fired on at most ``false_alarm`` of them.
The same layouts under a disturbance then measure what those thresholds catch: whether the rule
would fire within ``detect_within`` steps of the disturbance's onset, and how deep a drop the
disturbance causes next to the largest drop of an undisturbed success.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from recovery.core.files import written_atomically
from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.supervision.build import RuleConfigError, shipped_rule_path
from recovery.supervision.config import SHIPPED_REFERENCES, RecoveryOptions, SupervisorConfig
from recovery.supervision.selectors import RuleConfig


@dataclass(frozen=True)
class CalibrationConfig:
    suite: str
    policy: str = "embedded"
    tasks: tuple[int | str, ...] = ()  # empty: every task of the suite
    episodes_per_task: int = 10  # 5 gave 39 successes on libero_spatial: too few for a few-percent quantile
    seed: int = 3000  # sampled layouts seed + i: apart from the evaluation's init states and other data
    false_alarm: float = 0.1  # share of successful nominal episodes on which the rule may fire
    references: Path = SHIPPED_REFERENCES
    workers: int = 1
    data_dir: Path = Path("critic_data")
    out: Path | None = None  # None: rules/SUITE_POLICY.rule.json here (the installed package is never written)
    disturbance: str = "action_noise"  # the disturbance whose detection is measured ("none": not measured)
    detect_within: int = 25  # steps after the onset in which firing counts as catching the disturbance
    progress: bool = True
    base: RuleConfig = field(default_factory=RuleConfig)  # everything but the two thresholds comes from here

    def __post_init__(self):
        if not 0 < self.false_alarm < 1:
            raise RuleConfigError(f"false_alarm is a share of episodes, strictly between 0 and 1: {self.false_alarm}")


def rule_statistics(quality: np.ndarray, rule: RuleConfig, decision_every: int, start: int = 0,
                    stop: int | None = None) -> tuple[float, float]:
    """The lowest quality and the largest drop below the recent peak that the rule would have judged in
    an episode without rollbacks, at its decision steps in [start, stop): past the cooldown, the peak
    past the warm-up."""
    lowest, largest_drop = np.inf, -np.inf
    for step in range(decision_every, min(len(quality), stop or len(quality)), decision_every):
        if step < max(rule.cooldown, start):
            continue
        lowest = min(lowest, float(quality[step]))
        window = rule.drop_peak_window(step)  # no rollbacks: the steps since the start
        if window > 1:
            largest_drop = max(largest_drop, float(np.max(quality[step + 1 - window: step + 1]) - quality[step]))
    return lowest, largest_drop


def largest_tracking(tracking: np.ndarray, rule: RuleConfig, start: int = 0, stop: int | None = None) -> float:
    """The largest tracking error in [start, stop) past the cooldown: the rule's tracking trigger can
    fire on an episode only if this reaches its threshold."""
    window = np.asarray(tracking)[max(rule.cooldown, start): stop]
    return float(np.max(window)) if len(window) else -np.inf


def fires(rule: RuleConfig, lowest, drop, tracking):
    """Whether the rule triggers on these statistics (floats or arrays of them)."""
    return ((np.asarray(lowest) < rule.quality_min) | (np.asarray(drop) >= rule.quality_drop)
            | (np.asarray(tracking) >= rule.tracking_max))


def thresholds(lowest: np.ndarray, drop: np.ndarray, tracking: np.ndarray, config: CalibrationConfig) -> RuleConfig:
    """From the successes' ``rule_statistics`` and ``largest_tracking``: quality_min at a low quantile of
    their lowest quality, quality_drop and tracking_max at the matching high quantiles of their largest
    drop and tracking error, all three at the loosest share that fires on at most ``false_alarm`` of the
    successes together. A fixed third of the budget each overshoots it: the triggers fire on different
    episodes, and a quantile of a few dozen episodes lands between two of them."""
    if len(lowest) == 0:
        raise ValueError(f"no successful episode of {config.policy} on {config.suite}: nothing to calibrate on")
    for share in np.linspace(config.false_alarm, 0, 41):  # at 0, only the most extreme success can fire
        rule = _at_share(lowest, drop, tracking, float(share), config.base)
        if np.mean(fires(rule, lowest, drop, tracking)) <= config.false_alarm:
            break
    return rule


def _at_share(lowest: np.ndarray, drop: np.ndarray, tracking: np.ndarray, share: float, base: RuleConfig) -> RuleConfig:
    """Thresholds beyond all but ``share`` of each statistic; episodes too short to be judged (inf)
    cannot fire and are left out."""
    def quantile(values: np.ndarray, q: float) -> float:
        return round(float(np.quantile(values[np.isfinite(values)], q)), 4)
    return replace(base, quality_min=quantile(lowest, share), quality_drop=quantile(drop, 1 - share),
                   tracking_max=quantile(tracking, 1 - share))


def calibrate(config: CalibrationConfig) -> tuple[RuleConfig, dict]:
    every = SupervisorConfig().decision_every
    nominal = _rollouts(config, "none")
    successes = [_traces(r) for r in nominal if r["success"]]
    # the statistics depend on the rule's cooldown, drop window and warm-up only, which calibration keeps
    lowest, drop = np.array([rule_statistics(q, config.base, every) for q, _ in successes]).reshape(-1, 2).T
    tracking = np.array([largest_tracking(t, config.base) for _, t in successes])
    rule = thresholds(lowest, drop, tracking, config)
    report = {"suite": config.suite, "policy": config.policy, "seed": config.seed, "episodes": len(nominal),
              "successes": len(successes), "false_alarm_target": config.false_alarm,
              "fires_on_successes": int(np.sum(fires(rule, lowest, drop, tracking))),
              "largest_drop_of_successes_median": round(float(np.median(drop[np.isfinite(drop)])), 4),
              "rule": asdict(rule)}
    if config.disturbance != "none":
        report["detection"] = _detection(_rollouts(config, config.disturbance), rule, config, every)
    path = config.out or Path("rules") / shipped_rule_path(config.suite, config.policy).name
    with written_atomically(path) as out:
        out.write_text(json.dumps(report, indent=2) + "\n")  # an evaluation never reads half a file
    return rule, {**report, "out": str(path)}


def _rollouts(config: CalibrationConfig, disturbance: str) -> list[dict]:
    """The policy under the never-intervening supervisor, quality traces kept (resumable)."""
    records = evaluate(EvalConfig(
        suite=config.suite, tasks=config.tasks, episodes=config.episodes_per_task, sampled_layouts=True,
        policy=config.policy, seed=config.seed, workers=config.workers, disturbance=disturbance,
        progress=config.progress, out=Path(config.data_dir) / config.suite / "rule_calibration.jsonl",
        recovery=RecoveryOptions(selector="none", references=config.references,
                                 supervisor=SupervisorConfig(keep_trace=True))))
    return [r for r in records if r["error"] is None]


def _traces(record: dict) -> tuple[np.ndarray, np.ndarray]:
    """An episode's quality and tracking-error traces."""
    trace = record["recovery"]["trace"]
    if "tracking" not in trace:
        raise RuleConfigError("the rollout store predates the tracking error; delete SUITE/rule_calibration.jsonl "
                              "in the --data folder and calibrate again")
    return np.array(trace["quality"]), np.array(trace["tracking"])


def _detection(disturbed: list[dict], rule: RuleConfig, config: CalibrationConfig, every: int) -> dict:
    """Would the rule have fired within ``detect_within`` steps of each disturbance, and how deep a drop
    did the disturbance cause?"""
    caught, by_tracking, drops = 0, 0, []
    fired = [r for r in disturbed if r["disturbance_info"]["fired_at"] is not None]  # before the episode ended
    for record in fired:
        onset = record["disturbance_info"]["fired_at"]
        quality, tracking = _traces(record)
        stop = onset + config.detect_within
        lowest, drop = rule_statistics(quality, rule, every, onset, stop)
        pushed = largest_tracking(tracking, rule, onset, stop)
        caught += bool(fires(rule, lowest, drop, pushed))
        by_tracking += bool(pushed >= rule.tracking_max)
        drops += [drop] if np.isfinite(drop) else []
    return {"disturbance": config.disturbance, "episodes": len(fired), "within_steps": config.detect_within,
            "caught": caught, "caught_by_tracking": by_tracking,
            "drop_after_onset_median": round(float(np.median(drops)), 4) if drops else None}
