"""Proportional pose servo for the OSC_POSE controller: target pose -> one 7-D delta action.

A unit action moves the OSC goal by 5 cm / 0.5 rad in the world frame, so the error is
scaled by those limits, multiplied by a gain and clipped to the action range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recovery.core.actions import POS_SCALE, ROT_SCALE


def rotation_error(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-frame axis-angle vector that rotates ``current`` onto ``target`` (3x3 matrices)."""
    delta = target @ current.T
    cos = np.clip((np.trace(delta) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(cos)
    axis = np.array([delta[2, 1] - delta[1, 2], delta[0, 2] - delta[2, 0], delta[1, 0] - delta[0, 1]])
    sin2 = np.linalg.norm(axis)
    if sin2 < 1e-9:
        if angle < 1e-6:
            return np.zeros(3)
        # 180 degrees: the axis is the eigenvector of delta with eigenvalue 1
        w, v = np.linalg.eigh((delta + delta.T) / 2.0)
        return np.real(v[:, np.argmax(w)]) * angle
    return axis / sin2 * angle


@dataclass(frozen=True)
class ServoGains:
    kp: float = 2.0
    kr: float = 2.0


def servo_action(
    pos: np.ndarray, rot: np.ndarray, target_pos: np.ndarray, target_rot: np.ndarray,
    gripper: float, gains: ServoGains = ServoGains(),
) -> np.ndarray:
    """One action toward the target pose. The rotation part is never exactly 0.0: robosuite's OSC
    only updates its orientation goal for a non-zero rotation command, and otherwise keeps turning
    toward the old goal."""
    dpos = np.clip(gains.kp * (target_pos - pos) / POS_SCALE, -1.0, 1.0)
    drot = np.clip(gains.kr * rotation_error(rot, target_rot) / ROT_SCALE, -1.0, 1.0)
    drot = np.where(drot == 0.0, 1e-9, drot)
    return np.concatenate([dpos, drot, [gripper]])
