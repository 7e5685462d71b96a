"""What a mode selector sees at a decision and the contract every selector honours."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from recovery.core.errors import RecoveryError
from recovery.core.modes import Mode


class History(Mapping[str, np.ndarray]):
    """The last N steps of each signal, turned into an array only when a selector reads it: the rule
    reads two of the six, and converting all of them cost more than its decision."""

    def __init__(self, signals: Mapping[str, Sequence]):
        self._signals = signals
        self._arrays: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._arrays:
            self._arrays[key] = np.array(self._signals[key])
        return self._arrays[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._signals)

    def __len__(self) -> int:
        return len(self._signals)


@dataclass(frozen=True)
class DecisionContext:
    step: int
    quality: float
    value: float
    risk: float
    flags: dict[str, bool]
    rollbacks_left: int
    steps_since_rollback: int  # since the last rollback (or the episode start)
    last_rollback_mode: Mode | None
    history: Mapping[str, np.ndarray] = field(default_factory=dict)  # last N steps: proprio, actions, q, v, risk
    # objects the task names lying knocked over, which a repair policy could stand up (empty without one)
    knocked_over: tuple[str, ...] = ()
    instruction: str = ""  # the task's: thresholds calibrated per task are looked up by it
    # the policy step at which the hand last let go of what it held while commanded closed (a drop:
    # recovery.supervision.grasp); None: not in this episode
    let_go_at: int | None = None


@dataclass(frozen=True)
class Decision:
    """A recovery mode with where its target must come from: a selector that knows when the trouble
    began (the rule, by where the tracking error crossed its limit) says so, and the rollback takes
    the best state of its horizon ending there instead of ending now. A burst caught a few steps
    after it ended leaves the latest steps mostly disturbed ones."""

    mode: Mode
    before: int | None = None  # the target is a state from before this step (None: the latest window)

    @staticmethod
    def of(choice: Mode | Decision) -> Decision:
        """What ``Selector.decide`` returned, as a Decision."""
        return choice if isinstance(choice, Decision) else Decision(choice)


class UnknownSelectorError(RecoveryError, ValueError):
    """A selector name that no registry knows; the message lists the valid ones."""


class Selector(Protocol):
    reads_value: bool  # whether decide() looks at value or risk: the value critic runs only if so

    def reset(self) -> None: ...

    def decide(self, ctx: DecisionContext) -> Mode | Decision:
        """The mode to run, or a ``Decision`` that also bounds where its rollback target lies."""
        ...

    def settings(self) -> dict:
        """What makes two runs of this selector the same experiment (stored with each result)."""
        ...
