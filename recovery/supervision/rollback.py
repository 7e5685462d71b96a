"""Rollbacks: take the robot back to a remembered nominal state, one control period at a time.

``physical`` (default) drives the arm back in joint space, to the joints observed at the target
state, objects left where they are: what a real arm can do. The gripper opens, or stays closed
when the target held something (the supervisor then carries back what the gripper holds now).
A target away from the hand is approached from above: the hand first rises straight up, clear of
the objects around it, since a straight line in joint space sweeps the hand low across the table
and knocks over what stands in its way (most of the tipped objects a snapshot would have saved).
A motion that presses on something without coming closer (an object the disturbance moved into its
path) backs off straight up and ends, unreached, rather than pushing on until its budget is spent.
Where the target had the hand over an object that has moved since (the burst shoved the object it was
about to grasp), the hand goes back to where it was against the object (``Follow``), over it and down
in straight lines: the remembered joints would put it where the object no longer is, often on it.
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
from recovery.core.robot import CartesianStep, EefPose, JointTarget, Observation, RobotBackend
from recovery.core.servo import servo_action
from recovery.supervision.config import RollbackConfig
from recovery.supervision.memory import NominalState

FINGERS_SETTLED = 5e-4  # m per control step: finger joints moving less than this ...
FINGERS_STILL_STEPS = 3  # ... for this many steps have stopped (the gripper command is rate-limited:
# a reversal from closing to opening pauses the fingers for a step). A policy handed back half-closed
# fingers reads them as a grasp.
LIFTED = 0.01  # m: a hand this close below its lift height has risen; a target this close sideways is not lifted to
PROGRESS = 0.001  # m: a hand that comes this much closer to its target is not blocked


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


@dataclass(frozen=True)
class Follow:
    """The object a rollback's target had the hand over, and how far it has moved since (m, world frame):
    the hand goes back to where it was against the object, not to where the object no longer is."""

    name: str
    shift: np.ndarray


class PhysicalRollback:
    """Lift clear when the target is away from the hand, then a joint-space motion back to
    ``target``, until the grip point is within tolerance and the fingers have stopped, the
    motion's budget is spent, or it is blocked (then it backs off upward first). With ``follow``,
    the hand goes to the target's grip pose shifted with the object instead, in straight lines:
    over it at the lift's height, then down."""

    def __init__(self, target: NominalState, config: RollbackConfig, backend: RobotBackend,
                 follow: Follow | None = None):
        self.target, self.config, self.follow = target, config, follow
        self.goal = target.pose if follow is None else EefPose(target.pose.pos + follow.shift, target.pose.rot)
        self.command = JointTarget(target.joints, GRIPPER_CLOSE if target.holding else GRIPPER_OPEN)
        self.refused = backend.joint_move_problem(self.command, config.max_steps)
        self._backend = backend
        self.steps, self._still = 0, 0
        self._fingers: np.ndarray | None = None
        self._errors = (float("inf"), float("inf"))
        self._lift: tuple[np.ndarray, np.ndarray] | None = None  # the pose the hand rises to first
        self.lift_steps = 0
        self._closest, self._pressed = float("inf"), 0  # the hand's closest approach; steps pressing without it
        self.blocked_at: int | None = None  # the motion's step where it was found blocked
        self.back_off_steps = 0

    def next(self, obs: Observation, pose: EefPose, mode: Mode) -> Control | None:
        fingers = obs["state"][6:8]
        if self._fingers is not None:
            moved = float(np.max(np.abs(fingers - self._fingers)))
            self._still = self._still + 1 if moved < FINGERS_SETTLED else 0
        self._fingers = fingers
        self._errors = pose.distance(self.goal)
        if self.blocked_at is not None:
            return self._back_off(pose, mode)
        if self.refused or self.reached or self.steps >= self.config.max_steps + self.lift_steps:
            return None
        if self._blocked():
            self.blocked_at = self.steps
            self._lift = np.array([pose.pos[0], pose.pos[1], pose.pos[2] + self.config.clearance]), pose.rot
            return self._back_off(pose, mode)
        self.steps += 1
        if self.steps == 1:
            self._lift = self._lift_pose(pose)
        rising = self._lift is not None and pose.pos[2] < self._lift[0][2] - LIFTED
        if rising and self.lift_steps < self.config.lift_steps:
            self.lift_steps += 1
            return self._rise(pose, mode)
        self._lift = None
        if self.follow is not None:
            return self._approach(pose, mode)
        return Control(self.command, mode)

    def _approach(self, pose: EefPose, mode: Mode) -> Control:
        """One period of the straight-line way to the shifted goal: over it at ``clearance`` above, then down."""
        above = self.goal.pos + np.array([0.0, 0.0, self.config.clearance])
        over = np.linalg.norm(pose.pos[:2] - self.goal.pos[:2]) < LIFTED
        way = self.goal.pos if over else np.array([above[0], above[1], max(pose.pos[2], above[2])])
        return Control(CartesianStep(servo_action(pose.pos, pose.rot, way, self.goal.rot, self.command.gripper)), mode)

    def _blocked(self) -> bool:
        """Whether the motion has pressed on something for ``blocked_steps`` steps in a row without
        the hand coming closer to its target (not yet there: fingers still settling are not blocked). Carrying
        something back, the grip presses on what it holds, but a carry that makes progress is never blocked."""
        error = self._errors[0]
        if self.config.blocked_force <= 0 or self._lift is not None or error <= self.config.pos_tol:
            self._closest, self._pressed = float("inf"), 0  # rising first, or there: the approach starts after
            return False
        if error < self._closest - PROGRESS:
            self._closest, self._pressed = error, 0
        elif self._backend.contacts().force >= self.config.blocked_force:
            self._pressed += 1
        else:
            self._pressed = 0
        return self._pressed >= self.config.blocked_steps

    def _back_off(self, pose: EefPose, mode: Mode) -> Control | None:
        """Rise straight up by ``clearance`` from where the motion was blocked (at most ``lift_steps``)."""
        if pose.pos[2] >= self._lift[0][2] - LIFTED or self.back_off_steps >= self.config.lift_steps:
            return None
        self.steps += 1
        self.back_off_steps += 1
        return self._rise(pose, mode)

    def _rise(self, pose: EefPose, mode: Mode) -> Control:
        """One period of the hand's straight rise to ``_lift`` (before the joint motion, or backing off)."""
        return Control(CartesianStep(servo_action(pose.pos, pose.rot, *self._lift, self.command.gripper)), mode)

    def _lift_pose(self, pose: EefPose) -> tuple[np.ndarray, np.ndarray] | None:
        """Straight above the hand, ``clearance`` higher than the target, the hand's orientation kept.
        None where the joint motion sweeps nothing aside (the target nearly above or below the hand),
        or the rise would risk more than it saves: the hand carries something back (a fast rise
        shakes a light grasp loose: LIBERO's bowls slip out)."""
        aside = np.linalg.norm(pose.pos[:2] - self.goal.pos[:2]) >= LIFTED
        if self.config.clearance <= 0 or self.target.holding or not aside:
            return None
        height = self.goal.pos[2] + self.config.clearance
        return np.array([pose.pos[0], pose.pos[1], height]), pose.rot

    @property
    def reached(self) -> bool:
        pos_err, rot_err = self._errors
        return pos_err <= self.config.pos_tol and rot_err <= self.config.rot_tol and self._still >= FINGERS_STILL_STEPS

    def result(self) -> RollbackResult:
        details = {"lift_steps": self.lift_steps} if self.lift_steps else {}
        if self.follow is not None:
            details.update(follows=self.follow.name, shift=[round(float(x), 4) for x in self.follow.shift])
        if self.blocked_at is not None:
            details.update(blocked_at=self.blocked_at, back_off_steps=self.back_off_steps)
        return RollbackResult(self.reached and not self.refused, self.steps, *self._errors, self.refused, details)


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


def start_rollback(target: NominalState, config: RollbackConfig, backend: RobotBackend,
                   follow: Follow | None = None) -> Rollback:
    if config.kind == "snapshot":
        return SnapshotRollback(target)
    return PhysicalRollback(target, config, backend, follow)
