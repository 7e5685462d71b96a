"""Reference trajectories for the global quality metric, one file per task.

``recovery build-references`` takes them from successful demonstrations (``collect-demos``, the
expert by default). Stored as
``DIR/SUITE/TASK_NAME.npz`` holding one (T_i, 5) array per trajectory: eef position + fingers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from critics.quality import ReferenceSet
from recovery.core.errors import RecoveryError
from recovery.core.files import written_atomically


class MissingReferencesError(RecoveryError, FileNotFoundError):
    """No reference trajectories for a task; the message names the command that builds them."""


def reference_feature(state: np.ndarray) -> np.ndarray:
    """What the global metric compares: eef position and the two finger joints of the 8-D state."""
    state = np.asarray(state)
    return np.concatenate([state[..., :3], state[..., 6:8]], axis=-1)


def reference_path(root: Path, suite: str, task_name: str) -> Path:
    return Path(root) / suite / f"{task_name}.npz"


def save_references(path: Path, trajectories: list[np.ndarray]) -> None:
    with written_atomically(path) as tmp:
        np.savez_compressed(tmp, **{f"ref_{i:03d}": t.astype(np.float32) for i, t in enumerate(trajectories)})


def load_references(root: Path, suite: str, task_name: str) -> ReferenceSet:
    path = reference_path(root, suite, task_name)
    if not path.exists():
        raise MissingReferencesError(
            f"no reference trajectories for {suite}/{task_name} at {path}; build them with: "
            f"recovery build-references --suite {suite} --references {root}"
        )
    with np.load(path) as data:
        return ReferenceSet(tuple(data[k].astype(np.float64) for k in sorted(data.files)))
