"""The supervisor's settings, in one place: everything else (CLI options included) derives from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from recovery.core.shipped import shipped

ROLLBACKS = ("physical", "snapshot")
REPAIRS = ("rollback", "policy")
TARGET_SCORES = ("quality", "value")
SELECTORS = ("none", "rule", "ppo")  # the evaluation adds the simulation-only "oracle"
SHIPPED_REFERENCES = shipped("critics", "references")  # libero_object, _spatial, _goal: from the expert's demos
SHIPPED_CRITICS = shipped("critics", "checkpoints")  # value critics and calibrated rule thresholds


@dataclass(frozen=True)
class RollbackConfig:
    kind: str = "physical"
    max_steps: int = 40  # a target out of reach is given up after this many control steps of the joint motion
    clearance: float = 0.05  # m: the hand first rises this far above both itself and the target (0: no lift)
    lift_steps: int = 15  # control steps the rise may take at most
    # N: a motion pressing on something this hard while the hand has come no closer (1 mm) for ``blocked_steps``
    # steps is blocked (mostly an object the disturbance moved into its path): it backs off straight up by
    # ``clearance`` and ends, unreached, instead of pressing on until its budget is spent. 0: press on
    blocked_force: float = 20.0
    blocked_steps: int = 5
    # m: a target whose grip point was this close to an object, and over it (within ``follow_over`` of its origin
    # sideways), that has moved since by more than ``follow_moved`` (not knocked over) is approached shifted with
    # the object: where the hand was against it, not where it no longer lies (the burst shoves the object the hand
    # was about to grasp). Not a bowl pinched at its rim, 1.6-6.5 cm beside its origin: following those lost
    # libero_spatial 5 episodes and won 1 (reports/ceiling.md). 0: never
    follow: float = 0.08
    follow_over: float = 0.015
    follow_moved: float = 0.02
    pos_tol: float = 0.005
    rot_tol: float = 0.05
    # m: a rollback to the start needs the named objects where they lay there, leaving out any this close to the grip
    # point (taken as the hand's). Not RepairConfig.held: at its 8 cm the shipped rule went back to the start in 2 of
    # 282 published libero_spatial episodes where it had not
    start_hand: float = 0.06

    def __post_init__(self) -> None:
        if self.kind not in ROLLBACKS:
            raise ValueError(f"unknown rollback {self.kind!r}; valid: {', '.join(ROLLBACKS)}")


@dataclass(frozen=True)
class RepairConfig:
    """A repair policy's budget and what counts as repaired (``recovery.supervision.repair``)."""

    horizon: int = 80  # policy steps a repair looks back for the world to restore: a rollback's window (15, 30)
    # often holds only states after the disturbance changed it
    max_steps: int = 200  # control periods one repair may take (a re-grasp and a place take ~100-150, standing an
    # object up ~170): a knocked-over object the base policy cannot take is a lost episode anyway
    replan_every: int = 2  # the repair policy's chunks are re-planned this often
    placed: float = 0.02  # m: an object this close to its place in the target is back (and displaced beyond it)
    # m: a repair puts back an object displaced further than this (below ``placed`` it acts as ``placed``); a
    # larger value leaves displaced objects to the base policy and repairs only dropped and knocked-over ones
    # (libero_spatial's bowls are picked up from wherever they lie: reports/repair.md)
    displaced: float = 0.02
    tipped: float = 0.35  # rad (20 degrees): an object tilted more than this against the target lies knocked over
    # m: an object whose origin is this close to the grip point is in the hand. Measured while the embedded policy
    # held them: libero_object's objects 0.3-4.9 cm (the next object 10 cm or more away), libero_spatial's bowls,
    # pinched at the rim, 5-7 cm (at 6 cm a held bowl was not seen as held: a dropped one was never picked up again)
    held: float = 0.08
    arm_pos_tol: float = 0.01  # m and rad: the arm is back at the target's grip pose
    arm_rot_tol: float = 0.1
    opened: float = 0.01  # m: with an empty hand the target's finger opening is met to within this


@dataclass(frozen=True)
class SupervisorConfig:
    decision_every: int = 5  # k
    retry_horizon: int = 15  # RETRY: best quality within the last 15 steps
    repair_horizon: int = 30  # REPAIR: best contact-free state within the last 30 steps
    contact_threshold: float = 5.0  # N; "contact-free" below it (and not holding anything)
    grasp_latch: int = 5  # a closed gripper that touched something this many steps ago still holds it
    max_rollbacks: int = 3  # per-episode recovery budget
    history: int = 20  # steps of history in each DecisionContext (the learned selector's view)
    rollback: RollbackConfig = field(default_factory=RollbackConfig)
    repair: RepairConfig = field(default_factory=RepairConfig)  # with a repair policy (RecoveryOptions.repair)
    keep_trace: bool = False  # per-step traces in the summary (for plots)
    # what ranks the remembered states a rollback or repair may go to: the quality metric, or the
    # value critic's V (the state most likely to end in success; it loads the critic)
    target_score: str = "quality"

    def __post_init__(self) -> None:
        if self.target_score not in TARGET_SCORES:
            raise ValueError(f"unknown target score {self.target_score!r}; valid: {', '.join(TARGET_SCORES)}")


@dataclass(frozen=True)
class RecoveryOptions:
    """The supervisor's settings; EvalConfig.recovery = None runs the policy alone."""

    selector: str = "rule"
    rollback: str = RollbackConfig.kind
    # "policy": a recovery whose remembered world differs from the current one runs the repair policy
    # (recovery.supervision.repair), the others a rollback; "rollback": every recovery is a rollback
    repair: str = "rollback"
    repair_policy: str = "repair"  # the registered repair policy (none ships: checkpoint=PATH), or module:Class
    repair_policy_options: dict[str, str] = field(default_factory=dict)
    references: Path = SHIPPED_REFERENCES  # `recovery build-references` writes your own
    critic: Path | None = None  # None: the shipped critic of the suite, if any
    selector_path: Path | None = None  # the ppo selector's checkpoint; None: the shipped one of the suite
    rule_config: Path | None = None  # the rule's thresholds; None: the shipped calibration of suite and policy, if any
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)

    def __post_init__(self) -> None:
        if self.repair not in REPAIRS:
            raise ValueError(f"unknown repair {self.repair!r}; valid: {', '.join(REPAIRS)}")
        if self.repair == "policy" and self.rollback != "physical":
            raise ValueError("a repair policy restores the world physically: it runs with the physical rollback")
