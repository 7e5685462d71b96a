"""Nominal-state memory: the states visited so far, with what the critics thought of them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.core.robot import EefPose, Observation


@dataclass(frozen=True)
class NominalState:
    step: int  # policy steps since the episode began (time)
    pose: EefPose
    joints: np.ndarray  # the arm's joints there: a physical rollback's goal (exact, no inverse kinematics,
    # and it restores the posture too: elbow, null space)
    quality: float
    value: float
    contact_free: bool  # no external force above the threshold on the robot, and nothing held
    snapshot: Any = None  # exact simulator state, when the backend can snapshot
    progress: int = 0  # task progress in steps (rewound by rollbacks); the global metric's clock
    holding: bool = False  # the gripper held something here
    closing: bool = False  # the gripper was commanded closed here (its fingers were closing or closed)
    observation: Observation | None = None  # what the robot saw here, object poses included where it perceives
    # them: the world a repair puts back (``recovery.supervision.repair``)


class NominalMemory:
    """Bounded buffer of the episode's policy-driven states (recovery steps never enter it)."""

    def __init__(self, capacity: int = 64):
        self._states: deque[NominalState] = deque(maxlen=capacity)
        self.start: NominalState | None = None

    def reset(self) -> None:
        self._states.clear()
        self.start = None

    def add(self, state: NominalState) -> None:
        if self.start is None:
            self.start = state
        self._states.append(state)

    def __len__(self) -> int:
        return len(self._states)

    @property
    def latest(self) -> NominalState:
        return self._states[-1]

    def ranked(self, now: int, horizon: int, score: str = "quality", fits=lambda s: True) -> list[NominalState]:
        """The states of the last ``horizon`` steps that ``fits``, best ``score`` first (latest first among equals)."""
        candidates = [s for s in reversed(self._states) if now - horizon <= s.step < now and fits(s)]
        return sorted(candidates, key=lambda s: getattr(s, score), reverse=True)

    def _best(self, now: int, horizon: int, score: str, fits=lambda s: True) -> NominalState | None:
        """Highest ``score`` among the states of the last ``horizon`` steps that ``fits`` (latest wins ties)."""
        ranked = self.ranked(now, horizon, score, fits)
        return ranked[0] if ranked else None

    def best_recent(self, now: int, horizon: int = 15, score: str = "quality") -> NominalState | None:
        """Highest ``score`` within the last ``horizon`` steps (latest wins ties)."""
        return self._best(now, horizon, score)

    def best_contact_free(self, now: int, horizon: int = 30, score: str = "quality") -> NominalState | None:
        return self._best(now, horizon, score, lambda s: s.contact_free)

    def best_physical(self, now: int, horizon: int, carrying: bool, score: str = "quality") -> NominalState | None:
        """The best state a physical rollback can reproduce. It drives the arm back and sets the
        gripper: with an empty hand it opens it, so only free states with the gripper open qualify;
        carrying what the gripper holds now, only states where the gripper held something."""
        return self._best(now, horizon, score,
                          (lambda s: s.holding) if carrying else (lambda s: s.contact_free and not s.closing))

    def repairable(self, now: int, horizon: int, score: str = "quality") -> list[NominalState]:
        """The states of the last ``horizon`` steps a repair can bring back (``recovery.supervision.repair``),
        best first: it re-grasps what the gripper held there, so holding states qualify too; a gripper
        caught closing does not."""
        return self.ranked(now, horizon, score, lambda s: s.holding or not s.closing)
