"""Hand-written mode selectors: every k steps, EXECUTE or one of the recovery modes.

``none`` is the baseline; ``rule`` thresholds execution quality, its drop and the tracking error
(and, when switched on, the value critic's risk flags); the learned selector (``ppo``) honours the
same ``Selector`` contract (``recovery.core.decision``), reading the same ``DecisionContext``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from recovery.core.decision import Decision, DecisionContext
from recovery.core.modes import Mode
from recovery.supervision.config import SupervisorConfig


class NoneSelector:
    """Never intervenes: the base policy alone, with the same bookkeeping."""

    reads_value = False

    def reset(self) -> None:
        pass

    def decide(self, ctx: DecisionContext) -> Mode:
        return Mode.EXECUTE

    def settings(self) -> dict:
        return {}


@dataclass(frozen=True)
class RuleConfig:
    quality_min: float = 0.5  # intervene below this execution quality
    quality_drop: float = 0.12  # ... or when quality fell this much below its recent peak
    # steps over which the peak is taken: the RETRY horizon, so that RETRY's target is still from before the drop
    drop_window: int = SupervisorConfig.retry_horizon
    # steps after the start or a rollback whose quality is no peak: the metric restarts at 1 and settles over its
    # 10-step window, and reading that settling as a drop made each rollback trigger the next
    drop_warmup: int = 10
    # risk-rule flags that trigger; off by default: on libero_object's held-out rollouts the rules fire on
    # every successful episode too (critics/checkpoints/libero_object.report.json, AUROC 0.5)
    value_drop_rules: tuple[str, ...] = ()
    risk_max: float = float("inf")  # learned TVR risk above this triggers (off by default)
    # a disturbance that has passed: the tracking error (critics.tracking, m) reached this within the drop
    # window and has stayed below it for the last `tracking_settle` steps (off by default; calibrate-rule sets it).
    # Rolling back while the arm is still being pushed would only be pushed off again.
    tracking_max: float = float("inf")
    # per task (its instruction): how far its arm strays in a successful episode differs by task, by a
    # drawer or a stove knob pulling it off its commands (libero_goal: 1.6 to 6 cm); a task not in it uses tracking_max
    tracking_max_by_task: dict[str, float] = field(default_factory=dict)
    tracking_settle: int = 2
    # steps after the start or a rollback whose tracking error is not judged: an arm setting off from rest lags
    # its commands by more than the one step the tracking model assumes (libero_goal's drawer task: 5.8 cm at steps
    # 11-12 of every success, under 2 cm after). calibrate-rule chooses it with the thresholds; 0: judged throughout
    tracking_warmup: int = 0
    # a rollback the tracking error triggered goes back to the best state of the horizon ending where the error
    # first crossed its limit, not of the latest steps (``Decision.before``); off by default, on in the shipped
    # calibrations where it measured better (libero_10, libero_spatial; reports/published.md, "The push bound")
    retry_before_push: bool = False
    # a drop triggers: the hand let go of what it held while the policy commanded it closed (a gripper fault,
    # a burst on its command; recovery.supervision.grasp), and no rollback came since. Quality falls only once
    # the policy, handed an empty hand, has moved on, and a rollback the latch let carry back goes nowhere
    retry_on_let_go: bool = True
    cooldown: int = 10  # steps after a rollback before the next one may trigger
    escalate_within: int = 40  # a second trigger this soon after a rollback becomes a REPAIR

    @classmethod
    def from_dict(cls, settings: dict) -> RuleConfig:
        """The thresholds as ``asdict`` wrote them (JSON has lists where the config holds tuples)."""
        return cls(**{**settings, "value_drop_rules": tuple(settings.get("value_drop_rules", ()))})

    def drop_peak_window(self, steps_since_rollback: int) -> int:
        """How many of the latest quality steps the drop's peak is taken over: the drop window, less
        the warm-up after the start or the last rollback (under 2: no drop can be judged yet)."""
        return min(self.drop_window, steps_since_rollback - self.drop_warmup)

    def tracking_judged(self, steps_since_rollback: int) -> int:
        """How many of the latest tracking errors the trigger judges: the drop window's, less those of
        the first ``tracking_warmup`` steps after the start or the last rollback."""
        return max(0, min(self.drop_window, steps_since_rollback + 1 - self.tracking_warmup))


class RuleSelector:
    """Intervene when execution quality is low or just dropped, when a disturbance has just pushed
    the arm off its commands, or when the value critic's history says decline / abrupt drop; with a
    repair policy, REPAIR when an object the task names lies knocked over.
    Early matters: RETRY goes back to the best state of the last 15 steps, which must still be a
    state from before the trouble (with ``retry_before_push``, after a push: of the 15 steps before
    the tracking error crossed its limit)."""

    def __init__(self, config: RuleConfig = RuleConfig()):
        self.config = config
        self.reads_value = bool(config.value_drop_rules) or math.isfinite(config.risk_max)

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        """What a results record keeps; the per-task table, the tracking warm-up and the push bound only
        where they are set, so that a results file begun before they existed resumes."""
        return {key: value for key, value in asdict(self.config).items()
                if not (key in ("tracking_max_by_task", "tracking_warmup", "retry_before_push") and not value)}

    def advise(self, ctx: DecisionContext) -> Mode:
        """The mode alone: the learned selector's advice, the warm start's teacher."""
        return Decision.of(self.decide(ctx)).mode

    def decide(self, ctx: DecisionContext) -> Mode | Decision:
        """With ``retry_before_push``, a rollback the tracking error triggered comes as a ``Decision``
        bounded by the push's onset."""
        cfg = self.config
        if ctx.rollbacks_left <= 0 or ctx.steps_since_rollback < cfg.cooldown:
            return Mode.EXECUTE
        if ctx.knocked_over:  # only a repair policy can stand them up: the supervisor says so only with one
            return Mode.REPAIR
        window = cfg.drop_peak_window(ctx.steps_since_rollback)
        recent = ctx.history.get("quality", np.array([]))[-window:] if window > 1 else ()
        dropped = len(recent) > 1 and float(np.max(recent)) - ctx.quality >= cfg.quality_drop
        judged = cfg.tracking_judged(ctx.steps_since_rollback)
        tracking = ctx.history.get("tracking", np.array([]))[-judged:] if judged else ()
        limit = cfg.tracking_max_by_task.get(ctx.instruction, cfg.tracking_max)
        pushed = (len(tracking) > cfg.tracking_settle and float(np.max(tracking)) >= limit
                  and float(np.max(tracking[-cfg.tracking_settle:])) < limit)
        let_go = cfg.retry_on_let_go and ctx.let_go_at is not None and ctx.step - ctx.let_go_at < ctx.steps_since_rollback
        triggered = (ctx.quality < cfg.quality_min or dropped or pushed or let_go
                     or ctx.risk > cfg.risk_max or any(ctx.flags.get(name, False) for name in cfg.value_drop_rules))
        if not triggered:
            return Mode.EXECUTE
        mode = Mode.REPAIR if ctx.last_rollback_mode is not None and ctx.steps_since_rollback < cfg.escalate_within \
            else Mode.RETRY
        if not (pushed and cfg.retry_before_push):
            return mode
        # the push began where the tracking error first crossed its limit (the history's last entry is ctx.step)
        return Decision(mode, before=ctx.step - len(tracking) + 1 + int(np.argmax(tracking >= limit)))


SELECTORS = {"none": NoneSelector, "rule": RuleSelector}
