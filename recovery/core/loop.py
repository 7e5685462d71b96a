"""The episode loop: the one place that steps a robot during an episode.

openpi-runtime style: a backend (the robot), an agent (a chunk broker over a policy, or a
supervisor around one) and subscribers (video, trajectory recording, traces, ROS topics) that
observe without knowing each other. Each control period the agent answers with a ``Control``:
the command the robot executes (a policy action, a hold, or the next period of a recovery
motion) and the mode it runs in, or a snapshot to restore (one event, no control period). The
step budget counts every executed period, recovery motion included, here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from recovery.core.actions import WAIT_ACTION
from recovery.core.modes import Mode
from recovery.core.robot import Command, Observation, RobotBackend, StepResult

NUM_WAIT_STEPS = 10  # objects fall into place; the policy is not asked during these


@dataclass(frozen=True)
class Control:
    """An agent's answer for one control period."""

    command: Command | None = None  # what the robot executes this period (None only with ``restore``)
    mode: Mode = Mode.EXECUTE  # the mode the period runs in
    restore: Any = None  # a snapshot to return to instead (simulation only): no control period passes
    events: tuple[dict, ...] = ()  # what the agent decided this period, for the subscribers


class Agent(Protocol):
    """What acts: a ChunkBroker over a policy (its actions are EXECUTE controls) or a Supervisor."""

    inferences: int

    def reset(self, instruction: str) -> None: ...

    def act(self, obs: Observation) -> Control | np.ndarray: ...

    def summary(self) -> dict: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Step:
    """One executed control period: the observation acted on, what was executed, what it led to."""

    index: int  # 1-based count of executed periods in the episode
    observation: Observation
    command: Command
    mode: Mode
    result: StepResult


@dataclass
class EpisodeOutcome:
    success: bool
    steps: int  # executed control periods (policy and recovery motion), wait steps excluded
    inferences: int
    reason: str  # success | max_steps | error | a stop reason
    extras: dict = field(default_factory=dict)  # the agent's summary
    error: Exception | None = None  # what ended the episode early, with its traceback


class Subscriber:
    """Side concerns observe the loop through these; every hook is optional."""

    def on_episode_start(self, obs: Observation) -> None:
        """``obs``: the observation the agent first acts on."""

    def on_step(self, step: Step) -> None:
        """After every executed control period."""

    def on_event(self, event: dict) -> None:
        """Mode switches (``{"event": "mode", ...}``), the agent's decisions, restores, holds."""

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        """Once, also after an error."""


@dataclass(frozen=True)
class LoopConfig:
    max_steps: int  # control periods per episode, recovery motion included
    wait_steps: int = NUM_WAIT_STEPS  # settle steps before the agent is asked (0 on a real arm)
    # transient input errors (stale robot state, a policy server that failed one request): command
    # nothing for one period and ask again, instead of ending the episode
    hold_on: tuple[type[Exception], ...] = ()


class EpisodeLoop:
    """Drive one episode step by step (``run_episode`` runs it through; the selector's training
    environment stops it at each decision). The backend is reset by the caller."""

    def __init__(self, backend: RobotBackend, agent: Agent, config: LoopConfig,
                 subscribers: tuple[Subscriber, ...] = (), stop: Callable[[], str | None] | None = None):
        self.backend, self.agent, self.config = backend, agent, config
        self.subscribers, self._stop = subscribers, stop
        self.steps, self.success, self.mode = 0, False, Mode.EXECUTE
        self.reason: str | None = None  # set once the episode is over early (a stop or an error)
        self.error: Exception | None = None

    @property
    def over(self) -> bool:
        return self.success or self.reason is not None or self.steps >= self.config.max_steps

    def start(self, instruction: str) -> None:
        for _ in range(self.config.wait_steps):
            self.backend.step(WAIT_ACTION)
        self.agent.reset(instruction)
        obs = self.backend.observe()
        for sub in self.subscribers:
            sub.on_episode_start(obs)

    def step(self) -> None:
        """One control period (or a restore, or a hold); records an error instead of raising it."""
        reason = self._stop() if self._stop else None
        if reason:
            self.reason = reason
            return
        try:
            self._step()
        except self.config.hold_on as exc:
            self._switch(Mode.HOLD, reason=f"{type(exc).__name__}: {exc}")
            self.backend.idle()
        except Exception as exc:  # kept with its traceback in the outcome: the caller records or raises it
            self.reason, self.error = "error", exc

    def _step(self) -> None:
        obs = self.backend.observe()
        control = self.agent.act(obs)
        if not isinstance(control, Control):
            control = Control(control)
        for event in control.events:
            self._emit({**event, "step": self.steps})
        self._switch(control.mode)
        if control.restore is not None:
            self.backend.restore(control.restore)
            self._emit({"event": "restore", "step": self.steps})
            return
        result = self.backend.step(control.command)
        self.steps += 1
        self.success = result.success
        step = Step(self.steps, obs, control.command, control.mode, result)
        for sub in self.subscribers:
            sub.on_step(step)

    def finish(self) -> EpisodeOutcome:
        reason = self.reason or ("success" if self.success else "max_steps")
        outcome = EpisodeOutcome(self.success, self.steps, self.agent.inferences, reason, self.agent.summary(),
                                 self.error)
        for sub in self.subscribers:
            sub.on_episode_end(outcome)
        return outcome

    def _switch(self, mode: Mode, **info) -> None:
        if mode != self.mode:
            self.mode = mode
            self._emit({"event": "mode", "mode": mode.name, "step": self.steps, **info})

    def _emit(self, event: dict) -> None:
        for sub in self.subscribers:
            sub.on_event(event)


def run_episode(backend: RobotBackend, agent: Agent, instruction: str, config: LoopConfig,
                subscribers: tuple[Subscriber, ...] = (), stop: Callable[[], str | None] | None = None
                ) -> EpisodeOutcome:
    """Wait, then let the agent act until success, the step budget, a stop or an error."""
    loop = EpisodeLoop(backend, agent, config, subscribers, stop)
    try:
        loop.start(instruction)
    except Exception as exc:
        loop.reason, loop.error = "error", exc
    while not loop.over:
        loop.step()
    return loop.finish()
