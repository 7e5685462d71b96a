"""The policy contract: reset with the instruction, infer an action chunk from an observation."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from recovery.core.actions import ACTION_DIM
from recovery.core.errors import RecoveryError
from recovery.core.robot import Observation


class PolicyError(RecoveryError, RuntimeError):
    """A policy produced something that must not reach the robot."""


class PolicyConfigError(RecoveryError, ValueError):
    """An unknown policy name or a bad policy option (a user error, reported before anything runs)."""


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

    @classmethod
    def from_options(cls, backend: Any, options: dict[str, str]) -> "Policy":
        """Build from ``--policy-opt KEY=VALUE`` strings; policies with settings override this."""
        if options:
            raise PolicyConfigError(f"{cls.__name__} takes no options, got {sorted(options)}")
        return cls(backend)

    @abstractmethod
    def reset(self, instruction: str) -> None:
        """Start an episode of the task described by ``instruction``."""

    @abstractmethod
    def infer(self, obs: Observation) -> PolicyOutput:
        """One inference: an action chunk for the next steps."""

    def weights_digest(self) -> str | None:
        """A digest of the weights this policy runs, where they are a file of ours to read (None: a
        remote server, a scripted expert, or not known before the first task): what a value critic
        trained on the policy's rollouts is bound to."""
        return None

    def close(self) -> None:
        """Release connections or models."""


ConfigT = TypeVar("ConfigT")


def config_from_options(config_cls: type[ConfigT], options: dict[str, str]) -> ConfigT:
    """A dataclass config from KEY=VALUE strings, each converted to its field's default's type."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise PolicyConfigError(f"unknown option(s) {unknown} for {config_cls.__name__}; valid: {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, text in options.items():
        default = fields[name].default
        if isinstance(default, bool):
            values[name] = text.lower() in ("1", "true", "yes", "on")
        elif default is None or isinstance(default, str):
            values[name] = text
        else:
            try:
                values[name] = type(default)(text)
            except ValueError as exc:
                raise PolicyConfigError(f"option {name}={text!r}: expected {type(default).__name__}") from exc
    return config_cls(**values)


def resolve_device(name: str) -> str:
    """``auto`` picks CUDA when torch sees a GPU; nothing here assumes one."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name != "cpu" and not name.startswith("cuda"):
        raise PolicyConfigError(f"device={name!r}; expected auto, cpu or cuda[:N]")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PolicyConfigError(f"device={name!r} asked for, but torch sees no CUDA device")
    return name
