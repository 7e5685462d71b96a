"""Temporal value-risk (UniIntervene): is the value declining, stalled, or did it just drop?

- Rules over the min-max-normalised value of the last ``window`` steps: decline (slope <= -0.01,
  drop >= 0.05, >= 70% of steps down), plateau (>= 60% of |delta| <= 0.03, amplitude <= 0.12),
  abrupt drop (a one-step drop >= 0.12 not half-recovered within 3 steps).
- Learned head: a small MLP reading the last K+1 values and K deltas, regressing the target
  TVR_t = (1 - V_t) sum_{i<K} gamma^i (eps - delta_{t+i}).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

import numpy as np
import torch
from torch import nn

from critics.mlp import NumpyMLP


@dataclass(frozen=True)
class RiskConfig:
    window: int = 8
    k: int = 8
    gamma: float = 0.9
    eps: float = 0.005
    decline_slope: float = -0.01
    decline_drop: float = 0.05
    decline_share: float = 0.7
    plateau_delta: float = 0.03
    plateau_share: float = 0.6
    plateau_amplitude: float = 0.12
    abrupt_drop: float = 0.12
    abrupt_recover_steps: int = 3


def rule_flags(values: np.ndarray, config: RiskConfig = RiskConfig()) -> dict[str, bool]:
    """The three intervention rules on the most recent ``window`` (+ recovery look-back) values.
    In plain floats: on eight numbers, numpy's per-call cost would be most of the work."""
    v = np.asarray(values, dtype=np.float64)[-config.window:].tolist()
    flags = {"decline": False, "plateau": False, "abrupt_drop": False}
    if len(v) < config.window:
        return flags
    low = min(v)
    span = max(v) - low
    norm = [(x - low) / span for x in v] if span > 1e-9 else [0.0] * len(v)
    mean, center = fmean(norm), (len(v) - 1) / 2
    slope = sum((i - center) * (y - mean) for i, y in enumerate(norm)) / sum((i - center) ** 2 for i in range(len(v)))
    falling = sum(b - a < 0 for a, b in zip(norm, norm[1:])) / (len(v) - 1)
    flags["decline"] = (slope <= config.decline_slope and norm[0] - norm[-1] >= config.decline_drop
                        and falling >= config.decline_share)
    raw_deltas = [b - a for a, b in zip(v, v[1:])]
    calm = sum(abs(d) <= config.plateau_delta for d in raw_deltas) / len(raw_deltas)
    flags["plateau"] = calm >= config.plateau_share and span <= config.plateau_amplitude
    for i in range(max(0, len(raw_deltas) - config.abrupt_recover_steps), len(raw_deltas)):  # recent enough to judge
        if -raw_deltas[i] >= config.abrupt_drop:
            before, after = v[i], max(v[i + 1:])
            if after < v[i + 1] + 0.5 * (before - v[i + 1]):  # not half-recovered
                flags["abrupt_drop"] = True
    return flags


def tvr_targets(values: np.ndarray, config: RiskConfig = RiskConfig()) -> np.ndarray:
    """Per-step TVR target of one episode's value trace (deltas past the end count as 0)."""
    v = np.asarray(values, dtype=np.float64)
    deltas = np.append(np.diff(v), np.zeros(config.k))
    weights = config.gamma ** np.arange(config.k)
    return np.array([(1 - v[t]) * np.sum(weights * (config.eps - deltas[t:t + config.k])) for t in range(len(v))],
                    dtype=np.float32)


def history_features(values: Sequence[float], k: int) -> np.ndarray:
    """Last k+1 values (front-padded with the first) and their k deltas."""
    return history_windows(values, k, last=1)[0]


def history_windows(values: Sequence[float], k: int, last: int | None = None) -> np.ndarray:
    """``history_features`` of every prefix of ``values`` (of the ``last`` longest ones: the risk
    monitor's new steps): row t is that of ``values[:t + 1]``, in float32. Built from plain floats:
    on a decision's few rows numpy's window view costs several times the arithmetic. Each delta is
    the float32 difference to the bit: the double difference of two float32 values, rounded to
    float32, is the correctly rounded float32 one (53 >= 2 * 24 + 2 bits)."""
    v = np.asarray(values, dtype=np.float32).tolist()
    padded = [v[0]] * k + v
    rows = []
    for end in range(k + len(v) - (len(v) if last is None else last), k + len(v)):
        window = padded[end - k:end + 1]
        rows.append(window + [b - a for a, b in zip(window, window[1:])])
    return np.array(rows, dtype=np.float32)


class RiskHead(nn.Module):
    def __init__(self, k: int = 8, hidden: int = 64):
        super().__init__()
        self.k = k
        self.body = nn.Sequential(nn.Linear(2 * k + 1, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        return self.body(history).squeeze(-1)


def fit_risk_head(value_traces: list[np.ndarray], config: RiskConfig = RiskConfig(), epochs: int = 40,
                  seed: int = 0) -> RiskHead:
    torch.manual_seed(seed)
    xs, ys = [], []
    for trace in value_traces:
        xs.append(history_windows(trace, config.k))
        ys.append(tvr_targets(trace, config))
    x, y = torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))
    head = RiskHead(config.k)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
    for _ in range(epochs):
        perm = torch.randperm(len(x))
        for b in range(0, len(x), 256):
            idx = perm[b:b + 256]
            loss = torch.mean((head(x[idx]) - y[idx]) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return head.eval()


class RiskMonitor:
    """Online: value history -> (learned risk, rule flags). The head runs in numpy (critics.mlp)."""

    def __init__(self, head: RiskHead | None, config: RiskConfig = RiskConfig()):
        self.config = config
        self._head = NumpyMLP(head.body) if head is not None else None
        self.reset()

    def reset(self) -> None:
        self._values: deque[float] = deque(maxlen=max(self.config.window, self.config.k + 1) + 4)
        self.risk = 0.0

    @property
    def flags(self) -> dict[str, bool]:
        """The rules on the latest values, judged when asked: only decisions (every k steps) read them."""
        return rule_flags(np.array(self._values), self.config)

    def update(self, values: Sequence[float]) -> list[float]:
        """Take the next run of values (the supervisor scores the steps between two decisions
        together); returns the risk after each, the head run once over all of them."""
        trace = [*self._values, *values]  # the deque holds the k values each new one's window looks back on
        self._values.extend(values)
        if self._head is None or not values:
            return [self.risk] * len(values)
        risks = self._head(history_windows(trace, self.config.k, last=len(values)))[:, 0].tolist()
        self.risk = risks[-1]
        return risks
