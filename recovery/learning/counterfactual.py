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
"""

from __future__ import annotations

from recovery.core.loop import EpisodeLoop, LoopConfig
from sim.disturbances import DisturbedBackend
from vla_wrappers.broker import ChunkBroker


def outcome_left_alone(backend: DisturbedBackend, broker: ChunkBroker, steps: int, max_steps: int) -> bool:
    """Whether the base policy, left alone from here (``steps`` periods of ``max_steps`` spent),
    completes the task. The simulator, the disturbance's clock, the broker's in-flight chunk and its
    count of inferences are put back as they were; the policy must keep no other state between
    inferences (the embedded policy keeps none)."""
    snapshot, clock = backend.snapshot(derived=True), backend.clock()  # derived: come back reading what it read
    pending, inferences = broker.pending(), broker.inferences
    branch = EpisodeLoop(backend, broker, LoopConfig(max_steps=max_steps, wait_steps=0))
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
        broker.set_pending(pending)
        broker.inferences = inferences
