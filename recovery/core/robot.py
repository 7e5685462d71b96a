"""The one interface between the stack and a robot: LIBERO (sim/) or a real arm (ros_nodes/).

The supervisor never learns which backend it drives, and it never steps one: during an episode
only the episode loop (``recovery.core.loop``) calls ``step``, once per control period, with
either a policy action (an end-effector delta, validated by ``validate_action``) or one period
of a recovery motion: a ``JointTarget`` (in joint space) or a ``CartesianStep`` (an end-effector
delta the stack, not the policy, commands). Everything else here reads.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from recovery.core.actions import GRIPPER_OPEN, InvalidActionError, validate_action

Observation = dict[str, Any]


@dataclass(frozen=True)
class EefPose:
    """End-effector (grip point) pose in the world frame."""

    pos: np.ndarray  # (3,) metres
    rot: np.ndarray  # (3, 3) rotation matrix

    def distance(self, other: EefPose) -> tuple[float, float]:
        """(position error in m, rotation error in rad) to ``other``. In plain floats (a rollback asks
        every period, and numpy's per-call cost was most of the work), to the bit what ``np.linalg.norm``
        and ``np.trace`` gave: the squares summed in the order the pinned BLAS dot product
        (``recovery.core.float_paths``) takes on a fresh, 16-byte aligned vector."""
        x, y, z = (self.pos - other.pos).tolist()
        diagonal = (other.rot @ self.rot.T).diagonal().tolist()
        cos = ((diagonal[0] + diagonal[1]) + diagonal[2] - 1.0) / 2.0
        return math.sqrt((x * x + z * z) + y * y), float(np.arccos(min(max(cos, -1.0), 1.0)))


@dataclass(frozen=True)
class JointTarget:
    """One control period of a joint-space recovery motion: head for ``joints`` (the arm's joints
    as observed at a remembered state) with the gripper going to ``gripper``. The same target is
    sent every period until the motion is over; a backend paces the way there within its limits."""

    joints: np.ndarray
    gripper: float = GRIPPER_OPEN

    def __post_init__(self) -> None:
        joints = np.asarray(self.joints, dtype=np.float64)
        if joints.ndim != 1 or not np.all(np.isfinite(joints)) or not np.isfinite(self.gripper):
            raise InvalidActionError(f"joint target must be a finite vector, got {self.joints!r}")
        object.__setattr__(self, "joints", joints)


@dataclass(frozen=True)
class CartesianStep:
    """One control period of a recovery motion given as an end-effector delta in the policy
    action's format (validated and clipped the same way): executed as a policy action is, but the
    stack moves the arm here, so disturbances and demonstration recorders leave it alone, as they
    leave a ``JointTarget``."""

    action: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", validate_action(self.action))


RECOVERY_MOTION = (JointTarget, CartesianStep)  # the commands that are no policy step
Command = Union[np.ndarray, JointTarget, CartesianStep]  # what one call of RobotBackend.step executes


def delta_action(command: np.ndarray | CartesianStep) -> np.ndarray:
    """The validated end-effector delta a backend executes for a policy action or a ``CartesianStep``."""
    return command.action if isinstance(command, CartesianStep) else validate_action(command)


@dataclass(frozen=True)
class ContactInfo:
    """Contacts between the robot and the rest of the world (robot self-contacts excluded)."""

    force: float  # summed normal force on the robot, N
    touching: frozenset[str]  # names of the non-robot geoms touched

    def is_free(self, threshold: float = 5.0) -> bool:
        """Contact-free in the method's sense: external force below ``threshold`` newtons."""
        return self.force < threshold


NO_CONTACT = ContactInfo(0.0, frozenset())


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    success: bool


class RobotBackend(ABC):
    """What the stack may ask of a robot."""

    supports_snapshot: bool = False

    @property
    def unwrapped(self) -> "RobotBackend":
        """The innermost backend under any wrappers (as in Gymnasium)."""
        return self

    @abstractmethod
    def observe(self) -> Observation:
        """The latest observation (see the backend's docs for its keys)."""

    @abstractmethod
    def step(self, command: Command) -> StepResult:
        """Execute one control period: a 7-D policy action, one period of a ``JointTarget`` motion,
        or a ``CartesianStep`` (executed as its action)."""

    @abstractmethod
    def eef_pose(self) -> EefPose:
        """Current pose of the grip point."""

    @abstractmethod
    def contacts(self) -> ContactInfo:
        """Current external contacts on the robot."""

    def joint_move_problem(self, target: JointTarget, max_steps: int) -> str | None:
        """Why a motion from the current joints to ``target`` within ``max_steps`` periods would be
        unsafe (joint, velocity or acceleration limits), or None. Pure: nothing is commanded."""
        return None

    def idle(self) -> None:
        """Let one control period pass commanding nothing (the loop holds on a transient input error)."""
        raise NotImplementedError(f"{type(self).__name__} cannot idle a period")

    def snapshot(self, derived: bool = False) -> Any:
        """Exact simulator state (simulation only); ``derived``: also what the simulator last
        computed from it (positions, contacts), for a branch that must come back to the present
        reading exactly what it read (a restore otherwise recomputes them)."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot its state")

    def restore(self, snapshot: Any) -> Observation:
        """Return to a snapshot bit-identically; returns the observation stored with it."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a snapshot")

    def close(self) -> None:
        """Release the robot or simulator."""
