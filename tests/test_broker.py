import numpy as np

from vla_wrappers.base import Policy, PolicyOutput
from vla_wrappers.broker import ChunkBroker


class Counting(Policy):
    """Chunk k holds actions k*100 + 0..7 in the first dimension, so the broker's choice is visible."""

    def __init__(self):
        self.calls = 0

    def reset(self, instruction: str) -> None:
        self.instruction = instruction

    def infer(self, obs) -> PolicyOutput:
        self.calls += 1
        actions = np.zeros((8, 7))
        actions[:, 0] = (self.calls - 1) * 100 + np.arange(8)
        return PolicyOutput(actions)


def test_executes_the_first_n_actions_then_replans():
    broker = ChunkBroker(Counting(), replan_every=5)
    broker.reset("task")
    served = [broker.act({})[0] for _ in range(12)]
    assert served == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 200, 201]
    assert broker.inferences == 3


def test_flush_drops_the_in_flight_chunk():
    broker = ChunkBroker(Counting(), replan_every=5)
    broker.reset("task")
    assert [broker.act({})[0] for _ in range(2)] == [0, 1]
    broker.flush()  # e.g. after a rollback
    assert broker.act({})[0] == 100 and broker.inferences == 2


def test_reset_starts_a_new_episode():
    policy = Counting()
    broker = ChunkBroker(policy, replan_every=5)
    broker.reset("first")
    broker.act({})
    broker.reset("second")
    assert broker.inferences == 0 and policy.instruction == "second"
    assert broker.act({})[0] == 100


def test_the_in_flight_chunk_can_be_set_aside_and_resumed():
    """What the counterfactual reward does: play on, then put the chunk back as it was."""
    broker = ChunkBroker(Counting(), replan_every=5)
    broker.reset("task")
    served = [broker.act({})[0] for _ in range(2)]
    pending = broker.pending()
    assert [a[0] for a in pending] == [2, 3, 4]
    played = [broker.act({})[0] for _ in range(4)]
    broker.set_pending(pending)
    assert served + played == [0, 1, 2, 3, 4, 100] and [broker.act({})[0] for _ in range(4)] == [2, 3, 4, 200]
