"""The supervisor's settings, in one place: everything else (CLI options included) derives from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from recovery.core.shipped import shipped

ROLLBACKS = ("physical", "snapshot")
SELECTORS = ("none", "rule", "ppo")  # the evaluation adds the simulation-only "oracle"
SHIPPED_REFERENCES = shipped("critics", "references")  # libero_object / libero_spatial, from the expert's demos
SHIPPED_CRITICS = shipped("critics", "checkpoints")  # value critics and calibrated rule thresholds


@dataclass(frozen=True)
class RollbackConfig:
    kind: str = "physical"
    max_steps: int = 40  # a target out of reach is given up after this many control steps
    pos_tol: float = 0.005
    rot_tol: float = 0.05

    def __post_init__(self) -> None:
        if self.kind not in ROLLBACKS:
            raise ValueError(f"unknown rollback {self.kind!r}; valid: {', '.join(ROLLBACKS)}")


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
    keep_trace: bool = False  # per-step traces in the summary (for plots)


@dataclass(frozen=True)
class RecoveryOptions:
    """The supervisor's settings; EvalConfig.recovery = None runs the policy alone."""

    selector: str = "rule"
    rollback: str = RollbackConfig.kind
    references: Path = SHIPPED_REFERENCES  # `recovery build-references` writes your own
    critic: Path | None = None  # None: the shipped critic of the suite, if any
    selector_path: Path | None = None  # the ppo selector's checkpoint; None: the shipped one of the suite
    rule_config: Path | None = None  # the rule's thresholds; None: the shipped calibration of suite and policy, if any
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
