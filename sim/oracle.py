"""A detection upper bound for simulation: a selector that is told when the disturbance ended.

At the first decision after the burst it asks for one rollback (RETRY: the best state of the last
``window`` steps, mostly from before the burst), what a perfect detector would do. The supervisor
refuses a rollback it has no reproducible target for; the oracle asks again at each decision until
the pre-burst states leave the RETRY window. Set beside ``rule`` it separates what
recovery could gain from what the detector finds. Like snapshot rollback it exists only in
simulation; its records are labelled by its name, ``oracle``.
"""

from __future__ import annotations

from recovery.core.decision import DecisionContext
from recovery.core.modes import Mode
from sim.disturbances import DisturbedBackend


class DisturbanceOracle:
    reads_value = False

    def __init__(self, window: int) -> None:
        self.window = window  # the supervisor's RETRY horizon: steps after the burst in which pre-burst
        # states are still RETRY targets
        self.backend: DisturbedBackend | None = None

    def bind(self, backend: DisturbedBackend) -> None:
        if not isinstance(backend, DisturbedBackend):
            raise TypeError("the oracle selector reads the disturbance: it needs a DisturbedBackend")
        self.backend = backend

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        return {"simulation_only": "told when the disturbance ended", "window": self.window}

    def decide(self, ctx: DecisionContext) -> Mode:
        since = self.backend.steps_since_disturbance
        if since is None or since >= self.window or ctx.last_rollback_mode is not None or ctx.rollbacks_left <= 0:
            return Mode.EXECUTE
        return Mode.RETRY
