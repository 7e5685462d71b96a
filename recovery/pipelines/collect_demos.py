"""``recovery collect-demos``: successful expert demonstrations (format: ``sim.demos``).

By default demo k starts from a layout sampled with seed SEED + k from the task's placement
regions (the distribution of the fixed init states, but none of them), so that a policy trained
on the demos is evaluated on init states it never saw. ``--from-init-states`` uses the fixed
init states instead (demo k = init state k). By default the execution is jittered (DART, see
``sim.disturbances``): states come from the noisy execution, actions are the expert's clean
choices. Every attempt is logged in ``DIR/SUITE/attempts.jsonl``; rerunning resumes where it
stopped. The demonstrations are deterministic: the same command writes the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from recovery.evaluation.runner import EvalConfig, evaluate
from sim.demos import count_demos, demo_path, write_demo
from sim.tasks import resolve_task, resolve_tasks


@dataclass(frozen=True)
class DemoConfig:
    suite: str
    tasks: tuple[int | str, ...] = ()
    demos_per_task: int = 50  # attempts per task; the failures are not kept
    policy: str = "expert"
    seed: int = 1000  # far from the evaluation seed (7)
    from_init_states: bool = False
    disturbance: str = "action_jitter"  # DART: noisy execution, clean expert labels (see sim.disturbances)
    workers: int = 1
    out_dir: Path = Path("demos")
    images: bool = False
    progress: bool = True


def collect_demos(config: DemoConfig) -> dict[str, int]:
    """Run the policy from init states 0..N-1 of each task; keep the successes. Returns demos per task."""
    tasks = resolve_tasks(config.suite, list(config.tasks))

    def save_success(record: dict) -> None:
        if record["success"] and record["error"] is None:
            task = resolve_task(record["suite"], record["task"])
            k = record["init"] if config.from_init_states else record["seed"] - config.seed
            write_demo(demo_path(config.out_dir, task), task, f"demo_{k}", record)

    evaluate(
        EvalConfig(suite=config.suite, tasks=tuple(t.index for t in tasks), episodes=config.demos_per_task,
                   sampled_layouts=not config.from_init_states, policy=config.policy, seed=config.seed,
                   workers=config.workers, disturbance=config.disturbance,
                   out=Path(config.out_dir) / config.suite / "attempts.jsonl", record_trajectories=True,
                   record_images=config.images, progress=config.progress),
        on_record=save_success,
    )
    return {t.name: count_demos(demo_path(config.out_dir, t)) for t in tasks}
