"""``recovery build-references``: the global quality metric's reference trajectories from demonstrations."""

from __future__ import annotations

from pathlib import Path

from critics.references import reference_feature, reference_path, save_references
from sim.demos import load_demos
from sim.tasks import resolve_tasks


def build_references(demos_dir: Path, suite: str, root: Path) -> dict[str, int]:
    """Reference sets from the successful demonstrations of every task; returns counts per task."""
    demos = load_demos(demos_dir, suite)
    counts = {}
    for task in resolve_tasks(suite, None):
        trajectories = [reference_feature(d.state) for d in demos if d.task == task.index]
        if trajectories:
            save_references(reference_path(root, suite, task.name), trajectories)
        counts[task.name] = len(trajectories)
    return counts
