"""The one interface between the supervisor and a robot: LIBERO (sim/) or a real arm (ros_nodes/).

The supervisor never learns which backend it drives. Every backend offers an observation,
applying an action, a physical move of the end effector to a stored pose (the rollback a real
arm can do), contact information, and, where the backend can, an exact snapshot/restore.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

ACTION_DIM = 7  # [dx, dy, dz, drx, dry, drz, gripper], end-effector deltas in the world frame
GRIPPER_OPEN = -1.0
GRIPPER_CLOSE = 1.0

Observation = dict[str, Any]


class InvalidActionError(ValueError):
    """An action that must never reach the robot (wrong shape, NaN or Inf)."""


def validate_action(action: Any) -> np.ndarray:
    """Return the action as a float64 (7,) array clipped to the controller's [-1, 1] range.

    Raises InvalidActionError, before anything is sent, for a wrong shape or a non-finite value.
    """
    try:
        arr = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidActionError(f"action is not numeric: {exc}") from exc
    if arr.shape != (ACTION_DIM,):
        raise InvalidActionError(f"action must have shape ({ACTION_DIM},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidActionError(f"action has NaN/Inf values: {arr.tolist()}")
    return np.clip(arr, -1.0, 1.0)


@dataclass(frozen=True)
class EefPose:
    """End-effector (grip point) pose in the world frame."""

    pos: np.ndarray  # (3,) metres
    rot: np.ndarray  # (3, 3) rotation matrix

    def distance(self, other: EefPose) -> tuple[float, float]:
        """(position error in m, rotation error in rad) to ``other``."""
        pos_err = float(np.linalg.norm(self.pos - other.pos))
        cos = (np.trace(other.rot @ self.rot.T) - 1.0) / 2.0
        return pos_err, float(np.arccos(np.clip(cos, -1.0, 1.0)))


class PoseJointMemory:
    """Joint configuration seen at each end-effector pose handed to the supervisor this episode.

    The supervisor stores poses (EefPose) as rollback targets; a rollback in joint space needs a
    joint goal. Remembering the measured joints that produced each pose is exact, needs no inverse
    kinematics and restores the arm's posture (elbow, null space) of the nominal state too."""

    def __init__(self) -> None:
        self._joints: dict[bytes, np.ndarray] = {}

    def reset(self) -> None:
        self._joints.clear()

    def remember(self, pose: EefPose, joints: np.ndarray) -> None:
        self._joints[self._key(pose)] = np.array(joints, dtype=np.float64)

    def lookup(self, pose: EefPose) -> np.ndarray | None:
        return self._joints.get(self._key(pose))

    @staticmethod
    def _key(pose: EefPose) -> bytes:
        return np.asarray(pose.pos, dtype=np.float64).tobytes() + np.asarray(pose.rot, dtype=np.float64).tobytes()


@dataclass(frozen=True)
class ContactInfo:
    """Contacts between the robot and the rest of the world (robot self-contacts excluded)."""

    force: float  # summed normal force on the robot, N
    touching: frozenset[str]  # names of the non-robot geoms touched

    def is_free(self, threshold: float = 5.0) -> bool:
        """Contact-free in the method's sense: external force below ``threshold`` newtons."""
        return self.force < threshold


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    success: bool


@dataclass(frozen=True)
class MoveResult:
    """Outcome of a physical move; ``reached`` is False when the step budget ran out first."""

    reached: bool
    steps: int
    pos_error: float
    rot_error: float


class RobotBackend(ABC):
    """What the supervisor may ask of a robot. Actions are validated by ``validate_action``."""

    supports_snapshot: bool = False

    @property
    def unwrapped(self) -> "RobotBackend":
        """The innermost backend under any wrappers (as in Gymnasium)."""
        return self

    @abstractmethod
    def observe(self) -> Observation:
        """The latest observation (see the backend's docs for its keys)."""

    @abstractmethod
    def step(self, action: np.ndarray) -> StepResult:
        """Apply one 7-D action for one control period."""

    @abstractmethod
    def eef_pose(self) -> EefPose:
        """Current pose of the grip point."""

    @abstractmethod
    def move_to(
        self, target: EefPose, gripper: float = GRIPPER_OPEN, max_steps: int = 60,
        pos_tol: float = 0.002, rot_tol: float = 0.02,
    ) -> MoveResult:
        """Drive the grip point to ``target``; never runs past ``max_steps`` control periods."""

    @abstractmethod
    def contacts(self) -> ContactInfo:
        """Current external contacts on the robot."""

    def snapshot(self) -> Any:
        """Exact simulator state (simulation only)."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot its state")

    def restore(self, snapshot: Any) -> Observation:
        """Return to a snapshot bit-identically; returns the observation stored with it."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a snapshot")

    def close(self) -> None:
        """Release the robot or simulator."""
