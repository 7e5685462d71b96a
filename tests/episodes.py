"""Test helpers that play episodes and rollbacks the way the stack does."""

from __future__ import annotations

import numpy as np

from recovery.core.loop import EpisodeOutcome, LoopConfig, Subscriber, run_episode
from recovery.core.modes import Mode
from recovery.core.robot import RobotBackend
from recovery.supervision.config import RollbackConfig
from recovery.supervision.memory import NominalState
from recovery.supervision.rollback import PhysicalRollback, RollbackResult


def play(backend, agent, init: int | None, seed: int, max_steps: int,
         subscribers: tuple[Subscriber, ...] = ()) -> EpisodeOutcome:
    """Reset ``backend`` into ``init`` and run one episode through the episode loop."""
    backend.reset(init, seed)
    return run_episode(backend, agent, backend.instruction, LoopConfig(max_steps=max_steps), subscribers)


def remember(backend: RobotBackend, step: int = 0) -> NominalState:
    """The backend's current state as a rollback target."""
    return NominalState(step, backend.eef_pose(), np.array(backend.observe()["joint_pos"]), 1.0, 1.0, True)


def roll_back(backend: RobotBackend, target: NominalState, config: RollbackConfig = RollbackConfig()) -> RollbackResult:
    """Execute a physical rollback period by period, as the episode loop would."""
    rollback = PhysicalRollback(target, config, backend)
    while (control := rollback.next(backend.observe(), backend.eef_pose(), Mode.RETRY)) is not None:
        backend.step(control.command)
    return rollback.result()
