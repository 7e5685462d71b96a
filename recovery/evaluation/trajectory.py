"""Record what the policy saw and did, step by step (for demonstrations and reference trajectories)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from recovery.core.loop import EpisodeOutcome, Step, Subscriber
from recovery.core.robot import RECOVERY_MOTION, Observation
from recovery.supervision.repair import RepairTarget

IMAGE_KEYS = ("agentview_image", "wrist_image")
PROPRIO_KEYS = ("state", "eef_pos", "eef_quat", "gripper_qpos", "joint_pos")


class TrajectoryRecorder(Subscriber):
    """Episode subscriber: pairs each observation with the action taken from it, for the steps the
    policy (or a hold, or a repair policy) commanded; rollback motion, a joint-space command, is left
    out. ``sim_state`` (optional) returns the backend's replayable simulator state at the moment of
    the observation; ``repair_goal`` (optional) the target of the repair under way, if any
    (``Supervisor.repair_goal``): the steps of each repair are listed with it in ``repairs``."""

    def __init__(self, sim_state=None, repair_goal: Callable[[], RepairTarget | None] | None = None):
        self._sim_state, self._repair_goal = sim_state, repair_goal
        self._steps: list[tuple[Observation, np.ndarray, np.ndarray | None]] = []
        self._state: np.ndarray | None = None
        self.success = False

    def on_episode_start(self, obs: Observation) -> None:
        self._steps, self.success = [], False
        self.repairs: list[dict] = []  # per repair: its goal (RepairTarget.observation()), first and end step index
        self._last_goal: RepairTarget | None = None
        self._state = self._sim_state() if self._sim_state else None

    def on_step(self, step: Step) -> None:
        if not isinstance(step.command, RECOVERY_MOTION):
            goal = self._repair_goal() if self._repair_goal else None
            if goal is not None and goal is not self._last_goal:  # a repair begins
                self.repairs.append({"goal": goal.observation(), "start": len(self._steps)})
            if goal is not None:
                self.repairs[-1]["end"] = len(self._steps) + 1
            self._last_goal = goal
            self._steps.append((step.observation, np.asarray(step.command, dtype=np.float64), self._state))
        self._state = self._sim_state() if self._sim_state else None

    def on_event(self, event: dict) -> None:
        if event["event"] == "restore" and self._sim_state:
            self._state = self._sim_state()

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.success = outcome.success

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
        if self._repair_goal:
            out["repairs"] = self.repairs
        return out
