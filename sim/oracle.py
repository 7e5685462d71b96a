"""A detection upper bound for simulation: a selector that is told when the disturbance ended.

At the first decision after the burst it asks for one rollback (RETRY: the best state of the last
``window`` steps, mostly from before the burst), what a perfect detector would do. The supervisor
refuses a rollback it has no reproducible target for; the oracle asks again at each decision until
the pre-burst states leave the RETRY window. Set beside ``rule`` it separates what
recovery could gain from what the detector finds. ``oracle_repair`` asks for a REPAIR instead:
``recovery collect-repairs`` runs it to record repairs. Like snapshot rollback it exists only in
simulation; its records are labelled by its name.
"""

from __future__ import annotations

from recovery.core.decision import DecisionContext
from recovery.core.modes import Mode
from sim.disturbances import DisturbedBackend


class DisturbanceOracle:
    reads_value = False

    def __init__(self, window: int, mode: Mode = Mode.RETRY) -> None:
        self.window = window  # the supervisor's RETRY horizon: steps after the burst in which pre-burst
        # states are still RETRY targets
        self.mode = mode  # what it asks for: RETRY, or REPAIR (``oracle_repair``: collecting repair demonstrations)
        self.backend: DisturbedBackend | None = None

    def bind(self, backend: DisturbedBackend) -> None:
        if not isinstance(backend, DisturbedBackend):
            raise TypeError("the oracle selector reads the disturbance: it needs a DisturbedBackend")
        self.backend = backend

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        settings = {"simulation_only": "told when the disturbance ended", "window": self.window}
        return settings if self.mode == Mode.RETRY else {**settings, "mode": self.mode.name}

    def decide(self, ctx: DecisionContext) -> Mode:
        since = self.backend.steps_since_disturbance
        if since is None or since >= self.window or ctx.last_rollback_mode is not None or ctx.rollbacks_left <= 0:
            return Mode.EXECUTE
        return self.mode
