"""What the learned selector sees: the last N steps of proprio, actions, quality, value, risk and
(from version 2) the tracking error; from version 2 also the rule's advice, the mode the rule
selector (with the thresholds the selector was trained beside) would choose here.

The advice makes the learned selector a residual on the rule: cloning the rule becomes copying an
input (a clone of the rule from the metrics alone caught 17% of its interventions on held-out
libero_spatial episodes), and PPO learns where departing from it pays.

No privileged simulator state enters it, so a selector trained in LIBERO reads the same vector on
a real arm. The layout is stored in every checkpoint: a selector is read with the layout version it
was trained on (``COLUMNS``), and loading one of another layout fails.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from recovery.core.decision import DecisionContext
from recovery.core.modes import Mode
from recovery.supervision.config import SupervisorConfig

LEARNED_MODES = (Mode.EXECUTE, Mode.RETRY, Mode.REPAIR, Mode.RESET)  # HOLD stays a safety mode, not a choice
STATE_DIM, ACTION_DIM = 8, 7
SCALARS = 3  # rollbacks left, steps since the last rollback, episode time
SCALES = {"tracking": 20.0}  # 1/m: a 5 cm tracking error (a burst) reads 1, a nominal few millimetres under 0.1
# per version, the history's columns and their widths, oldest first; then two flags: row valid, quality valid
_FIRST = (("state", STATE_DIM), ("action", ACTION_DIM), ("quality", 1), ("value", 1), ("risk", 1))
COLUMNS = {1: _FIRST, 2: _FIRST + (("tracking", 1),)}
LAYOUT_VERSION = max(COLUMNS)
ADVICE_FROM = 2  # the layout version from which the observation ends with the rule's advice


@dataclass(frozen=True)
class ObservationLayout:
    history: int = SupervisorConfig.history  # steps: the decision context's history
    max_rollbacks: int = SupervisorConfig.max_rollbacks  # scales "rollbacks left": the supervisor's budget
    time_scale: float = 300.0  # steps; scales episode time and time since the last rollback
    version: int = LAYOUT_VERSION

    def __post_init__(self) -> None:
        if self.version not in COLUMNS:
            raise ValueError(f"observation layout version {self.version} is not one this package reads "
                             f"({', '.join(map(str, COLUMNS))})")

    @property
    def columns(self) -> tuple[tuple[str, int], ...]:
        return COLUMNS[self.version]

    @property
    def row_size(self) -> int:
        return sum(width for _, width in self.columns) + 2  # + row valid, quality valid

    @property
    def advised(self) -> bool:
        return self.version >= ADVICE_FROM

    @property
    def size(self) -> int:
        return self.history * self.row_size + SCALARS + (len(LEARNED_MODES) if self.advised else 0)

    def encode(self, ctx: DecisionContext, advice: Mode | None = None) -> np.ndarray:
        """Oldest row first; rows before the episode began (or quality and tracking before a
        rollback, which clears both) are zero with their valid flag off. ``advice``: the rule's
        mode at ``ctx`` (an ``advised`` layout needs it; a HOLD, which no selector chooses, reads as
        EXECUTE)."""
        if self.advised and advice is None:
            raise ValueError(f"observation layout version {self.version} ends with the rule's advice: pass it")
        n = self.history
        rows = np.zeros((n, self.row_size), dtype=np.float32)
        start = 0
        for key, width in self.columns:
            values = np.asarray(ctx.history.get(key, ()), dtype=np.float32).reshape(-1, width)[-n:]
            if len(values):
                rows[n - len(values):, start:start + width] = values * SCALES.get(key, 1.0)
            start += width
        rows[n - min(len(ctx.history.get("state", ())), n):, start] = 1.0
        rows[n - min(len(ctx.history.get("quality", ())), n):, start + 1] = 1.0
        scalars = np.array([ctx.rollbacks_left / self.max_rollbacks,
                            min(ctx.steps_since_rollback / self.time_scale, 1.0),
                            min(ctx.step / self.time_scale, 2.0)], dtype=np.float32)
        if not self.advised:
            return np.concatenate([rows.ravel(), scalars])
        advised = np.zeros(len(LEARNED_MODES), dtype=np.float32)
        advised[LEARNED_MODES.index(advice) if advice in LEARNED_MODES else 0] = 1.0
        return np.concatenate([rows.ravel(), scalars, advised])

    def describe(self) -> dict:
        return asdict(self)
