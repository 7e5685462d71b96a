"""Writing a file so that a crash mid-write leaves the previous one intact; named arrays as one
file; naming a file's content."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def written_atomically(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside ``path``, with its extension (numpy and stable-baselines3 append
    theirs otherwise); once the block has written it, it replaces ``path`` in one step, so a reader
    never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{path.suffix}")
    yield tmp
    tmp.replace(path)


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Named arrays as one compressed ``.npz``, written atomically."""
    with written_atomically(path) as tmp:
        np.savez_compressed(tmp, **arrays)


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """The named arrays of an ``.npz`` (``save_arrays``)."""
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def file_digest(path: Path | None) -> str | None:
    """A short digest of the file's bytes (None for no file): what a checkpoint trained on another
    file records of it, to tell whether it still reads the same one."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path else None
