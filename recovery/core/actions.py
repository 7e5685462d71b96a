"""The action every base policy emits, and the check that keeps a bad one from reaching a robot."""

from __future__ import annotations

from typing import Any

import numpy as np

from recovery.core.errors import RecoveryError

ACTION_DIM = 7  # [dx, dy, dz, drx, dry, drz, gripper], end-effector deltas in the world frame
POS_SCALE = 0.05  # m: a unit action moves the controller's position goal this far within one period
ROT_SCALE = 0.5  # rad: ... and its orientation goal this much
GRIPPER_OPEN = -1.0
GRIPPER_CLOSE = 1.0
# stay put, keep the grip (gripper 0 = hold); a rotation of exactly 0.0 would let LIBERO's OSC coast on
# its last orientation goal, 1e-9 does not
HOLD_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1e-9, 0.0])
WAIT_ACTION = np.array([0.0] * 6 + [GRIPPER_OPEN])  # the settle steps before an episode


class InvalidActionError(RecoveryError, ValueError):
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
