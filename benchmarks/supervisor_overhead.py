"""Per-step cost of the supervisor (quality metrics + value critic + risk head + contacts + memory +
selector) against a bare LIBERO physics step, measured side by side in one run.

Writes benchmarks/results/supervisor_overhead.json. Usage: python benchmarks/supervisor_overhead.py
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from recovery.evaluation.assembly import RecoveryOptions, build_supervisor, critic_path
from recovery.evaluation.episode import WAIT_ACTION
from recovery.evaluation.results import EpisodeSpec
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import ZeroPolicy

OUT = Path(__file__).parent / "results" / "supervisor_overhead.json"
STEPS, REPEATS = 150, 5


def bare_ms_per_step(backend: LiberoBackend) -> float:
    backend.reset(0, 7)
    start = time.perf_counter()
    for _ in range(STEPS):
        backend.raw.step(WAIT_ACTION)
    return (time.perf_counter() - start) / STEPS * 1e3


def supervisor_ms_per_step(backend: LiberoBackend, supervisor) -> float:
    """Time inside ``supervisor.act`` only (the zero policy costs ~nothing), physics excluded."""
    obs = backend.reset(0, 7)
    supervisor.reset(backend.instruction)
    spent = 0.0
    for _ in range(STEPS):
        start = time.perf_counter()
        action = supervisor.act(obs)
        spent += time.perf_counter() - start
        obs = backend.step(action).observation
    return spent / STEPS * 1e3


def main() -> None:
    spec = EpisodeSpec("libero_object", 0, 0, 7, "zero", selector="rule")
    backend = LiberoBackend(resolve_task(spec.suite, spec.task))
    options = RecoveryOptions(selector="rule")
    supervisor = build_supervisor(backend, ChunkBroker(ZeroPolicy()), spec, options)
    bare_ms_per_step(backend)  # warm-up
    bare, ours = [], []
    for _ in range(REPEATS):  # alternate so that machine drift hits both
        bare.append(bare_ms_per_step(backend))
        ours.append(supervisor_ms_per_step(backend, supervisor))
    backend.close()
    ratios = [o / b for o, b in zip(ours, bare)]
    figures = {
        "task": "libero_object/0", "steps": STEPS, "repeats": REPEATS,
        "critic": str(critic_path(options, spec.suite)), "bare_physics_ms_per_step_median": statistics.median(bare),
        "supervisor_ms_per_step_median": statistics.median(ours),
        "overhead_ratio_median": statistics.median(ratios), "overhead_ratio_min": min(ratios),
        "overhead_ratio_max": max(ratios),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"bare physics {figures['bare_physics_ms_per_step_median']:.2f} ms/step, supervisor "
          f"{figures['supervisor_ms_per_step_median']:.3f} ms/step: overhead {figures['overhead_ratio_median']:.1%} "
          f"(min {min(ratios):.1%}, max {max(ratios):.1%}); critic: {figures['critic']}")
    print(f"written to {OUT}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
