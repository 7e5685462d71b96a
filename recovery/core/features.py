"""Observation -> state feature vector for state-based learners (embedded policy, value critic):
proprio, privileged object poses in fixed slots, task one-hot.

Rotations enter as the first two columns of their matrix (continuous, unlike axis-angle near pi
or quaternion sign flips). Everything is computed from keys that also travel over the openpi
wire (``state``, ``object_poses``), so the policy works the same behind ``serve-policy``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recovery.core.robot import Observation

PROPRIO_SIZE = 3 + 6 + 2  # eef position, eef rotation (6D), finger joints
SLOT_SIZE = 3 + 3 + 6 + 1  # object position, position relative to the eef, rotation (6D), present


def axis_angle_to_matrix(aa: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(aa))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = aa / angle
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def quat_xyzw_to_matrix(q: np.ndarray) -> np.ndarray:
    return np.array(_quat_rows(q))


def _quat_rows(q: np.ndarray) -> list[list[float]]:
    """The rotation matrix of ``q`` as rows of floats: per object, cheaper than numpy on nine numbers."""
    norm = float(max(np.linalg.norm(q), 1e-12))
    x, y, z, w = (c / norm for c in np.asarray(q).tolist())
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def rot6d(rows: list[list[float]]) -> list[float]:
    """The first two columns of a rotation matrix given as rows."""
    return [row[col] for col in (0, 1) for row in rows]


def _quat_rot6d(q: np.ndarray) -> list[float]:
    """``rot6d(_quat_rows(q))`` for a float64 quaternion, to the bit, at a third less per object and
    step: the norm without np.linalg.norm's checks, and no rows built."""
    norm = max(math.sqrt(q @ q), 1e-12)
    x, y, z, w = (c / norm for c in q.tolist())
    return [1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w),
            2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)]


@dataclass(frozen=True)
class FeatureLayout:
    """Which object goes in which slot and which instruction is which task, fixed at training."""

    object_names: tuple[str, ...]
    instructions: tuple[str, ...]

    @property
    def size(self) -> int:
        return PROPRIO_SIZE + SLOT_SIZE * len(self.object_names) + len(self.instructions)

    def task_id(self, instruction: str) -> int | None:
        return self.instructions.index(instruction) if instruction in self.instructions else None

    def featurize(self, state: np.ndarray, object_poses: dict[str, np.ndarray], task_id: int) -> np.ndarray:
        """``state``: the standard 8-D state; ``object_poses``: name -> (7,) pos + xyzw quaternion.
        Gathered as one list of floats (a numpy call per piece costs more than its arithmetic)."""
        ex, ey, ez = eef = state[:3].tolist()
        values = [*eef, *rot6d(axis_angle_to_matrix(state[3:6]).tolist()), *state[6:8].tolist()]
        for name in self.object_names:
            pose = object_poses.get(name)
            if pose is None:
                values += [0.0] * SLOT_SIZE
            else:
                px, py, pz = pose[:3].tolist()
                values += [px, py, pz, px - ex, py - ey, pz - ez, *_quat_rot6d(np.asarray(pose[3:7], np.float64)), 1.0]
        one_hot = [0.0] * len(self.instructions)
        one_hot[task_id] = 1.0
        return np.array(values + one_hot, dtype=np.float32)

    def featurize_obs(self, obs: Observation, task_id: int) -> np.ndarray:
        if "object_poses" not in obs:
            raise KeyError("the embedded policy reads privileged object poses: the observation has none "
                           "(over openpi, the client must set send_object_poses=true)")
        return self.featurize(np.asarray(obs["state"]), obs["object_poses"], task_id)
