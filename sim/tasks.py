"""Task lookup: suite name + task index or name -> everything needed to build and run it."""

from __future__ import annotations

import contextlib
import difflib
import io
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from recovery.core.errors import RecoveryError
from recovery.core.protocol import STANDARD_SUITES, max_steps_for


class UnknownTaskError(RecoveryError, ValueError):
    """A suite or task that LIBERO does not have; the message lists the valid names."""


@dataclass(frozen=True)
class TaskSpec:
    suite: str
    index: int
    name: str
    instruction: str
    bddl_path: str
    max_steps: int

    @property
    def label(self) -> str:
        return f"{self.suite}/{self.index}"

    def objects_of_interest(self) -> tuple[str, ...]:
        """What the task's BDDL file names as its objects of interest (objects, fixtures and regions),
        read by LIBERO's own parser: the env's ``obj_of_interest``, without building the env."""
        from libero.libero.envs.bddl_utils import robosuite_parse_problem

        return tuple(robosuite_parse_problem(self.bddl_path)["obj_of_interest"])

    def init_states(self) -> np.ndarray:
        return _suite(self.suite).get_task_init_states(self.index)


def _benchmark_dict() -> dict:
    from libero.libero import benchmark

    return benchmark.get_benchmark_dict()


def available_suites() -> list[str]:
    """Standard suites first, then every other suite LIBERO registers (e.g. LIBERO-PRO)."""
    others = sorted(set(_benchmark_dict()) - set(STANDARD_SUITES))
    return [*STANDARD_SUITES, *others]


@lru_cache(maxsize=None)
def _suite(name: str):
    registry = _benchmark_dict()
    if name not in registry:
        close = difflib.get_close_matches(name, available_suites(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownTaskError(f"unknown suite {name!r}{hint}; valid suites: {', '.join(available_suites())}")
    with contextlib.redirect_stdout(io.StringIO()):  # LIBERO prints its task order on construction
        return registry[name]()


def task_names(suite: str) -> list[str]:
    return list(_suite(suite).get_task_names())


def resolve_task(suite: str, task: int | str) -> TaskSpec:
    """Find a task by index (int or digit string) or by its LIBERO name."""
    from libero.libero import get_libero_path

    bench = _suite(suite)
    names = task_names(suite)
    if isinstance(task, str) and not task.isdigit():
        if task not in names:
            listing = "\n  ".join(f"{i}: {n}" for i, n in enumerate(names))
            raise UnknownTaskError(f"unknown task {task!r} in {suite}; valid tasks:\n  {listing}")
        index = names.index(task)
    else:
        index = int(task)
        if not 0 <= index < len(names):
            raise UnknownTaskError(f"task index {index} out of range for {suite}: valid 0..{len(names) - 1}")
    meta = bench.get_task(index)
    bddl = os.path.join(get_libero_path("bddl_files"), meta.problem_folder, meta.bddl_file)
    return TaskSpec(suite, index, meta.name, meta.language, bddl, max_steps_for(suite))


def resolve_tasks(suite: str, tasks: list[int | str] | None) -> list[TaskSpec]:
    """All tasks of the suite when ``tasks`` is empty."""
    selected = tasks if tasks else range(len(task_names(suite)))
    return [resolve_task(suite, t) for t in selected]
