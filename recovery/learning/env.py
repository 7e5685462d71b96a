"""The selector's world as a Gymnasium environment: one step is one high-level decision.

Between two decisions the supervisor drives the base policy for k control steps exactly as in
evaluation (``Supervisor.act`` is observe, apply the decided mode, command); here the agent's
action is the decided mode. Episodes draw a task, a layout sampled from its placement regions
(never one of the fixed evaluation init states) and, on a share of them, the disturbance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np

from critics.references import SHIPPED as REFERENCES_SHIPPED
from recovery.backend import Observation
from recovery.evaluation.episode import NUM_WAIT_STEPS, WAIT_ACTION
from recovery.learning.observation import LEARNED_MODES, ObservationLayout
from recovery.modes import Mode
from recovery.supervisor import Supervisor, SupervisorConfig

LAYOUT_SEEDS = (10_000, 2**31 - 1)  # sampled layouts; demos use 1000+, critic rollouts 2000+


@dataclass(frozen=True)
class RewardConfig:
    """The source's values: +1 success, -1 failure, -0.02 per decision, a price per recovery mode."""

    success: float = 1.0
    failure: float = -1.0
    per_decision: float = -0.02
    retry: float = -0.1
    repair: float = -0.3
    reset: float = -0.5

    def cost(self, mode: Mode) -> float:
        return {Mode.RETRY: self.retry, Mode.REPAIR: self.repair, Mode.RESET: self.reset}.get(mode, 0.0)


@dataclass(frozen=True)
class SelectorEnvConfig:
    suite: str = "libero_object"
    tasks: tuple[int | str, ...] = ()  # empty: every task of the suite
    policy: str = "embedded"
    policy_options: dict[str, str] = field(default_factory=dict)
    disturbance: str = "action_noise"
    disturbed_share: float = 0.5  # of episodes
    task_repeats: int = 4  # episodes in a row on one drawn task: an environment keeps one simulator
    # (a LIBERO scene holds ~1 GB; one per task and process exhausts a 24 GB machine), built once per run
    rollback: str = "physical"
    references: Path = REFERENCES_SHIPPED
    critic: Path | None = None  # None: the shipped critic of the suite, if any
    max_steps: int | None = None  # None: the suite's standard budget
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    observation: ObservationLayout = field(default_factory=ObservationLayout)


class SelectorEnv(gym.Env):
    """Observation: ``ObservationLayout.encode`` of the supervisor's decision context.
    Action: an index into ``LEARNED_MODES``. ``info['is_success']`` at the end of each episode."""

    metadata = {"render_modes": []}

    def __init__(self, config: SelectorEnvConfig = SelectorEnvConfig()):
        from sim.disturbances import DisturbanceConfig
        from sim.tasks import resolve_tasks

        if not 0.0 <= config.disturbed_share <= 1.0:
            raise ValueError(f"disturbed_share must be in [0, 1], got {config.disturbed_share}")
        self.config = config
        self._tasks = resolve_tasks(config.suite, list(config.tasks))
        self._disturbed, self._nominal = DisturbanceConfig(config.disturbance), DisturbanceConfig("none")
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (config.observation.size,), np.float32)
        self.action_space = gym.spaces.Discrete(len(LEARNED_MODES))
        self._built: tuple | None = None  # (task index, backend, supervisor) of the current run of episodes
        self._repeats_left = 0

    # --- Gymnasium ---------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        rng = self.np_random
        if seed is not None or self._repeats_left == 0:
            self._task = self._tasks[int(rng.integers(len(self._tasks)))]
            self._repeats_left = self.config.task_repeats
        self._repeats_left -= 1
        task = self._task
        disturbed = bool(rng.random() < self.config.disturbed_share)
        self._backend, self._supervisor = self._build(task)
        self._backend.config = self._disturbed if disturbed else self._nominal
        self._backend.reset(None, int(rng.integers(*LAYOUT_SEEDS)))
        self._supervisor.reset(self._backend.instruction)
        for _ in range(NUM_WAIT_STEPS):
            obs = self._backend.step(WAIT_ACTION).observation
        self._max_steps = self.config.max_steps or task.max_steps
        self._steps, self._success = 0, False
        self._episode = {"task": task.index, "disturbed": disturbed}
        self._drive(obs)
        return self._observation(), dict(self._episode)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        supervisor = self._supervisor
        obs = supervisor.apply(LEARNED_MODES[int(action)])
        mode = supervisor.applied_mode
        self._drive(self._control(supervisor.command(obs)))
        reward = self.config.reward.per_decision + self.config.reward.cost(mode)
        done = self._over()
        info = {"mode": mode.name}
        if done:
            reward += self.config.reward.success if self._success else self.config.reward.failure
            info.update(self._episode, is_success=self._success, steps=self._steps, **supervisor.summary())
        return self._observation(), float(reward), done, False, info

    def decision_context(self):
        """The supervisor's view at the pending decision: what a teacher selector decides on."""
        return self._supervisor.context()

    def close(self) -> None:
        if self._built is not None:
            _, backend, supervisor = self._built
            supervisor.close()
            backend.close()
            self._built = None

    # --- between decisions ---------------------------------------------------------------------------
    def _drive(self, obs: Observation) -> None:
        """Run the base policy from ``obs`` until the next decision is due or the episode is over."""
        while not self._over():
            self._supervisor.observe(obs)
            if self._supervisor.decision_due:
                return
            obs = self._control(self._supervisor.command(obs))

    def _control(self, action: np.ndarray) -> Observation:
        result = self._backend.step(action)
        self._steps += 1
        self._success = result.success
        return result.observation

    def _over(self) -> bool:
        """The evaluation's end: success, or the step budget spent (rollback motion included)."""
        return self._success or self._steps + self._supervisor.recovery_steps >= self._max_steps

    def _observation(self) -> np.ndarray:
        return self.config.observation.encode(self._supervisor.context())

    def _build(self, task) -> tuple:
        if self._built is None or self._built[0] != task.index:
            self.close()
            self._built = (task.index, *build_supervised_task(self.config, task))
        return self._built[1:]


class TrainingAgentSelector:
    """Stands in the supervisor for the agent being trained, which decides through ``apply``."""

    reads_value = True  # the observation holds value and risk

    def reset(self) -> None:
        pass

    def decide(self, ctx) -> Mode:
        raise RuntimeError("in training the agent decides: SelectorEnv.step calls Supervisor.apply")


def build_supervised_task(config: SelectorEnvConfig, task) -> tuple:
    """A disturbable LIBERO backend (physics only) and a supervisor around the base policy."""
    from dataclasses import replace

    from recovery.evaluation.assembly import RecoveryOptions, build_supervisor
    from recovery.evaluation.results import SAMPLED_LAYOUT, EpisodeSpec
    from sim.disturbances import DisturbanceConfig, DisturbedBackend
    from sim.libero_backend import LiberoBackend
    from vla_wrappers.broker import ChunkBroker
    from vla_wrappers.registry import make_policy

    backend = DisturbedBackend(LiberoBackend(task), DisturbanceConfig(config.disturbance), task.index)
    broker = ChunkBroker(make_policy(config.policy, backend, config.policy_options))
    spec = EpisodeSpec(task.suite, task.index, SAMPLED_LAYOUT, 0, config.policy)
    supervisor_config = replace(config.supervisor, history=config.observation.history)
    options = RecoveryOptions(rollback=config.rollback, references=config.references, critic=config.critic,
                              supervisor=supervisor_config)
    supervisor: Supervisor = build_supervisor(backend, broker, spec, options, TrainingAgentSelector())
    return backend, supervisor
