"""Is a post-burst outcome a function of the state the critic sees? An experiment, not a tool: on
sampled layouts (seeds 7000+, none of the critic's), the episode loop runs the embedded policy under
the action-noise burst to the step after the burst; then the simulator, the broker's queue and the
disturbance's clock are snapshotted and the rest of the episode is played K + 1 times from there,
each by its own episode loop: branch 0 as is, branch 1 as is again (the replay must agree), branches
2..K with the next action's arm part moved by EPS times a standard normal (EPS = 0.001: 0.05 mm of
goal). Prints one JSON line a state.

Usage: python reports/critics/branch_outcomes.py SUITE LAYOUTS_PER_TASK K EPS [FIRST_LAYOUT] > OUT.jsonl
(we ran: libero_spatial 2 6 0.001 > reports/critics/branch_outcomes_libero_spatial.jsonl; FIRST_LAYOUT,
default 0, splits a run between processes)
"""

import json
import sys

import numpy as np
import torch

from recovery.core.loop import EpisodeLoop, LoopConfig
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy


class Nudged:
    """The broker, with its next action's arm part moved by ``offset`` (once)."""

    def __init__(self, broker: ChunkBroker, offset: np.ndarray | None):
        self.broker, self.offset, self.inferences = broker, offset, 0

    def act(self, obs: dict) -> np.ndarray:
        action = np.asarray(self.broker.act(obs), dtype=np.float64)
        if self.offset is not None:
            action, self.offset = action + np.r_[self.offset, 0.0], None
        return action


def play(loop: EpisodeLoop) -> bool:
    """Step ``loop`` to its end; an error ends the experiment, it is not an outcome."""
    while not loop.over:
        loop.step()
    if loop.error is not None:
        raise loop.error
    return loop.success


def main() -> None:
    suite, per_task, branches, eps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    torch.set_num_threads(1)
    for task_index in range(10):
        task = resolve_task(suite, task_index)
        backend = DisturbedBackend(LiberoBackend(task), DisturbanceConfig(name="action_noise"), task_index)
        broker = ChunkBroker(make_policy("embedded", backend), 5)
        config = LoopConfig(max_steps=task.max_steps)
        for j in range(first, first + per_task):
            seed = 7000 + 100 * task_index + j
            backend.reset(None, seed)
            loop = EpisodeLoop(backend, broker, config)
            loop.start(backend.instruction)
            while not loop.over and backend.steps_since_disturbance != 0:
                loop.step()
            if loop.error is not None:
                raise loop.error
            if loop.over:  # a success, or the budget spent, before the burst ended
                continue
            snapshot, queue, clock = backend.snapshot(), broker.pending(), backend.clock()
            outcomes = []
            for b in range(branches + 1):
                backend.restore(snapshot)
                broker.set_pending(queue)
                backend.set_clock(clock)
                offset = eps * np.random.default_rng(b).standard_normal(6) if b > 1 else None
                branch = EpisodeLoop(backend, Nudged(broker, offset), config)
                branch.steps = loop.steps
                outcomes.append(play(branch))
            print(json.dumps({"task": task_index, "seed": seed, "burst_end_step": loop.steps,
                              "replay_same": outcomes[0] == outcomes[1], "base": outcomes[0],
                              "perturbed": outcomes[2:]}), flush=True)
        backend.close()


if __name__ == "__main__":
    main()
