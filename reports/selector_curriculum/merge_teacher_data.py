"""Join the teacher decisions of several `train-selector` run directories into one ``warm_start.npz``.

Each run collects from its own ``--seed`` (other sampled layouts); a run directory that holds the
joined file clones from it instead of collecting (``recovery.learning.warm_start``).
Usage: python merge_teacher_data.py OUT_DIR RUN_DIR [RUN_DIR ...]
"""

import sys
from pathlib import Path

import numpy as np

from recovery.learning.warm_start import TeacherDecisions


def merge(parts: list[TeacherDecisions]) -> TeacherDecisions:
    offsets = np.cumsum([0] + [len(part.successes) for part in parts[:-1]])  # episode indices stay distinct
    return TeacherDecisions(
        observations=np.concatenate([part.observations for part in parts]),
        actions=np.concatenate([part.actions for part in parts]),
        returns=np.concatenate([part.returns for part in parts]),
        episode=np.concatenate([part.episode + offset for part, offset in zip(parts, offsets)]),
        successes=np.concatenate([part.successes for part in parts]))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    merged = merge([TeacherDecisions.load(Path(run) / "warm_start.npz") for run in sys.argv[2:]])
    merged.save(out / "warm_start.npz")
    print(f"{len(merged.actions)} decisions in {len(merged.successes)} episodes -> {out / 'warm_start.npz'}")
