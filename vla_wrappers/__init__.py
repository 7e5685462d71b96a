"""Base policies: one interface (``Policy``), the chunk broker, and the registered policies."""

import recovery.core.float_paths  # noqa: F401  (first: pins the CPU-dependent float paths before numpy loads)
from vla_wrappers.base import Policy, PolicyOutput
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy, policy_class, policy_names

__all__ = ["ChunkBroker", "Policy", "PolicyOutput", "make_policy", "policy_class", "policy_names"]
