"""A training run's directory: the settings it was started with, atomic checkpoints, the curve file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from recovery.core.errors import RecoveryError
from recovery.core.files import written_atomically
from recovery.supervision.observation import LEARNED_MODES

CURVE_FIELDS = (["decisions", "episodes", "success_rate", "mean_return"] + [f"share_{m.name}" for m in LEARNED_MODES]
                + ["recovery_won", "recovery_lost"])  # episodes the recoveries won / lost against the base policy alone
# (with the counterfactual reward; empty without it)


class ResumeMismatchError(RecoveryError, ValueError):
    """The output directory holds a run with other settings."""


def save_atomically(model, path: Path) -> None:
    """A crash mid-write leaves the previous file intact."""
    with written_atomically(path) as tmp:
        model.save(tmp)


def append_curve_row(path: Path, row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CURVE_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def truncate_curve(path: Path, decisions: int) -> None:
    """On resume, forget the rows recorded after the checkpoint we restart from."""
    if not path.exists():
        return
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if int(r["decisions"]) <= decisions]
    path.unlink()
    for row in rows:
        append_curve_row(path, row)


def differing(previous: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """The keys whose values differ between two saved settings, sorted; ``ignore``: keys allowed to differ."""
    return sorted(k for k in set(previous) | set(current) if k not in ignore and previous.get(k) != current.get(k))


def with_defaults(saved: dict, defaults: dict) -> dict:
    """``saved`` with the settings it lacks at their ``defaults``: a setting added to the package
    after a run was started defaults to how the package behaved before it existed."""
    merged = {**{key: value for key, value in defaults.items() if key not in saved}, **saved}
    return {key: with_defaults(value, defaults[key]) if isinstance(value, dict) and isinstance(defaults.get(key), dict)
            else value for key, value in merged.items()}


def saved_settings(path: Path, defaults: dict | None) -> dict:
    """A run's ``config.json``; ``defaults``: the identity of a default run, for the settings an
    older run's file lacks."""
    return with_defaults(json.loads(path.read_text()), defaults or {})


def prepare_run(out: Path, identity: dict, defaults: dict | None = None) -> Path | None:
    """Create or check the run directory; return the checkpoint to resume from, if any."""
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "config.json"
    if saved.exists():
        previous = saved_settings(saved, defaults)
        if previous != identity:
            changed = differing(previous, identity)
            raise ResumeMismatchError(f"{out} holds a run with other settings ({', '.join(changed)} differ): "
                                      "use another --out, or the same settings to resume it")
    saved.write_text(json.dumps(identity, indent=2) + "\n")  # an older run's file gains the settings added since
    checkpoint = out / "checkpoint.zip"
    return checkpoint if checkpoint.exists() else None
