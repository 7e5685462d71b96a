"""Files that ship inside the packages (checkpoints, references), found one way: importlib.resources."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped(package: str, *parts: str) -> Path:
    """The path of ``parts`` inside the installed ``package`` (it may not exist: callers check)."""
    return Path(str(resources.files(package).joinpath(*parts)))
