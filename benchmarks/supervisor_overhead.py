"""Per-step cost of the supervisor (quality metrics + value critic + risk head + contacts + memory +
selector) against a bare LIBERO physics step, measured side by side in one run.

Measured for the default rule selector, which reads no value or risk (so the value critic is not
loaded), and, when a critic is found (``--critic``, else the suite's shipped one), for a selector
that reads it (the rule with its value-drop flags on; the ppo selector reads it too). The
supervisor's time excludes what is not supervision: the base policy (the zero policy's broker); the
physics of every step, rollback motion included, runs outside ``Supervisor.act``. What the episode
loop pays without any supervisor (an agent that only asks the broker, timed by the same clocks, so
their own cost cancels) is measured beside it and subtracted.

Writes benchmarks/results/supervisor_overhead.json (libero_object task 0, 150 steps), or
supervisor_overhead_SUITE_STEPS.json for another suite or episode length: the supervisor's memory,
histories and reference search are bounded, so a 520-step libero_10 episode should cost the same
per step (``--suite libero_10 --steps 520``).
Usage: python benchmarks/supervisor_overhead.py [--suite SUITE] [--steps N] [--critic PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from recovery.core.actions import WAIT_ACTION
from recovery.core.loop import Control
from recovery.evaluation import assembly
from recovery.evaluation.results import EpisodeSpec
from recovery.supervision.build import critic_path
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.selectors import RuleConfig, RuleSelector
from recovery.supervision.supervisor import Supervisor
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import ZeroPolicy

RESULTS = Path(__file__).parent / "results"
SUITE, STEPS, REPEATS = "libero_object", 150, 7


def now() -> np.ndarray:
    """Wall-clock and this thread's CPU time: on a shared machine the second leaves out the
    time other processes hold the cores, the first is what an episode waits."""
    return np.array([time.perf_counter(), time.thread_time()])


class Excluded:
    """Clock of the calls made inside ``Supervisor.act`` that are not supervision."""

    def __init__(self):
        self.seconds = np.zeros(2)

    def wrap(self, owner: object, name: str) -> None:
        inner: Callable = getattr(owner, name)

        def timed(*args, **kwargs):
            start = now()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += now() - start

        setattr(owner, name, timed)


def bare_ms_per_step(backend: LiberoBackend, steps: int) -> np.ndarray:
    backend.reset(0, 7)
    start = now()
    for _ in range(steps):
        backend.raw.step(WAIT_ACTION)
    return (now() - start) / steps * 1e3


class PolicyOnly:
    """The agent of an episode without supervision: the base policy's action every period."""

    def __init__(self, broker: ChunkBroker):
        self.broker = broker

    def reset(self, instruction: str) -> None:
        self.broker.reset(instruction)

    def act(self, obs: dict) -> Control:
        return Control(self.broker.act(obs))


def agent_ms_per_step(backend: LiberoBackend, agent: Supervisor | PolicyOnly, excluded: Excluded,
                      steps: int) -> np.ndarray:
    """Time inside ``agent.act`` less the excluded calls; the physics steps run outside it."""
    obs = backend.reset(0, 7)
    agent.reset(backend.instruction)
    excluded.seconds = np.zeros(2)
    spent = np.zeros(2)
    for _ in range(steps):
        start = now()
        control = agent.act(obs)
        spent += now() - start
        obs = backend.step(control.command).observation
    return (spent - excluded.seconds) / steps * 1e3


def timed_broker(excluded: Excluded) -> ChunkBroker:
    broker = ChunkBroker(ZeroPolicy())
    excluded.wrap(broker, "act")
    return broker


def build(backend: LiberoBackend, spec: EpisodeSpec, selector: RuleSelector, critic: Path | None,
          excluded: Excluded) -> Supervisor:
    """The assembly loads the critic only for a selector that reads value or risk."""
    return assembly.build_supervisor(backend, timed_broker(excluded), spec, RecoveryOptions(critic=critic), selector)


def summarize(bare: list[np.ndarray], ours: list[np.ndarray], policy_only: list[np.ndarray],
              supervisor: Supervisor) -> dict:
    out = {}
    for i, clock in enumerate(("wall", "cpu")):
        b, o, p = [x[i] for x in bare], [x[i] for x in ours], [x[i] for x in policy_only]
        ratios = [(oi - pi) / bi for oi, pi, bi in zip(o, p, b)]
        out[clock] = {
            "bare_physics_ms_per_step_median": statistics.median(b),
            "supervisor_ms_per_step_median": statistics.median(o),
            "policy_only_agent_ms_per_step_median": statistics.median(p),
            "overhead_ratio_median": statistics.median(ratios), "overhead_ratio_min": min(ratios),
            "overhead_ratio_max": max(ratios),
        }
    return {**out, "rollbacks_last_repeat": supervisor.rollbacks,
            "recovery_steps_last_repeat": supervisor.recovery_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=SUITE, help=f"task 0 of this suite (default {SUITE})")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"steps per timed episode (default {STEPS})")
    parser.add_argument("--critic", type=Path, help="value critic (default: the suite's shipped one, if any)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as every worker beside the simulator
    spec, steps = EpisodeSpec(args.suite, 0, 0, 7, "zero", selector="rule"), args.steps
    critic = args.critic or critic_path(RecoveryOptions(), spec.suite)
    backend = LiberoBackend(resolve_task(spec.suite, spec.task))
    excluded = Excluded()
    variants = {"without_critic": build(backend, spec, RuleSelector(), critic, excluded)}  # the default rule
    if critic:  # a selector that reads the critic (the rule with its value-drop flags on; ppo does too)
        reading = RuleSelector(RuleConfig(value_drop_rules=("decline", "abrupt_drop")))
        variants["with_critic"] = build(backend, spec, reading, critic, excluded)
    policy_only = PolicyOnly(timed_broker(excluded))
    bare_ms_per_step(backend, steps)  # warm-up
    bare, ours, floor = ({name: [] for name in variants} for _ in range(3))
    for _ in range(REPEATS):  # alternate so that machine drift hits all alike
        for name, supervisor in variants.items():
            bare[name].append(bare_ms_per_step(backend, steps))
            ours[name].append(agent_ms_per_step(backend, supervisor, excluded, steps))
            floor[name].append(agent_ms_per_step(backend, policy_only, excluded, steps))
    backend.close()
    out = RESULTS / ("supervisor_overhead.json" if (spec.suite, steps) == (SUITE, STEPS)
                     else f"supervisor_overhead_{spec.suite}_{steps}.json")
    figures = {"task": f"{spec.suite}/{spec.task}", "steps": steps, "repeats": REPEATS,
               "critic": critic.name if critic else None,
               "excluded": "base policy (zero policy broker); physics steps, rollback motion included, run outside",
               "overhead": "(supervisor - policy-only agent) / bare physics step, per repeat",
               **{name: summarize(bare[name], ours[name], floor[name], supervisor)
                  for name, supervisor in variants.items()}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    for name in variants:
        for clock in ("wall", "cpu"):
            f = figures[name][clock]
            print(f"{name}, {clock}: bare physics {f['bare_physics_ms_per_step_median']:.2f} ms/step, supervisor "
                  f"{f['supervisor_ms_per_step_median']:.3f} ms/step, policy-only agent "
                  f"{f['policy_only_agent_ms_per_step_median']:.3f}: overhead {f['overhead_ratio_median']:.2%} "
                  f"(min {f['overhead_ratio_min']:.1%}, max {f['overhead_ratio_max']:.1%})")
    print(f"critic: {figures['critic']}\nwritten to {out}")


if __name__ == "__main__":
    main()
