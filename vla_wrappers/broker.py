"""Serve a policy's action chunks one step at a time, re-planning every ``replan_every`` steps."""

from __future__ import annotations

from collections import deque

import numpy as np

from recovery.core.robot import Observation
from vla_wrappers.base import Policy


class ChunkBroker:
    """openpi-style: execute the first ``replan_every`` actions of each chunk, then re-plan.
    ``flush`` drops the in-flight chunk (after a rollback it no longer fits the state)."""

    recovery_steps = 0  # the Agent contract: a plain broker never spends steps outside the policy

    def __init__(self, policy: Policy, replan_every: int = 5):
        if replan_every < 1:
            raise ValueError(f"replan_every must be >= 1, got {replan_every}")
        self.policy = policy
        self.replan_every = replan_every
        self._queue: deque[np.ndarray] = deque()
        self.inferences = 0

    def reset(self, instruction: str) -> None:
        self.flush()
        self.inferences = 0
        self.policy.reset(instruction)

    def flush(self) -> None:
        self._queue.clear()

    def pending(self) -> tuple[np.ndarray, ...]:
        """The in-flight chunk's actions still to execute (to play an episode's future and come back)."""
        return tuple(action.copy() for action in self._queue)

    def set_pending(self, actions: tuple[np.ndarray, ...]) -> None:
        self._queue = deque(action.copy() for action in actions)

    def summary(self) -> dict:
        return {}

    def close(self) -> None:
        self.policy.close()

    def act(self, obs: Observation) -> np.ndarray:
        if not self._queue:
            chunk = self.policy.infer(obs).actions
            self._queue.extend(chunk[: self.replan_every])
            self.inferences += 1
        return self._queue.popleft()
