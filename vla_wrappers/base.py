"""The policy contract: reset with the instruction, infer an action chunk from an observation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recovery.backend import ACTION_DIM, Observation


class PolicyError(RuntimeError):
    """A policy produced something that must not reach the robot."""


@dataclass(frozen=True)
class PolicyOutput:
    actions: np.ndarray  # (H, 7): end-effector deltas + gripper, one row per control step
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        actions = np.asarray(self.actions, dtype=np.float64)
        if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or len(actions) == 0:
            raise PolicyError(f"policy returned an action chunk of shape {actions.shape}; expected (H, {ACTION_DIM})")
        if not np.all(np.isfinite(actions)):
            raise PolicyError("policy returned NaN/Inf actions")
        object.__setattr__(self, "actions", actions)


class Policy(ABC):
    """A frozen base policy. ``needs_images`` tells the backend to render cameras."""

    needs_images: bool = False

    @abstractmethod
    def reset(self, instruction: str) -> None:
        """Start an episode of the task described by ``instruction``."""

    @abstractmethod
    def infer(self, obs: Observation) -> PolicyOutput:
        """One inference: an action chunk for the next steps."""

    def close(self) -> None:
        """Release connections or models."""
