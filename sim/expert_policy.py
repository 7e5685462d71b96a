"""The scripted expert behind the Policy interface (one-step chunks: it re-plans every step)."""

from __future__ import annotations

from recovery.backend import Observation
from sim.expert import ScriptedExpert
from sim.libero_backend import LiberoBackend
from vla_wrappers.base import Policy, PolicyOutput


class ExpertPolicy(Policy):
    def __init__(self, backend: LiberoBackend):
        if not isinstance(backend, LiberoBackend):
            raise TypeError("the scripted expert reads privileged simulator state: it needs a LiberoBackend")
        self._expert = ScriptedExpert(backend)

    def reset(self, instruction: str) -> None:
        self._expert.reset()

    def infer(self, obs: Observation) -> PolicyOutput:
        return PolicyOutput(self._expert.act(obs)[None])
