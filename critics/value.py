"""Value critic V(s): probability-like estimate of eventual success from the state features.

Trained (``recovery train-critic``) by regression on discounted Monte-Carlo outcomes of base-policy
rollouts: V_t = gamma^(T - t) for a success at step T, 0 throughout a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from scipy.special import expit
from torch import nn

from critics.mlp import NumpyMLP
from critics.risk import RiskHead
from recovery.core.errors import RecoveryError
from recovery.core.features import FeatureLayout
from recovery.core.files import written_atomically
from recovery.core.robot import Observation


class CriticConfigError(RecoveryError, ValueError):
    """A critic checkpoint that is not one, or one trained on other tasks (a user error)."""


CRITIC_FORMAT = "agentic-recovery/value-critic"
CRITIC_VERSION = 2  # 2: the layout's per-task objects of interest and their slots (``FeatureLayout``)


def discounted_outcome(length: int, success: bool, gamma: float = 0.99) -> np.ndarray:
    """Per-step targets of one episode of ``length`` steps."""
    if not success:
        return np.zeros(length, dtype=np.float32)
    return (gamma ** np.arange(length - 1, -1, -1)).astype(np.float32)


class ValueNet(nn.Module):
    def __init__(self, in_size: int, hidden: int = 64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_size, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                  nn.Linear(hidden, 1))
        self.register_buffer("feat_mean", torch.zeros(in_size))
        self.register_buffer("feat_std", torch.ones(in_size))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.body((features - self.feat_mean) / self.feat_std)).squeeze(-1)


@dataclass
class ValueCritic:
    """The value net plus (optionally) the temporal value-risk head trained on its value traces."""

    layout: FeatureLayout
    net: ValueNet
    risk_head: RiskHead | None
    training: dict

    def values(self, features: np.ndarray) -> np.ndarray:
        """V for feature rows (..., D), computed in numpy: the same function as ``net`` (critics.mlp)."""
        mean, std, body = self._numpy_net
        return expit(body((np.asarray(features, dtype=np.float32) - mean) / std)[..., 0])

    @cached_property
    def _numpy_net(self) -> tuple[np.ndarray, np.ndarray, NumpyMLP]:
        return self.net.feat_mean.numpy().copy(), self.net.feat_std.numpy().copy(), NumpyMLP(self.net.body)

    def value_fn(self, instruction: str) -> Callable[[Sequence[Observation]], list[float]]:
        """V of each of a run of observations, in one pass of the net (the supervisor scores the
        states between two decisions together)."""
        task_id = self.layout.task_id(instruction)
        if task_id is None:
            raise CriticConfigError(f"the value critic was not trained on {instruction!r}")
        return lambda observations: self.values(self.layout.featurize_observations(observations, task_id)).tolist()

    def save(self, path: Path) -> None:
        with written_atomically(path) as tmp:
            torch.save({"format": CRITIC_FORMAT, "version": CRITIC_VERSION,
                        "object_names": list(self.layout.object_names), "instructions": list(self.layout.instructions),
                        "task_objects": [list(objects) for objects in self.layout.task_objects],
                        "task_slots": self.layout.task_slots,
                        "hidden": self.net.body[0].out_features, "state_dict": self.net.state_dict(),
                        "risk_k": self.risk_head.k if self.risk_head else 0,
                        "risk_state_dict": self.risk_head.state_dict() if self.risk_head else {},
                        "training": self.training}, tmp)

    @classmethod
    def load(cls, path: Path) -> "ValueCritic":
        raw = torch.load(path, map_location="cpu", weights_only=True)
        if raw.get("format") != CRITIC_FORMAT or raw.get("version") not in (1, CRITIC_VERSION):
            raise CriticConfigError(f"{path}: not a value-critic checkpoint v1-v{CRITIC_VERSION} "
                                    f"(format {raw.get('format')!r} v{raw.get('version')})")
        layout = FeatureLayout(tuple(raw["object_names"]), tuple(raw["instructions"]),
                               tuple(tuple(objects) for objects in raw.get("task_objects", ())),
                               raw.get("task_slots", False))
        net = ValueNet(layout.size, raw["hidden"])
        net.load_state_dict(raw["state_dict"])
        head = None
        if raw["risk_k"]:
            head = RiskHead(raw["risk_k"])
            head.load_state_dict(raw["risk_state_dict"])
            head.eval()
        return cls(layout, net.eval(), head, raw["training"])


def fit_value_net(features: np.ndarray, targets: np.ndarray, epochs: int = 30, seed: int = 0,
                  hidden: int = 64, weight_decay: float = 1e-4) -> ValueNet:
    """V on (n, D) feature rows against per-row targets in [0, 1]."""
    torch.manual_seed(seed)
    net = ValueNet(features.shape[1], hidden)
    net.feat_mean.copy_(torch.from_numpy(features.mean(0)))
    net.feat_std.copy_(torch.from_numpy(np.maximum(features.std(0), 1e-3)))
    x, y = torch.from_numpy(features), torch.from_numpy(targets)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=weight_decay)
    for _ in range(epochs):
        perm = torch.randperm(len(x))
        for b in range(0, len(x), 256):
            idx = perm[b:b + 256]
            loss = nn.functional.binary_cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net.eval()
