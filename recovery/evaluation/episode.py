"""One episode of the standard protocol, openpi-runtime style: backend, agent, subscribers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from recovery.backend import GRIPPER_OPEN, Observation

NUM_WAIT_STEPS = 10  # objects fall into place; the policy is not asked during these
WAIT_ACTION = np.array([0.0] * 6 + [GRIPPER_OPEN])


class EpisodeBackend(Protocol):
    """What the episode loop needs beyond RobotBackend: a seeded reset into an init state."""

    instruction: str

    def reset(self, init_index: int | None, seed: int) -> Observation: ...

    def step(self, action: np.ndarray): ...


class Agent(Protocol):
    """What acts: a ChunkBroker over a policy, or a Supervisor around one."""

    inferences: int
    recovery_steps: int  # control steps spent outside the policy (rollback motion): they use the budget

    def reset(self, instruction: str) -> None: ...

    def act(self, obs: Observation) -> np.ndarray: ...

    def summary(self) -> dict: ...

    def close(self) -> None: ...


class Subscriber(Protocol):
    """Side concerns (video, demonstrations). Start sees the observation the policy first acts on."""

    def on_episode_start(self, obs: Observation) -> None: ...

    def on_step(self, obs: Observation, action: np.ndarray) -> None: ...

    def on_episode_end(self, success: bool) -> None: ...


@dataclass
class EpisodeOutcome:
    success: bool
    steps: int  # control steps driven by the agent's actions, wait steps excluded
    inferences: int
    extras: dict = field(default_factory=dict)


def run_episode(
    backend: EpisodeBackend, agent: Agent, init_index: int | None, seed: int, max_steps: int,
    subscribers: tuple[Subscriber, ...] = (),
) -> EpisodeOutcome:
    """Reset (``init_index`` None: a layout sampled with ``seed``), wait, then act until success or
    ``max_steps`` policy steps."""
    backend.reset(init_index, seed)
    agent.reset(backend.instruction)
    for _ in range(NUM_WAIT_STEPS):
        obs = backend.step(WAIT_ACTION).observation
    for sub in subscribers:
        sub.on_episode_start(obs)
    success, steps = False, 0
    while not success and steps + agent.recovery_steps < max_steps:
        action = agent.act(obs)
        result = backend.step(action)
        obs, success, steps = result.observation, result.success, steps + 1
        for sub in subscribers:
            sub.on_step(obs, action)
    for sub in subscribers:
        sub.on_episode_end(success)
    return EpisodeOutcome(success, steps, agent.inferences, agent.summary())
