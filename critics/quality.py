"""Execution-quality metrics of the robust-execution method, computed online, one step at a time.

- Local quality over a window W: motion effectiveness E = |p_t - p_(t-W+1)| / (mean |a_k| + eps),
  squashed E / (E + c); smoothness S = 1 / (1 + var(v) / (mean(v)^2 + eps)) of the speeds v;
  q_local is an EMA (factor beta) of sigmoid(k (w1 E + w2 S - b)), starting at 1.
- Global quality: the distance d_t of the current state to its nearest states in the same
  progress bin (t / T in ``bins`` bins) of the ``k_nearest`` closest successful reference
  trajectories; q_global is an EMA of exp(-alpha d_t).
- q = lambda q_local + (1 - lambda) q_global.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QualityConfig:
    """The paper gives the formulas, not the constants: these are ours, calibrated on LIBERO's
    OSC controller (effective motion gives E ~ 0.11 m per unit action over 10 steps)."""

    window: int = 10  # W
    eps: float = 1e-3
    c: float = 0.03  # squashing scale of E: E/(E+c) ~ 0.8 for effective motion
    k: float = 6.0  # sigmoid slope
    w1: float = 1.0
    w2: float = 1.0
    b: float = 1.4  # sigmoid offset: good ~ 0.9, stalled (E=0, S=1) ~ 0.08
    beta: float = 0.8  # EMA factor: q <- beta q + (1 - beta) x
    bins: int = 10  # progress bins of the global metric
    k_nearest: int = 5
    alpha: float = 10.0  # 1/m: exp(-alpha d), d in metres
    mix: float = 0.5  # lambda


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + np.exp(-x))


class LocalQuality:
    """Does the arm move where the actions push it, and smoothly?"""

    def __init__(self, config: QualityConfig = QualityConfig()):
        self.config = config
        self.reset()

    def reset(self) -> None:
        self._positions: deque[np.ndarray] = deque(maxlen=self.config.window)
        self._action_norms: deque[float] = deque(maxlen=self.config.window)
        self.value = 1.0

    def update(self, position: np.ndarray, action: np.ndarray) -> float:
        cfg = self.config
        self._positions.append(np.asarray(position, dtype=np.float64))
        self._action_norms.append(float(np.linalg.norm(np.asarray(action)[:3])))
        if len(self._positions) < 3:
            return self.value
        pos = np.array(self._positions)
        effectiveness = np.linalg.norm(pos[-1] - pos[0]) / (np.mean(self._action_norms) + cfg.eps)
        effectiveness = effectiveness / (effectiveness + cfg.c)
        speeds = np.linalg.norm(np.diff(pos, axis=0), axis=1)
        smoothness = 1.0 / (1.0 + np.var(speeds) / (np.mean(speeds) ** 2 + cfg.eps))
        score = _sigmoid(cfg.k * (cfg.w1 * effectiveness + cfg.w2 * smoothness - cfg.b))
        self.value = cfg.beta * self.value + (1 - cfg.beta) * score
        return self.value


@dataclass(frozen=True)
class ReferenceSet:
    """Successful trajectories of one task: per-step feature vectors (e.g. eef position + fingers)."""

    trajectories: tuple[np.ndarray, ...]  # each (T_i, D)

    @property
    def typical_length(self) -> float:
        return float(np.median([len(t) for t in self.trajectories]))

    def bin_points(self, bins: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per progress bin: the stacked states of all references in it, and the index in that
        stack where each reference's states start (for a per-reference minimum in one pass)."""
        out = []
        for b in range(bins):
            parts = []
            for traj in self.trajectories:
                which = np.minimum((np.arange(len(traj)) * bins) // len(traj), bins - 1)
                if np.any(which == b):
                    parts.append(traj[which == b])
            starts = np.cumsum([0] + [len(p) for p in parts[:-1]])
            out.append((np.concatenate(parts) if parts else np.empty((0, self.trajectories[0].shape[1])), starts))
        return out


class GlobalQuality:
    """How far is the current state from where successful runs were at the same progress?"""

    def __init__(self, references: ReferenceSet, config: QualityConfig = QualityConfig()):
        if not references.trajectories:
            raise ValueError("the global quality metric needs at least one reference trajectory")
        self.config = config
        self._length = references.typical_length
        self._bins = references.bin_points(config.bins)
        self.reset()

    def reset(self) -> None:
        self.value = 1.0
        self.distance = 0.0

    def update(self, step: int, feature: np.ndarray) -> float:
        cfg = self.config
        points, starts = self._bins[min(int(step * cfg.bins / self._length), cfg.bins - 1)]
        nearest_per_ref = np.minimum.reduceat(np.linalg.norm(points - feature, axis=1), starts)
        self.distance = float(np.mean(np.sort(nearest_per_ref)[: cfg.k_nearest]))
        self.value = cfg.beta * self.value + (1 - cfg.beta) * float(np.exp(-cfg.alpha * self.distance))
        return self.value


class QualityMonitor:
    """q = lambda q_local + (1 - lambda) q_global; local only when no references are given."""

    def __init__(self, references: ReferenceSet | None, config: QualityConfig = QualityConfig()):
        self.config = config
        self.local = LocalQuality(config)
        self.global_ = GlobalQuality(references, config) if references else None

    def reset(self) -> None:
        self.local.reset()
        if self.global_:
            self.global_.reset()

    @property
    def value(self) -> float:
        if self.global_ is None:
            return self.local.value
        return self.config.mix * self.local.value + (1 - self.config.mix) * self.global_.value

    def update(self, step: int, position: np.ndarray, feature: np.ndarray, action: np.ndarray) -> float:
        self.local.update(position, action)
        if self.global_:
            self.global_.update(step, feature)
        return self.value
