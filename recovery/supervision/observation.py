"""What the learned selector sees: the last N steps of proprio, actions, quality, value and risk.

No privileged simulator state enters it, so a selector trained in LIBERO reads the same vector on
a real arm. The layout is stored in every checkpoint; loading one with another layout fails.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from recovery.core.decision import DecisionContext
from recovery.core.modes import Mode
from recovery.supervision.config import SupervisorConfig

LAYOUT_VERSION = 1
LEARNED_MODES = (Mode.EXECUTE, Mode.RETRY, Mode.REPAIR, Mode.RESET)  # HOLD stays a safety mode, not a choice
STATE_DIM, ACTION_DIM = 8, 7
SCALARS = 3  # rollbacks left, steps since the last rollback, episode time


@dataclass(frozen=True)
class ObservationLayout:
    history: int = SupervisorConfig.history  # steps: the decision context's history
    max_rollbacks: int = SupervisorConfig.max_rollbacks  # scales "rollbacks left": the supervisor's budget
    time_scale: float = 300.0  # steps; scales episode time and time since the last rollback
    version: int = LAYOUT_VERSION

    @property
    def row_size(self) -> int:
        return STATE_DIM + ACTION_DIM + 3 + 2  # + quality, value, risk; + row valid, quality valid

    @property
    def size(self) -> int:
        return self.history * self.row_size + SCALARS

    def encode(self, ctx: DecisionContext) -> np.ndarray:
        """Oldest row first; rows before the episode began (or quality before a rollback) are zero
        with their valid flag off."""
        n = self.history
        rows = np.zeros((n, self.row_size), dtype=np.float32)
        columns = (("state", 0, STATE_DIM), ("action", STATE_DIM, ACTION_DIM), ("quality", 15, 1), ("value", 16, 1),
                   ("risk", 17, 1))
        for key, start, width in columns:
            values = np.asarray(ctx.history.get(key, ()), dtype=np.float32).reshape(-1, width)[-n:]
            if len(values):
                rows[n - len(values):, start:start + width] = values
        rows[n - min(len(ctx.history.get("state", ())), n):, 18] = 1.0
        rows[n - min(len(ctx.history.get("quality", ())), n):, 19] = 1.0
        scalars = np.array([ctx.rollbacks_left / self.max_rollbacks,
                            min(ctx.steps_since_rollback / self.time_scale, 1.0),
                            min(ctx.step / self.time_scale, 2.0)], dtype=np.float32)
        return np.concatenate([rows.ravel(), scalars])

    def describe(self) -> dict:
        return asdict(self)
