"""Nominal-state memory: the states visited so far, with what the critics thought of them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.backend import EefPose


@dataclass(frozen=True)
class NominalState:
    step: int  # policy steps since the episode began (time)
    pose: EefPose
    quality: float
    value: float
    contact_free: bool
    snapshot: Any = None  # exact simulator state, when the backend can snapshot
    progress: int = 0  # task progress in steps (rewound by rollbacks); the global metric's clock


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

    def _recent(self, now: int, horizon: int) -> list[NominalState]:
        return [s for s in self._states if now - horizon <= s.step < now]

    def best_recent(self, now: int, horizon: int = 15, score: str = "quality") -> NominalState | None:
        """Highest ``score`` within the last ``horizon`` steps (latest wins ties)."""
        candidates = self._recent(now, horizon)
        return max(reversed(candidates), key=lambda s: getattr(s, score)) if candidates else None

    def best_contact_free(self, now: int, horizon: int = 30, score: str = "quality") -> NominalState | None:
        candidates = [s for s in self._recent(now, horizon) if s.contact_free]
        return max(reversed(candidates), key=lambda s: getattr(s, score)) if candidates else None


class EpisodicMemory:
    """Per-task memory across episodes: high-value states binned by progress (UniIntervene's bank)."""

    def __init__(self, bins: int = 10, per_bin: int = 32):
        self.bins, self.per_bin = bins, per_bin
        self._bank: dict[int, list[NominalState]] = {b: [] for b in range(bins)}

    def add(self, state: NominalState, progress: float) -> None:
        b = min(int(progress * self.bins), self.bins - 1)
        bucket = sorted(self._bank[b] + [state], key=lambda s: s.value, reverse=True)
        self._bank[b] = bucket[: self.per_bin]

    def best(self, progress: float, near: np.ndarray | None = None) -> NominalState | None:
        """Highest-value stored state at this progress (nearest to ``near`` among the top few)."""
        bucket = self._bank[min(int(progress * self.bins), self.bins - 1)]
        if not bucket:
            return None
        if near is None:
            return bucket[0]
        top = bucket[: max(1, len(bucket) // 4)]
        return min(top, key=lambda s: float(np.linalg.norm(s.pose.pos - near)))
