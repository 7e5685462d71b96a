"""Speed of the evaluation loop, measured side by side in one run (the machine is shared and noisy).

1. Control steps per second: our episode loop (backend + validation + observation conversion +
   chunk broker) against a bare LIBERO ``env.step`` loop, same task, same simulator, alternating.
2. Episodes per minute of ``recovery eval`` with 1 worker, 2 worker processes and 2 local Ray
   actors, for a short and a long run (each worker's start, imports and simulator construction, and
   Ray's own start, weigh on a short one).

Writes benchmarks/results/eval_loop_speed.json. Usage: python benchmarks/eval_loop_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from recovery.core.actions import WAIT_ACTION
from recovery.core.loop import NUM_WAIT_STEPS, LoopConfig, run_episode
from recovery.evaluation.runner import EvalConfig, evaluate
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import ZeroPolicy

OUT = Path(__file__).parent / "results" / "eval_loop_speed.json"


def bare_steps_per_second(backend: LiberoBackend, steps: int, seed: int) -> float:
    """LIBERO alone: seeded reset, init state, then env.step in a loop."""
    env = backend._env
    start = time.perf_counter()
    env.seed(seed)
    env.reset()
    env.env.robots[0].gripper.current_action = np.zeros(1)
    env.set_init_state(backend._init_states[0])
    for _ in range(steps + NUM_WAIT_STEPS):
        env.step(WAIT_ACTION)
    return (steps + NUM_WAIT_STEPS) / (time.perf_counter() - start)


def ours_steps_per_second(backend: LiberoBackend, steps: int, seed: int) -> float:
    agent = ChunkBroker(ZeroPolicy(), replan_every=5)
    start = time.perf_counter()
    backend.reset(0, seed)
    outcome = run_episode(backend, agent, backend.instruction, LoopConfig(max_steps=steps))
    if outcome.error is not None:  # a failed episode would be timed as a fast one
        raise outcome.error
    return (steps + NUM_WAIT_STEPS) / (time.perf_counter() - start)


def step_rate(task: str, steps: int, repeats: int) -> dict:
    suite, index = task.split("/")
    backend = LiberoBackend(resolve_task(suite, int(index)))
    bare_steps_per_second(backend, 20, 7)  # warm-up (numba compiles on the first steps)
    bare, ours = [], []
    for _ in range(repeats):  # A B A B: drift in machine speed hits both alike
        bare.append(bare_steps_per_second(backend, steps, 7))
        ours.append(ours_steps_per_second(backend, steps, 7))
    backend.close()
    ratios = [o / b for o, b in zip(ours, bare)]
    return {"task": task, "steps_per_episode": steps, "repeats": repeats,
            "bare_steps_per_s_median": statistics.median(bare), "ours_steps_per_s_median": statistics.median(ours),
            "ratio_ours_over_bare_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}


def timed_evaluation(config: EvalConfig) -> float:
    """Episodes per minute of one whole evaluation (a Ray run starts and stops its local instance)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        records = evaluate(replace(config, out=Path(tmp) / "r.jsonl"))
        minutes = (time.perf_counter() - start) / 60
    if config.ray_address:
        import ray

        ray.shutdown()
    return len(records) / minutes


def episode_rate(tasks: int, episodes: int, policy: str) -> dict:
    """``episodes`` per task on libero_object tasks 0..tasks-1: 1 worker, 2 worker processes and 2
    local Ray actors, alternating."""
    base = EvalConfig(suite="libero_object", tasks=tuple(range(tasks)), episodes=episodes, policy=policy,
                      progress=False)
    variants = {"1_worker": replace(base, workers=1), "2_workers": replace(base, workers=2),
                "ray_2_actors": replace(base, workers=2, ray_address="local")}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(2):
        for name, config in variants.items():
            rates[name].append(timed_evaluation(config))
    per_min = {name: statistics.median(r) for name, r in rates.items()}
    return {"suite_tasks": f"libero_object/0-{tasks - 1}", "policy": policy, "episodes_per_run": tasks * episodes,
            **{f"episodes_per_min_{name}": rate for name, rate in per_min.items()},
            "speedup_2_workers_over_1": per_min["2_workers"] / per_min["1_worker"],
            "speedup_ray_2_actors_over_1": per_min["ray_2_actors"] / per_min["1_worker"],
            "note": "wall time of the whole evaluation: worker start, imports, simulator construction (and Ray's "
                    "start) included"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--policy", default="expert", help="policy for the episodes-per-minute part")
    args = parser.parse_args()
    figures = {
        "step_rate": [step_rate(t, 200, 2 if args.quick else 6) for t in ("libero_object/0", "libero_spatial/0")],
        "episode_rate": [episode_rate(tasks, n, args.policy) for tasks, n in (((1, 4), (1, 20)) if args.quick
                                                                             else ((1, 10), (2, 50)))],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    for row in figures["step_rate"]:
        print(f"{row['task']}: ours {row['ours_steps_per_s_median']:.1f} steps/s, bare "
              f"{row['bare_steps_per_s_median']:.1f} steps/s, ratio {row['ratio_ours_over_bare_median']:.3f} "
              f"(min {row['ratio_min']:.3f}, max {row['ratio_max']:.3f})")
    for ep in figures["episode_rate"]:
        print(f"{ep['episodes_per_run']} episodes ({ep['policy']}): 1 worker {ep['episodes_per_min_1_worker']:.1f}/min, "
              f"2 workers {ep['episodes_per_min_2_workers']:.1f}/min ({ep['speedup_2_workers_over_1']:.2f}x), "
              f"Ray 2 actors {ep['episodes_per_min_ray_2_actors']:.1f}/min ({ep['speedup_ray_2_actors_over_1']:.2f}x)")
    print(f"written to {OUT}")


if __name__ == "__main__":
    main()
