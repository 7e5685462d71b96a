"""Record what the policy saw and did, step by step (for demonstrations and reference trajectories)."""

from __future__ import annotations

import numpy as np

from recovery.backend import Observation

IMAGE_KEYS = ("agentview_image", "wrist_image")
PROPRIO_KEYS = ("state", "eef_pos", "eef_quat", "gripper_qpos", "joint_pos")


class TrajectoryRecorder:
    """Episode subscriber: pairs each observation with the action taken from it; ``sim_state``
    (optional) returns the backend's replayable simulator state at that moment."""

    def __init__(self, sim_state=None):
        self._sim_state = sim_state
        self._steps: list[tuple[Observation, np.ndarray, np.ndarray | None]] = []
        self._obs: Observation | None = None
        self.success = False

    def on_episode_start(self, obs: Observation) -> None:
        self._steps, self._obs, self.success = [], obs, False
        self._state = self._sim_state() if self._sim_state else None

    def on_step(self, obs: Observation, action: np.ndarray) -> None:
        self._steps.append((self._obs, np.asarray(action, dtype=np.float64), self._state))
        self._obs = obs
        self._state = self._sim_state() if self._sim_state else None

    def on_episode_end(self, success: bool) -> None:
        self.success = success

    def arrays(self) -> dict[str, np.ndarray]:
        """Stacked per-step arrays; ``object_poses`` is (T, N, 7) in ``object_names`` order."""
        observations = [o for o, _, _ in self._steps]
        names = sorted(observations[0]["object_poses"]) if observations else []
        out = {"actions": np.array([a for _, a, _ in self._steps]), "object_names": np.array(names, dtype="S")}
        for key in PROPRIO_KEYS + IMAGE_KEYS:
            if observations and key in observations[0]:
                out[key] = np.array([o[key] for o in observations])
        out["object_poses"] = np.array([[o["object_poses"][n] for n in names] for o in observations])
        if self._sim_state:
            out["sim_states"] = np.array([s for _, _, s in self._steps])
        return out
