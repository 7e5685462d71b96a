"""Writing a file so that a crash mid-write leaves the previous one intact."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
