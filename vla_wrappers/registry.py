"""Policies by name, for ``recovery eval --policy NAME``.

A name is a registered policy or ``module:Class`` naming your own ``Policy`` subclass, imported
only when chosen (so no policy's dependencies load unless it runs). Every policy is built with
``Class.from_options(backend, options)`` from the ``--policy-opt KEY=VALUE`` strings: privileged
policies read the backend they drive, the others ignore it.
"""

from __future__ import annotations

import importlib

import numpy as np

from recovery.core.actions import GRIPPER_OPEN
from recovery.core.robot import Observation, RobotBackend
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput


class ZeroPolicy(Policy):
    """Stands still with the gripper open: the do-nothing baseline (and the benchmark's load)."""

    def __init__(self, backend: RobotBackend | None = None):
        pass

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs: Observation) -> PolicyOutput:
        return PolicyOutput(np.array([[0.0] * 6 + [GRIPPER_OPEN]]))


# name -> "module:Class", imported on use so that no policy's dependencies load unless chosen
POLICIES = {
    "embedded": "vla_wrappers.embedded.policy:EmbeddedPolicy",
    "expert": "sim.expert_policy:ExpertPolicy",
    "openpi": "vla_wrappers.openpi.client:OpenPIClientPolicy",
    "openvla": "vla_wrappers.openvla.policy:OpenVLAPolicy",
    "repair": "vla_wrappers.repair.policy:RepairPolicy",  # a repair policy: reads obs["repair_target"]
    "zero": "vla_wrappers.registry:ZeroPolicy",
}


def policy_names() -> list[str]:
    return sorted(POLICIES)


def policy_class(name: str) -> type[Policy]:
    path = POLICIES.get(name, name)
    module, sep, attr = path.partition(":")
    if not sep:
        raise PolicyConfigError(f"unknown policy {name!r}; registered: {', '.join(policy_names())} (or module:Class)")
    try:
        cls = getattr(importlib.import_module(module), attr, None)
    except ImportError as exc:
        raise PolicyConfigError(f"cannot import policy {path!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise PolicyConfigError(f"{path!r} is not a Policy subclass")
    return cls


def make_policy(name: str, backend: RobotBackend | None, options: dict[str, str] | None = None) -> Policy:
    return policy_class(name).from_options(backend, options or {})
