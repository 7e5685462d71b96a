"""Observation -> state feature vector for state-based learners (embedded policy, value critic):
proprio, privileged object poses in fixed slots, task one-hot.

Rotations enter as the first two columns of their matrix (continuous, unlike axis-angle near pi
or quaternion sign flips). Everything is computed from keys that also travel over the openpi
wire (``state``, ``object_poses``), so the policy works the same behind ``serve-policy``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recovery.core.robot import Observation

PROPRIO_SIZE = 3 + 6 + 2  # eef position, eef rotation (6D), finger joints
SLOT_SIZE = 3 + 3 + 6 + 1  # object position, position relative to the eef, rotation (6D), present


def axis_angle_rot6d(aa: np.ndarray) -> list[list[float]]:
    """The first two columns of the rotation matrix of each row of (n, 3) float64 axis-angle ``aa``
    (Rodrigues: I + sin(a) K + (1 - cos(a)) K K for the unit axis's cross-product matrix K), in plain
    floats (cheaper than numpy on six numbers). To the bit what the matrix product gives (the tests
    check it): each entry of K K is a sum of at most two nonzero products, whose order cannot change
    it, and ``0.0 +`` keeps the signs of zeros the identity gave. The angle's squares are summed in
    one fixed order, (x x + y y) + z z: the one numpy's dot product (the pinned BLAS,
    ``recovery.core.float_paths``) takes on a state's rotation, elements 3-5 of an 8-D float64 row,
    8 bytes off a 16-byte boundary; on an aligned vector it sums (x x + z z) + y y instead."""
    out = []
    for row in np.asarray(aa, dtype=np.float64).tolist():
        angle = math.sqrt((row[0] * row[0] + row[1] * row[1]) + row[2] * row[2])
        if angle < 1e-12:
            out.append([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
            continue
        x, y, z = (c / angle for c in row)
        s, t = math.sin(angle), 1 - math.cos(angle)
        out.append([1 + ((t * -z) * z + (t * y) * -y), (0.0 + s * z) + (t * -x) * -y, (0.0 + s * -y) + (t * x) * z,
                    (0.0 + s * -z) + (t * y) * x, 1 + ((t * z) * -z + (t * -x) * x), (0.0 + s * x) + (t * -y) * -z])
    return out


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


def quat_rot6d(q: np.ndarray) -> np.ndarray:
    """``rot6d(_quat_rows(q))`` for each row of (m, 4) float64 quaternions ``q``, to the bit: the
    squared norm summed in the order of the pinned BLAS dot product (``recovery.core.float_paths``),
    as ``np.linalg.norm`` does it one quaternion at a time."""
    q0, q1, q2, q3 = (q * q).T
    x, y, z, w = (q / np.maximum(np.sqrt((q0 + q2) + (q1 + q3)), 1e-12)[:, None]).T
    return np.array([1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w),
                     2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)]).T


@dataclass(frozen=True)
class FeatureLayout:
    """Which object goes in which slot and which instruction is which task, fixed at training.
    ``task_objects``, when given, holds per task the only objects it sees (its BDDL file's objects
    of interest): the others' slots stay empty, as for an absent object. With seven or more objects
    on the table and 50 demonstrations a task (libero_10), a network that sees every one fits on
    where the distractors happen to lie."""

    object_names: tuple[str, ...]
    instructions: tuple[str, ...]
    task_objects: tuple[tuple[str, ...], ...] = ()
    task_slots: bool = False  # with task_objects: slot i holds each task's i-th object of interest (what it
    # picks up, where it puts it), shared by the tasks, instead of one slot per object name

    @property
    def slots(self) -> int:
        return max(map(len, self.task_objects)) if self.task_slots else len(self.object_names)

    @property
    def size(self) -> int:
        return PROPRIO_SIZE + SLOT_SIZE * self.slots + len(self.instructions)

    def task_id(self, instruction: str) -> int | None:
        return self.instructions.index(instruction) if instruction in self.instructions else None

    def featurize(self, state: np.ndarray, object_poses: dict[str, np.ndarray], task_id: int) -> np.ndarray:
        """``state``: the standard 8-D state; ``object_poses``: name -> (7,) pos + xyzw quaternion."""
        return self.featurize_many(np.asarray(state)[None], [object_poses], task_id)[0]

    def featurize_many(self, states: np.ndarray, object_poses: Sequence[dict[str, np.ndarray]],
                       task_id: int) -> np.ndarray:
        """(n, D) float32 features of n states at once (the critic scores the states between two
        decisions together): numpy's per-call cost is paid once per piece, not once per state and object."""
        states = np.asarray(states, dtype=np.float64)
        n, eef = len(states), states[:, :3]
        names: tuple[str | None, ...] = self.object_names  # None: a slot that stays empty
        if self.task_slots:
            names = self.task_objects[task_id] + (None,) * (self.slots - len(self.task_objects[task_id]))
        elif self.task_objects:
            names = tuple(name if name in self.task_objects[task_id] else None for name in self.object_names)
        slots = np.zeros((n, len(names), SLOT_SIZE))
        present = np.array([[name in poses for name in names] for poses in object_poses], dtype=bool).reshape(n, -1)
        if present.any():
            poses = np.array([poses[name] for poses in object_poses for name in names if name in poses],
                             dtype=np.float64)
            positions = poses[:, :3]
            slots[present] = np.concatenate([positions, positions - eef[np.nonzero(present)[0]],
                                             quat_rot6d(poses[:, 3:7]), np.ones((len(poses), 1))], axis=1)
        one_hot = np.zeros((n, len(self.instructions)))
        one_hot[:, task_id] = 1.0
        return np.concatenate([eef, axis_angle_rot6d(states[:, 3:6]), states[:, 6:8],
                               slots.reshape(n, -1), one_hot], axis=1).astype(np.float32)

    def featurize_obs(self, obs: Observation, task_id: int) -> np.ndarray:
        return self.featurize_observations([obs], task_id)[0]

    def featurize_observations(self, observations: Sequence[Observation], task_id: int) -> np.ndarray:
        if any("object_poses" not in obs for obs in observations):
            raise KeyError("the embedded policy reads privileged object poses: the observation has none "
                           "(over openpi, the client must set send_object_poses=true)")
        return self.featurize_many(np.array([obs["state"] for obs in observations]),
                                   [obs["object_poses"] for obs in observations], task_id)
