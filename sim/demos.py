"""Demonstrations on disk: one LIBERO-style HDF5 file per task (``recovery collect-demos`` writes them).

Layout of ``DIR/SUITE/TASK_NAME.hdf5``::

    data                      attrs: suite, task, task_name, instruction, bddl_file, policy
    data/demo_<k>             attrs: init (-1: sampled layout), seed, num_steps
        actions               (T, 7)  what the policy chose (before any disturbance of the execution)
        states                (T, S)  LIBERO's flattened sim state before each action (replayable)
        obs/state             (T, 8)  eef pos + axis-angle + fingers (the standard protocol state)
        obs/eef_pos, obs/eef_quat, obs/gripper_qpos, obs/joint_pos
        obs/object_poses      (T, N, 7) position + xyzw quaternion; obs attrs: object_names
        obs/agentview_rgb, obs/eye_in_hand_rgb   (T, H, W, 3) uint8, with --images only

"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from sim.tasks import TaskSpec

OBS_NAMES = {"agentview_image": "agentview_rgb", "wrist_image": "eye_in_hand_rgb"}


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


def count_demos(path: Path) -> int:
    """Demonstrations in a file (``sim.repair_demos`` files too: one group under ``data`` each)."""
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
