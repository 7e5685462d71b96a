"""Rollbacks: take the robot back to a remembered nominal state, one control period at a time.

``physical`` (default) drives the arm back in joint space, to the joints observed at the target
state, objects left where they are: what a real arm can do. The gripper opens, or stays closed
when the target held something (the supervisor then carries back what the gripper holds now).
``snapshot`` restores the whole simulator state in one event: a simulation-only upper bound,
labelled as such in results.
Neither steps the robot: each returns what the episode loop executes next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from recovery.core.actions import GRIPPER_CLOSE, GRIPPER_OPEN
from recovery.core.loop import Control
from recovery.core.modes import Mode
from recovery.core.robot import EefPose, JointTarget, Observation, RobotBackend
from recovery.supervision.config import RollbackConfig
from recovery.supervision.memory import NominalState

FINGERS_SETTLED = 5e-4  # m per control step: finger joints moving less than this ...
FINGERS_STILL_STEPS = 3  # ... for this many steps have stopped (the gripper command is rate-limited:
# a reversal from closing to opening pauses the fingers for a step). A policy handed back half-closed
# fingers reads them as a grasp.


@dataclass(frozen=True)
class RollbackResult:
    reached: bool
    steps: int  # control periods the motion took
    pos_error: float
    rot_error: float
    refused: str | None = None  # why the backend would not move (limits); nothing was commanded
    details: dict = field(default_factory=dict)  # what else the results record shows of it (a repair's focus)


class Rollback(Protocol):
    target: NominalState

    def next(self, obs: Observation, pose: EefPose, mode: Mode) -> Control | None:
        """The next control period of the rollback, or None once it is over."""

    def result(self) -> RollbackResult: ...


class PhysicalRollback:
    """Joint-space motion back to ``target``, until the grip point is within tolerance and the
    fingers have stopped, or the motion's budget is spent."""

    def __init__(self, target: NominalState, config: RollbackConfig, backend: RobotBackend):
        self.target, self.config = target, config
        self.command = JointTarget(target.joints, GRIPPER_CLOSE if target.holding else GRIPPER_OPEN)
        self.refused = backend.joint_move_problem(self.command, config.max_steps)
        self.steps, self._still = 0, 0
        self._fingers: np.ndarray | None = None
        self._errors = (float("inf"), float("inf"))

    def next(self, obs: Observation, pose: EefPose, mode: Mode) -> Control | None:
        fingers = obs["state"][6:8]
        if self._fingers is not None:
            moved = float(np.max(np.abs(fingers - self._fingers)))
            self._still = self._still + 1 if moved < FINGERS_SETTLED else 0
        self._fingers = fingers
        self._errors = pose.distance(self.target.pose)
        if self.refused or self.reached or self.steps >= self.config.max_steps:
            return None
        self.steps += 1
        return Control(self.command, mode)

    @property
    def reached(self) -> bool:
        pos_err, rot_err = self._errors
        return pos_err <= self.config.pos_tol and rot_err <= self.config.rot_tol and self._still >= FINGERS_STILL_STEPS

    def result(self) -> RollbackResult:
        return RollbackResult(self.reached and not self.refused, self.steps, *self._errors, self.refused)


class SnapshotRollback:
    """Restore the simulator to the state stored with ``target`` (bit-identical), in one event."""

    def __init__(self, target: NominalState):
        if target.snapshot is None:
            raise ValueError("snapshot rollback needs states stored with snapshots (backend.supports_snapshot)")
        self.target, self._restored = target, False

    def next(self, obs: Observation, pose: EefPose, mode: Mode) -> Control | None:
        if self._restored:
            return None
        self._restored = True
        return Control(mode=mode, restore=self.target.snapshot)

    def result(self) -> RollbackResult:
        return RollbackResult(True, 0, 0.0, 0.0)


def start_rollback(target: NominalState, config: RollbackConfig, backend: RobotBackend) -> Rollback:
    if config.kind == "snapshot":
        return SnapshotRollback(target)
    return PhysicalRollback(target, config, backend)
