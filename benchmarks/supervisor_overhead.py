"""Per-step cost of the supervisor (quality metrics + value critic + risk head + contacts + memory +
selector) against a bare LIBERO physics step, measured side by side in one run.

Measured for the default rule selector, which reads no value or risk (so the value critic is not
loaded), and, when a critic is found (``--critic``, else the suite's shipped one), for a selector
that reads it (the rule with its value-drop flags on; the ppo selector reads it too). The
supervisor's time excludes what is not supervision: the base policy (the zero policy's broker); the
physics of every step, rollback motion included, runs outside ``Supervisor.act``. What the episode
loop pays without any supervisor (an agent that only asks the broker, timed by the same clocks, so
their own cost cancels) is measured beside it and subtracted.

Writes benchmarks/results/supervisor_overhead.json.
Usage: python benchmarks/supervisor_overhead.py [--critic PATH]
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

OUT = Path(__file__).parent / "results" / "supervisor_overhead.json"
STEPS, REPEATS = 150, 7
SPEC = EpisodeSpec("libero_object", 0, 0, 7, "zero", selector="rule")


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


def bare_ms_per_step(backend: LiberoBackend) -> np.ndarray:
    backend.reset(0, 7)
    start = now()
    for _ in range(STEPS):
        backend.raw.step(WAIT_ACTION)
    return (now() - start) / STEPS * 1e3


class PolicyOnly:
    """The agent of an episode without supervision: the base policy's action every period."""

    def __init__(self, broker: ChunkBroker):
        self.broker = broker

    def reset(self, instruction: str) -> None:
        self.broker.reset(instruction)

    def act(self, obs: dict) -> Control:
        return Control(self.broker.act(obs))


def agent_ms_per_step(backend: LiberoBackend, agent: Supervisor | PolicyOnly, excluded: Excluded) -> np.ndarray:
    """Time inside ``agent.act`` less the excluded calls; the physics steps run outside it."""
    obs = backend.reset(0, 7)
    agent.reset(backend.instruction)
    excluded.seconds = np.zeros(2)
    spent = np.zeros(2)
    for _ in range(STEPS):
        start = now()
        control = agent.act(obs)
        spent += now() - start
        obs = backend.step(control.command).observation
    return (spent - excluded.seconds) / STEPS * 1e3


def timed_broker(excluded: Excluded) -> ChunkBroker:
    broker = ChunkBroker(ZeroPolicy())
    excluded.wrap(broker, "act")
    return broker


def build(backend: LiberoBackend, selector: RuleSelector, critic: Path | None, excluded: Excluded) -> Supervisor:
    """The assembly loads the critic only for a selector that reads value or risk."""
    return assembly.build_supervisor(backend, timed_broker(excluded), SPEC, RecoveryOptions(critic=critic), selector)


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
    parser.add_argument("--critic", type=Path, help="value critic (default: the suite's shipped one, if any)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as every worker beside the simulator
    critic = args.critic or critic_path(RecoveryOptions(), SPEC.suite)
    backend = LiberoBackend(resolve_task(SPEC.suite, SPEC.task))
    excluded = Excluded()
    variants = {"without_critic": build(backend, RuleSelector(), critic, excluded)}  # the default rule
    if critic:  # a selector that reads the critic (the rule with its value-drop flags on; ppo does too)
        reading = RuleSelector(RuleConfig(value_drop_rules=("decline", "abrupt_drop")))
        variants["with_critic"] = build(backend, reading, critic, excluded)
    policy_only = PolicyOnly(timed_broker(excluded))
    bare_ms_per_step(backend)  # warm-up
    bare, ours, floor = ({name: [] for name in variants} for _ in range(3))
    for _ in range(REPEATS):  # alternate so that machine drift hits all alike
        for name, supervisor in variants.items():
            bare[name].append(bare_ms_per_step(backend))
            ours[name].append(agent_ms_per_step(backend, supervisor, excluded))
            floor[name].append(agent_ms_per_step(backend, policy_only, excluded))
    backend.close()
    figures = {"task": f"{SPEC.suite}/{SPEC.task}", "steps": STEPS, "repeats": REPEATS,
               "critic": critic.name if critic else None,
               "excluded": "base policy (zero policy broker); physics steps, rollback motion included, run outside",
               "overhead": "(supervisor - policy-only agent) / bare physics step, per repeat",
               **{name: summarize(bare[name], ours[name], floor[name], supervisor)
                  for name, supervisor in variants.items()}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    for name in variants:
        for clock in ("wall", "cpu"):
            f = figures[name][clock]
            print(f"{name}, {clock}: bare physics {f['bare_physics_ms_per_step_median']:.2f} ms/step, supervisor "
                  f"{f['supervisor_ms_per_step_median']:.3f} ms/step, policy-only agent "
                  f"{f['policy_only_agent_ms_per_step_median']:.3f}: overhead {f['overhead_ratio_median']:.2%} "
                  f"(min {f['overhead_ratio_min']:.1%}, max {f['overhead_ratio_max']:.1%})")
    print(f"critic: {figures['critic']}\nwritten to {OUT}")


if __name__ == "__main__":
    main()
