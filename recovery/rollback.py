"""Rollback executors: take the robot back to a stored nominal state.

``physical`` (default) drives the arm back to the stored pose through the backend's ``move_to``
(in joint space, to the joints observed there), gripper open, objects left where they are: what a
real arm can do. ``snapshot``
restores the full simulator state: a simulation-only upper bound, labelled as such in results.
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.backend import GRIPPER_OPEN, MoveResult, RobotBackend
from recovery.memory import NominalState

ROLLBACKS = ("physical", "snapshot")


@dataclass(frozen=True)
class RollbackConfig:
    kind: str = "physical"
    max_steps: int = 40  # a target out of reach is given up after this many control steps
    pos_tol: float = 0.005
    rot_tol: float = 0.05

    def __post_init__(self) -> None:
        if self.kind not in ROLLBACKS:
            raise ValueError(f"unknown rollback {self.kind!r}; valid: {', '.join(ROLLBACKS)}")


def roll_back(backend: RobotBackend, target: NominalState, config: RollbackConfig) -> MoveResult:
    """Returns how it went; never runs past ``config.max_steps`` control steps."""
    if config.kind == "snapshot":
        if target.snapshot is None:
            raise ValueError("snapshot rollback needs states stored with snapshots (backend.supports_snapshot)")
        backend.restore(target.snapshot)
        return MoveResult(True, 0, 0.0, 0.0)
    return backend.move_to(target.pose, GRIPPER_OPEN, config.max_steps, config.pos_tol, config.rot_tol)
