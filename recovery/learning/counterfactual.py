"""The base policy's own outcome from the present, played out in simulation and then undone.

PPO with a +1 / -1 outcome learns little about an intervention: one RETRY in fifty decisions, whose
effect on the episode is buried in how hard the layout and the disturbance were. Against the
outcome the base policy reaches alone from the same state (the counterfactual), an intervention
that changed nothing scores 0, one that won the episode +2, one that lost it -2.

Played from the first decision that asks for a recovery: before it nothing has intervened, so the
outcome played alone from there is a draw of the base policy's outcome from the episode's start,
whatever decided when to ask (a stopping time). Its expectation does not depend on the selector:
subtracting it changes the reward's variance, not what maximises it.

Per intervention (``RewardConfig.counterfactual == "intervention"``): one play-out before the first
recovery and one after each. A recovery is paid the difference of the outcomes played alone after
and before it; the simulation is deterministic, so the outcome played after one recovery is the one
played before the next (the episode only executes in between), and the payments add up to the
episode's total above. What changes is who is paid: a RETRY before the burst, followed by the one
after it that wins the episode, no longer takes that win's credit.

``outcome_after`` plays the other branch: a recovery asked for now, then the base policy alone,
through a fork of the supervisor (``Supervisor.fork``); ``recovery improve-selector`` labels
decisions with both outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence

from recovery.core.decision import DecisionContext
from recovery.core.loop import Agent, EpisodeLoop, LoopConfig
from recovery.core.modes import Mode
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbedBackend
from vla_wrappers.broker import ChunkBroker


def outcome_left_alone(backend: DisturbedBackend, broker: ChunkBroker, steps: int, max_steps: int) -> bool:
    """Whether the base policy, left alone from here (``steps`` periods of ``max_steps`` spent),
    completes the task; the policy must keep no state between inferences but the broker's (the
    embedded policy keeps none)."""
    return play_out(backend, broker, (broker,), steps, max_steps)


def outcome_after(backend: DisturbedBackend, supervisor: Supervisor, mode: Mode, steps: int,
                  max_steps: int) -> tuple[bool, bool]:
    """Whether the task completes if the supervisor, at its pending decision, is asked for ``mode``
    once and never again (the base policy alone after the recovery), and whether it ran ``mode``
    (it refuses a recovery past its budget or without a state to go back to)."""
    branch = supervisor.fork(_Once(mode))
    success = play_out(backend, branch, tuple(b for b in (supervisor.broker, supervisor.repair) if b), steps, max_steps)
    return success, len(branch.summary()["recoveries"]) > len(supervisor.summary()["recoveries"])


def play_out(backend: DisturbedBackend, agent: Agent, brokers: Sequence[ChunkBroker], steps: int,
             max_steps: int) -> bool:
    """Whether the episode, played on from here by ``agent``, completes the task. The simulator, the
    disturbance's clock, and each broker's in-flight chunk and count of inferences are put back as
    they were."""
    snapshot, clock = backend.snapshot(derived=True), backend.clock()  # derived: come back reading what it read
    saved = [(broker.pending(), broker.inferences) for broker in brokers]
    branch = EpisodeLoop(backend, agent, LoopConfig(max_steps=max_steps, wait_steps=0))
    branch.steps = steps
    try:
        while not branch.over:
            branch.step()
        if branch.error is not None:
            raise branch.error
        return branch.success
    finally:
        backend.restore(snapshot)
        backend.set_clock(clock)
        for broker, (pending, inferences) in zip(brokers, saved):
            broker.set_pending(pending)
            broker.inferences = inferences


class _Once:
    """Asks for ``mode`` at the first decision, EXECUTE after."""

    reads_value = True

    def __init__(self, mode: Mode) -> None:
        self.mode, self._asked = mode, False

    def reset(self) -> None:
        self._asked = False

    def settings(self) -> dict:
        return {"mode": self.mode.name, "once": True}

    def decide(self, ctx: DecisionContext) -> Mode:
        asked, self._asked = (Mode.EXECUTE if self._asked else self.mode), True
        return asked
