"""Repair demonstrations on disk: one HDF5 file per task (``recovery collect-repairs`` writes them).

Layout of ``DIR/SUITE/TASK_NAME.hdf5``::

    data                          attrs: suite, task, task_name, instruction
    data/<disturbance>_<seed>_<k> attrs: seed, disturbance, focus, focus_held, focus_tipped, holding, num_steps
        actions                   (T, 7)  the corrector's clean actions (the execution was jittered: DART)
        obs/state                 (T, 8)  eef pos + axis-angle + fingers
        obs/object_poses          (T, N, 7); obs attrs: object_names
        target/eef_pos (3), target/eef_rot (3, 3), target/state (8), target/object_poses (N, 7)

Only repairs that reached their target are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from sim.tasks import TaskSpec


def repair_path(out_dir: Path, task: TaskSpec) -> Path:
    return Path(out_dir) / task.suite / f"{task.name}.hdf5"


def write_repairs(path: Path, task: TaskSpec, record: dict) -> int:
    """Add the episode's repairs that reached their target; returns how many."""
    traj, recoveries = record["trajectory"], (record["recovery"] or {}).get("recoveries", [])
    reached = [r["reached"] for r in recoveries if "repair" in r]
    names = [n.decode() for n in traj["object_names"]]
    kept = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "a") as f:
        data = f.require_group("data")
        data.attrs.update(suite=task.suite, task=task.index, task_name=task.name, instruction=task.instruction)
        for k, (repair, ok) in enumerate(zip(traj["repairs"], reached)):
            if not ok or repair["end"] <= repair["start"]:
                continue
            name = f"{record['disturbance']}_{record['seed']}_{k}"
            if name in data:  # a rerun after a crash between this write and the attempt log
                del data[name]
            goal, steps = repair["goal"], slice(repair["start"], repair["end"])
            group = data.create_group(name)
            group.attrs.update(seed=record["seed"], disturbance=record["disturbance"], focus=goal["focus"],
                               focus_held=bool(goal["focus_held"]), focus_tipped=bool(goal["focus_tipped"]),
                               holding=bool(goal["holding"]),
                               num_steps=repair["end"] - repair["start"])
            group.create_dataset("actions", data=traj["actions"][steps])
            obs = group.create_group("obs")
            obs.attrs["object_names"] = traj["object_names"]
            obs.create_dataset("state", data=traj["state"][steps])
            obs.create_dataset("object_poses", data=traj["object_poses"][steps])
            target = group.create_group("target")
            for key in ("eef_pos", "eef_rot", "state"):
                target.create_dataset(key, data=np.asarray(goal[key]))
            target.create_dataset("object_poses", data=np.array([goal["object_poses"][n] for n in names]))
            kept += 1
    return kept


@dataclass(frozen=True)
class RepairDemo:
    instruction: str
    actions: np.ndarray  # (T, 7)
    state: np.ndarray  # (T, 8)
    object_names: tuple[str, ...]
    object_poses: np.ndarray  # (T, N, 7)
    goal: dict  # a RepairTarget.observation()


def load_repairs(out_dir: Path, suite: str) -> list[RepairDemo]:
    """Every repair demonstration of a suite, in a fixed order."""
    files = sorted((Path(out_dir) / suite).glob("*.hdf5"))
    if not files:
        raise FileNotFoundError(f"no repair demonstrations in {Path(out_dir) / suite}; run: "
                                f"recovery collect-repairs --suite {suite}")
    demos = []
    for path in files:
        with h5py.File(path, "r") as f:
            data = f["data"]
            for name in sorted(data):
                group, obs, target = data[name], data[name]["obs"], data[name]["target"]
                names = tuple(n.decode() for n in obs.attrs["object_names"])
                goal = {"eef_pos": target["eef_pos"][()], "eef_rot": target["eef_rot"][()],
                        "state": target["state"][()], "holding": float(group.attrs["holding"]),
                        "focus": str(group.attrs["focus"]), "focus_held": float(group.attrs["focus_held"]),
                        "focus_tipped": float(group.attrs.get("focus_tipped", False)),  # files before it: never
                        "object_poses": dict(zip(names, target["object_poses"][()]))}
                demos.append(RepairDemo(str(data.attrs["instruction"]), group["actions"][()], obs["state"][()], names,
                                        obs["object_poses"][()], goal))
    return demos
