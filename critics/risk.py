"""Temporal value-risk (UniIntervene): is the value declining, stalled, or did it just drop?

- Rules over the min-max-normalised value of the last ``window`` steps: decline (slope <= -0.01,
  drop >= 0.05, >= 70% of steps down), plateau (>= 60% of |delta| <= 0.03, amplitude <= 0.12),
  abrupt drop (a one-step drop >= 0.12 not half-recovered within 3 steps).
- Learned head: a small MLP reading the last K+1 values and K deltas, regressing the target
  TVR_t = (1 - V_t) sum_{i<K} gamma^i (eps - delta_{t+i}).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


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
    """The three intervention rules on the most recent ``window`` (+ recovery look-back) values."""
    v = np.asarray(values, dtype=np.float64)[-config.window:]
    flags = {"decline": False, "plateau": False, "abrupt_drop": False}
    if len(v) < config.window:
        return flags
    span = v.max() - v.min()
    norm = (v - v.min()) / span if span > 1e-9 else np.zeros_like(v)
    deltas = np.diff(norm)
    x = np.arange(len(norm)) - (len(norm) - 1) / 2
    slope = float(x @ (norm - norm.mean()) / (x @ x))  # least-squares slope
    flags["decline"] = bool(slope <= config.decline_slope and norm[0] - norm[-1] >= config.decline_drop
                            and np.mean(deltas < 0) >= config.decline_share)
    raw_deltas = np.diff(v)
    flags["plateau"] = bool(np.mean(np.abs(raw_deltas) <= config.plateau_delta) >= config.plateau_share
                            and span <= config.plateau_amplitude)
    tail = config.abrupt_recover_steps
    for i in range(len(raw_deltas) - tail, len(raw_deltas)):  # a drop recent enough to judge
        if i >= 0 and -raw_deltas[i] >= config.abrupt_drop:
            before, after = v[i], v[i + 1:].max()
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


def history_features(values: np.ndarray, k: int) -> np.ndarray:
    """Last k+1 values (front-padded with the first) and their k deltas."""
    v = np.asarray(values, dtype=np.float32)[-(k + 1):]
    v = np.concatenate([np.full(k + 1 - len(v), v[0], dtype=np.float32), v]) if len(v) <= k else v
    return np.concatenate([v, np.diff(v)])


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
        targets = tvr_targets(trace, config)
        for t in range(len(trace)):
            xs.append(history_features(trace[: t + 1], config.k))
            ys.append(targets[t])
    x, y = torch.from_numpy(np.stack(xs)), torch.from_numpy(np.array(ys, dtype=np.float32))
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
    """Online: value history -> (learned risk, rule flags)."""

    def __init__(self, head: RiskHead | None, config: RiskConfig = RiskConfig()):
        self.head, self.config = head, config
        self.reset()

    def reset(self) -> None:
        self._values: deque[float] = deque(maxlen=max(self.config.window, self.config.k + 1) + 4)
        self.risk, self.flags = 0.0, rule_flags(np.array([]), self.config)

    @torch.no_grad()
    def update(self, value: float) -> float:
        self._values.append(value)
        history = np.array(self._values)
        self.flags = rule_flags(history, self.config)
        if self.head is not None:
            self.risk = float(self.head(torch.from_numpy(history_features(history, self.config.k))[None])[0])
        return self.risk
