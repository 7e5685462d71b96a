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

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

try:
    from critics._nearest import mean_nearest
except ImportError as exc:  # a source tree installed before the search was compiled, or never installed
    raise ImportError("critics._nearest (the global quality metric's compiled search, critics/_nearest.c) is not "
                      "built: run `make install`, or `pip install -e .` (it needs a C compiler and Python's "
                      "headers)") from exc


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


class LocalQuality:
    """Does the arm move where the actions push it, and smoothly?

    Per step it keeps the new speed |p_t - p_(t-1)| and action norm as floats, so the window's
    statistics cost a few float operations instead of numpy calls on ten-element arrays."""

    def __init__(self, config: QualityConfig = QualityConfig()):
        self.config = config
        self.reset()

    def reset(self) -> None:
        self._positions: deque[list[float]] = deque(maxlen=self.config.window)
        self._speeds: deque[float] = deque(maxlen=self.config.window - 1)  # between consecutive ones
        self._action_norms: deque[float] = deque(maxlen=self.config.window)
        self.value = 1.0

    def update(self, position: Sequence[float], translation: Sequence[float]) -> float:
        """``position``: the end effector's (x, y, z) reached; ``translation``: the position part of the
        action that was commanded, as plain floats (the supervisor converts them once per step)."""
        cfg = self.config
        if self._positions:
            self._speeds.append(math.dist(position, self._positions[-1]))
        self._positions.append(position)
        self._action_norms.append(math.hypot(*translation))
        if len(self._positions) < 3:
            return self.value
        effectiveness = math.dist(position, self._positions[0]) / (_mean(self._action_norms) + cfg.eps)
        effectiveness = effectiveness / (effectiveness + cfg.c)
        mean_speed = _mean(self._speeds)
        variance = _mean([(v - mean_speed) ** 2 for v in self._speeds])
        smoothness = 1.0 / (1.0 + variance / (mean_speed ** 2 + cfg.eps))
        score = 1.0 / (1.0 + math.exp(-cfg.k * (cfg.w1 * effectiveness + cfg.w2 * smoothness - cfg.b)))
        self.value = cfg.beta * self.value + (1 - cfg.beta) * score
        return self.value


def _mean(values: Sequence[float]) -> float:
    """``statistics.fmean`` without its checks: the correctly rounded sum over the count."""
    return math.fsum(values) / len(values)


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
        self._dims = references.trajectories[0].shape[1]
        # per bin, the points as a (D, P) array and where each reference's points start, as the search takes them
        self._bins = [(np.ascontiguousarray(points.T), np.asarray(starts, dtype=np.int64))
                      for points, starts in references.bin_points(config.bins)]
        self.reset()

    def reset(self) -> None:
        self.value = 1.0
        self.distance = 0.0

    def update(self, steps: Sequence[int], features: np.ndarray) -> list[float]:
        """Feed a run of states (their progress steps and (n, D) features, in order); returns the
        metric after each. The supervisor scores the states between two decisions together: one
        nearest-reference search over all of them costs far less than one search per state."""
        cfg = self.config
        features = np.ascontiguousarray(features, dtype=np.float64)
        bins = [min(int(step * cfg.bins / self._length), cfg.bins - 1) for step in steps]
        distances: list[float] = []
        start = 0
        while start < len(bins):  # consecutive states in the same progress bin: one search
            end = start + 1
            while end < len(bins) and bins[end] == bins[start]:
                end += 1
            points, starts = self._bins[bins[start]]
            distances += mean_nearest(points, starts, features[start:end], self._dims, min(cfg.k_nearest, len(starts)))
            start = end
        values = []
        for distance in distances:
            self.value = cfg.beta * self.value + (1 - cfg.beta) * math.exp(-cfg.alpha * distance)
            values.append(self.value)
        self.distance = distances[-1] if distances else self.distance
        return values


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

    def update(self, steps: Sequence[int], positions: Sequence[Sequence[float]], features: np.ndarray,
               translations: Sequence[Sequence[float]]) -> list[float]:
        """Feed a run of states: their progress steps, end-effector positions (plain floats),
        reference features ((n, D), ``critics.references.reference_feature``) and the position
        part of the actions that led to them; returns q after each."""
        local = [self.local.update(position, translation) for position, translation in zip(positions, translations)]
        if self.global_ is None:
            return local
        mix = self.config.mix
        return [mix * q_local + (1 - mix) * q_global
                for q_local, q_global in zip(local, self.global_.update(steps, features))]
