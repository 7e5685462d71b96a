"""Observation + repair target -> the repair network's feature vector.

The base policy's features of the current observation (``recovery.core.features``: proprio, the
object slots, the task), then the goal: the target's grip pose and fingers, the way there from the
grip point, whether the gripper held something there, which object to put back (a one-hot over
the slots), whether it goes back into the hand or onto its place or is to be stood up, and that
object's target pose with the way there from where it lies, and its current pose and the way to it
from the grip point (also in its slot, but a network finds them far more easily in fixed places).
Only what a robot can perceive or remember enters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recovery.core.features import FeatureLayout, quat_xyzw_to_matrix, rot6d
from recovery.core.robot import Observation

GOAL_SIZE = 3 + 6 + 2 + 3 + 1 + 1 + 1 + 3 + 3 + 6 + 3 + 3 + 6  # + one slot per object for the focus


@dataclass(frozen=True)
class RepairLayout:
    base: FeatureLayout

    @property
    def size(self) -> int:
        return self.base.size + GOAL_SIZE + len(self.base.object_names)

    def featurize(self, state: np.ndarray, object_poses: dict[str, np.ndarray], task_id: int, goal: dict) -> np.ndarray:
        """``goal``: a ``RepairTarget.observation()``."""
        eef = np.asarray(state[:3], dtype=np.float64)
        target_pos = np.asarray(goal["eef_pos"], dtype=np.float64)
        values = [*target_pos.tolist(), *rot6d(np.asarray(goal["eef_rot"]).tolist()), *np.asarray(goal["state"])[6:8].tolist(),
                  *(target_pos - eef).tolist(), float(goal["holding"]), float(goal["focus_held"]),
                  float(goal["focus_tipped"])]
        focus = goal["focus"] or None
        one_hot = [0.0] * len(self.base.object_names)
        if focus is not None and focus in object_poses and focus in goal["object_poses"]:
            one_hot[self.base.object_names.index(focus)] = 1.0
            there, now = np.asarray(goal["object_poses"][focus]), np.asarray(object_poses[focus])
            values += [*there[:3].tolist(), *(there[:3] - now[:3]).tolist(),
                       *rot6d(quat_xyzw_to_matrix(there[3:7]).tolist()),
                       *now[:3].tolist(), *(now[:3] - eef).tolist(), *rot6d(quat_xyzw_to_matrix(now[3:7]).tolist())]
        else:
            values += [0.0] * 24
        base = self.base.featurize(np.asarray(state), object_poses, task_id)
        return np.concatenate([base, np.array(values + one_hot, dtype=np.float32)])

    def featurize_obs(self, obs: Observation, task_id: int) -> np.ndarray:
        if "repair_target" not in obs:
            raise KeyError("a repair policy steers toward obs['repair_target']; the observation has none")
        return self.featurize(np.asarray(obs["state"]), obs["object_poses"], task_id, obs["repair_target"])
