"""The scripted expert behind the Policy interface (one-step chunks: it re-plans every step)."""

from __future__ import annotations

from recovery.core.robot import Observation, RobotBackend
from sim.expert import ScriptedExpert
from sim.libero_backend import LiberoBackend
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput


class ExpertPolicy(Policy):
    def __init__(self, backend: RobotBackend | None):
        sim = backend.unwrapped if backend is not None else None
        if not isinstance(sim, LiberoBackend):
            raise PolicyConfigError("the scripted expert reads privileged simulator state: it needs a LiberoBackend")
        self._expert = ScriptedExpert(sim)  # the oracle sees the true state, never a disturbed one

    def reset(self, instruction: str) -> None:
        self._expert.reset()

    def infer(self, obs: Observation) -> PolicyOutput:
        return PolicyOutput(self._expert.act(obs)[None])
