"""Episode records in a JSONL file: appended as each episode ends, read back to resume."""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from recovery.core.errors import RecoveryError

log = logging.getLogger(__name__)


SAMPLED_LAYOUT = -1


@dataclass(frozen=True, order=True)
class EpisodeSpec:
    """Identifies an episode; two runs of the same spec are the same experiment."""

    suite: str
    task: int
    init: int  # fixed init state index; SAMPLED_LAYOUT: a layout sampled with ``seed``
    seed: int
    policy: str
    selector: str = "off"  # "off": the policy alone, no supervisor
    disturbance: str = "none"
    rollback: str = "physical"
    repair: str = "rollback"  # "policy": recoveries that must restore the world run a repair policy

    def key(self) -> tuple:
        return tuple(asdict(self).values())

    @classmethod
    def key_of(cls, record: dict) -> tuple:
        return tuple(record.get(f.name, f.default) for f in fields(cls))

    def simulator_key(self) -> tuple:
        """Episodes with the same key can share one simulator and agent (they differ in layout only)."""
        return self.suite, self.task, self.policy, self.selector, self.disturbance, self.rollback, self.repair

    @property
    def init_index(self) -> int | None:
        return None if self.init == SAMPLED_LAYOUT else self.init

    @property
    def slug(self) -> str:
        """File-name-safe and unique per spec (videos, logs)."""
        policy = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.policy)
        layout = "sampled" if self.init == SAMPLED_LAYOUT else f"i{self.init:02d}"
        variant = "" if self.selector == "off" else f"_{self.selector}-{self.rollback}"
        variant += "-repair" if self.repair == "policy" else ""
        variant += "" if self.disturbance == "none" else f"_{self.disturbance}"
        return f"{self.suite}_t{self.task:02d}_{layout}_s{self.seed}_{policy}{variant}"


class ResultsMismatchError(RecoveryError, ValueError):
    """The results file holds episodes of the same plan run with other selector settings."""


class ResultsBusyError(RecoveryError, RuntimeError):
    """Another evaluation is writing the same results file."""


class ResultsFile:
    """Append-only JSONL. A torn last line (a run killed mid-write) is skipped with a warning
    and the episode simply runs again on resume."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> list[dict]:
        if not self.path.exists():
            return []
        records = []
        with self.path.open() as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    log.warning("%s:%d is not a complete record (interrupted write?); skipped", self.path, lineno)
        return records

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """One writer at a time: a second evaluation started on the same file would run the episodes
        the first is running and append them twice. The lock goes with the process, however it ends."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ResultsBusyError(f"another evaluation is writing {self.path}: let it finish, stop it (it "
                                       "resumes), or use another --out") from None
            yield

    def done_keys(self, selector: str, settings: dict) -> set[tuple]:
        """Keys of the episodes already run. A file whose ``selector`` episodes ran with other settings
        (other thresholds, another checkpoint or critic) would mix two experiments: refused.
        Records older than this check carry no settings and are taken as they are."""
        records = self.load()
        other = [r for r in records if r.get("selector") == selector
                 and r.get("selector_settings", settings) != settings]
        if other:
            stored = other[0]["selector_settings"]
            changed = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
            raise ResultsMismatchError(
                f"{self.path} holds {len(other)} {selector} episodes run with other settings ({', '.join(changed)} "
                f"differ: {stored} there, {settings} now): use another --out, or the same settings to resume")
        return {EpisodeSpec.key_of(r) for r in records}

    def append(self, record: dict) -> None:
        """Durable before returning: an interruption right after loses nothing."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+") as f:
            if f.tell() > 0:  # finish a torn line so this record starts on its own line
                f.seek(f.tell() - 1)
                if f.read(1) != "\n":
                    f.write("\n")
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
