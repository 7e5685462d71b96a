"""``recovery collect-demos``: successful expert demonstrations, one LIBERO-style HDF5 file per task.

Layout of ``DIR/SUITE/TASK_NAME.hdf5``::

    data                      attrs: suite, task, task_name, instruction, bddl_file, policy
    data/demo_<k>             attrs: init (-1: sampled layout), seed, num_steps
        actions               (T, 7)  what the policy chose (before any disturbance of the execution)
        states                (T, S)  LIBERO's flattened sim state before each action (replayable)
        obs/state             (T, 8)  eef pos + axis-angle + fingers (the standard protocol state)
        obs/eef_pos, obs/eef_quat, obs/gripper_qpos, obs/joint_pos
        obs/object_poses      (T, N, 7) position + xyzw quaternion; obs attrs: object_names
        obs/agentview_rgb, obs/eye_in_hand_rgb   (T, H, W, 3) uint8, with --images only

By default demo k starts from a layout sampled with seed SEED + k from the task's placement
regions (the distribution of the fixed init states, but none of them), so that a policy trained
on the demos is evaluated on init states it never saw. ``--from-init-states`` uses the fixed
init states instead (demo k = init state k). By default the execution is jittered (DART, see
``sim.disturbances``): states come from the noisy execution, actions are the expert's clean
choices. Every attempt is logged in
``DIR/SUITE/attempts.jsonl``; rerunning resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from recovery.evaluation.runner import EvalConfig, evaluate
from sim.tasks import TaskSpec, resolve_task, resolve_tasks

OBS_NAMES = {"agentview_image": "agentview_rgb", "wrist_image": "eye_in_hand_rgb"}


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


def demo_path(out_dir: Path, task: TaskSpec) -> Path:
    return Path(out_dir) / task.suite / f"{task.name}.hdf5"


def write_demo(path: Path, task: TaskSpec, name: str, record: dict) -> None:
    """Add one successful episode (its recorded trajectory) to the task's file as group ``name``."""
    traj = record["trajectory"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "a") as f:
        data = f.require_group("data")
        data.attrs.update(suite=task.suite, task=task.index, task_name=task.name, instruction=task.instruction,
                          bddl_file=task.bddl_path, policy=record["policy"])
        if name in data:  # a rerun after a crash between this write and the attempt log
            del data[name]
        demo = data.create_group(name)
        demo.attrs.update(init=record["init"], seed=record["seed"], num_steps=len(traj["actions"]))
        demo.create_dataset("actions", data=traj["actions"])
        demo.create_dataset("states", data=traj["sim_states"])
        obs = demo.create_group("obs")
        obs.attrs["object_names"] = traj["object_names"]
        for key, value in traj.items():
            if key not in ("actions", "sim_states", "object_names"):
                obs.create_dataset(OBS_NAMES.get(key, key), data=value, compression="gzip" if value.ndim == 4 else None)


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


def count_demos(path: Path) -> int:
    if not path.exists():
        return 0
    with h5py.File(path, "r") as f:
        return len(f.get("data", {}))


@dataclass(frozen=True)
class Demo:
    task: int
    instruction: str
    actions: np.ndarray  # (T, 7)
    state: np.ndarray  # (T, 8)
    object_names: tuple[str, ...]
    object_poses: np.ndarray  # (T, N, 7)


def load_demos(out_dir: Path, suite: str) -> list[Demo]:
    """Every demonstration of a suite, ordered by task and init state."""
    files = sorted((Path(out_dir) / suite).glob("*.hdf5"))
    if not files:
        raise FileNotFoundError(f"no demonstrations in {Path(out_dir) / suite}; run: recovery collect-demos --suite {suite}")
    demos = []
    for path in files:
        with h5py.File(path, "r") as f:
            data = f["data"]
            for name in sorted(data, key=lambda n: int(n.split("_")[1])):
                obs = data[name]["obs"]
                demos.append(Demo(
                    int(data.attrs["task"]), str(data.attrs["instruction"]), data[name]["actions"][()],
                    obs["state"][()], tuple(n.decode() for n in obs.attrs["object_names"]), obs["object_poses"][()],
                ))
    return sorted(demos, key=lambda d: d.task)
