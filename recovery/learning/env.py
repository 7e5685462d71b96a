"""The selector's world as a Gymnasium environment: one step is one high-level decision.

Between two decisions the episode loop runs exactly as in evaluation (the supervisor as its agent,
rollback motion included); it stops where the supervisor is about to decide, and the agent's
action is the decided mode. Episodes draw a task, a layout sampled from its placement regions
(never one of the fixed evaluation init states) and, on a share of them, one of the disturbances
(a curriculum over several: the selector should not learn one disturbance's signature only).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import gymnasium as gym
import numpy as np

from recovery.core.decision import DecisionContext
from recovery.core.loop import EpisodeLoop, LoopConfig
from recovery.core.modes import Mode
from recovery.learning.counterfactual import outcome_after, outcome_left_alone
from recovery.supervision.build import build_supervisor, rule_config_for
from recovery.supervision.config import SHIPPED_REFERENCES, RecoveryOptions, SupervisorConfig
from recovery.supervision.observation import LEARNED_MODES, ObservationLayout
from recovery.supervision.repair import named_in, pose_change
from recovery.supervision.selectors import RuleConfig, RuleSelector
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import LiberoBackend
from sim.oracle import DisturbanceOracle
from sim.tasks import resolve_tasks
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy

LAYOUT_SEEDS = (10_000, 2**31 - 1)  # sampled layouts; demos use 1000+, critic rollouts 2000+


COUNTERFACTUALS = ("episode", "intervention")


@dataclass(frozen=True)
class RewardConfig:
    """The source's values: +1 success, -1 failure, -0.02 per decision, a price per recovery mode.
    ``counterfactual`` (``counterfactual.py``): None pays the outcome; "episode" pays the outcome's
    reward minus that of the base policy's own outcome, played out in simulation from the first
    decision that asked for a recovery (an episode that asked for none scores its costs only);
    "intervention" pays the same total, but each recovery at once for what it changed: the reward of
    the outcome played alone from after it minus that of the outcome played alone from before it (the
    sum telescopes), one more play-out per recovery."""

    success: float = 1.0
    failure: float = -1.0
    per_decision: float = -0.02
    retry: float = -0.1
    repair: float = -0.3
    reset: float = -0.5
    counterfactual: str | None = None

    def __post_init__(self) -> None:
        if self.counterfactual not in (None, *COUNTERFACTUALS):
            raise ValueError(f"counterfactual must be one of {COUNTERFACTUALS} or None, got {self.counterfactual!r}")

    def value(self, success: bool) -> float:
        return self.success if success else self.failure

    def outcome(self, success: bool, left_alone: bool | None) -> float:
        """The episode's end reward; ``left_alone``: the outcome the base policy reaches alone from
        before the latest recovery measured ("intervention": from after it), None where none was played."""
        value = self.value(success)
        if not self.counterfactual:
            return value
        return value - (value if left_alone is None else self.value(left_alone))

    def cost(self, mode: Mode) -> float:
        return {Mode.RETRY: self.retry, Mode.REPAIR: self.repair, Mode.RESET: self.reset}.get(mode, 0.0)


@dataclass(frozen=True)
class SelectorEnvConfig:
    suite: str = "libero_object"
    tasks: tuple[int | str, ...] = ()  # empty: every task of the suite
    policy: str = "embedded"
    policy_options: dict[str, str] = field(default_factory=dict)
    disturbances: tuple[str, ...] = ("action_noise",)  # a disturbed episode draws one of them
    disturbed_share: float = 0.5  # of episodes
    task_repeats: int = 4  # episodes in a row on one drawn task: an environment keeps one simulator
    # (a LIBERO scene holds ~1 GB; one per task and process exhausts a 24 GB machine), built once per run
    rollback: str = "physical"
    references: Path = SHIPPED_REFERENCES
    critic: Path | None = None  # None: the shipped critic of the suite, if any
    max_steps: int | None = None  # None: the suite's standard budget
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    observation: ObservationLayout = field(default_factory=ObservationLayout)
    rule: RuleConfig | None = None  # the rule whose advice the observation holds and the warm start clones
    # (None: the suite's shipped calibration for the policy)

    def __post_init__(self) -> None:
        """The supervisor keeps the history the observation shows; the observation scales the
        rollbacks left by the supervisor's budget. Set each on its own side: the other follows."""
        object.__setattr__(self, "supervisor", replace(self.supervisor, history=self.observation.history))
        object.__setattr__(self, "observation", replace(self.observation, max_rollbacks=self.supervisor.max_rollbacks))
        if self.rule is None:
            object.__setattr__(self, "rule", rule_config_for(self.suite, self.policy))


class SelectorEnv(gym.Env):
    """Observation: ``ObservationLayout.encode`` of the supervisor's decision context.
    Action: an index into ``LEARNED_MODES``. ``info['is_success']`` at the end of each episode."""

    metadata = {"render_modes": []}

    def __init__(self, config: SelectorEnvConfig = SelectorEnvConfig()):
        if not 0.0 <= config.disturbed_share <= 1.0:
            raise ValueError(f"disturbed_share must be in [0, 1], got {config.disturbed_share}")
        if not config.disturbances and config.disturbed_share > 0:
            raise ValueError("disturbed episodes need at least one disturbance")
        self.config = config
        self._tasks = resolve_tasks(config.suite, list(config.tasks))
        self._disturbances = [DisturbanceConfig(name) for name in config.disturbances]  # an unknown name fails here
        self._nominal = DisturbanceConfig("none")
        self._advisor = RuleSelector(config.rule)
        self._oracle = DisturbanceOracle(config.supervisor.retry_horizon)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (config.observation.size,), np.float32)
        self.action_space = gym.spaces.Discrete(len(LEARNED_MODES))
        self._built: tuple | None = None  # (task index, backend, broker, supervisor, selector) of the current run
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
        disturbance = self._disturbances[int(rng.integers(len(self._disturbances)))] if disturbed else self._nominal
        self._backend, self._broker, self._supervisor, self._selector = self._build(task)
        self._oracle.bind(self._backend)
        self._backend.config = disturbance
        self._backend.reset(None, int(rng.integers(*LAYOUT_SEEDS)))
        self._loop = EpisodeLoop(self._backend, self._supervisor,
                                 LoopConfig(max_steps=self.config.max_steps or task.max_steps))
        self._loop.start(self._backend.instruction)
        self._episode = {"task": task.index, "disturbed": disturbed, "disturbance": disturbance.name}
        self._left_alone: bool | None = None  # the base policy's outcome alone from before the first recovery
        self._alone: bool | None = None  # ... from after the latest recovery ("intervention"; else the same)
        self._alone_from: tuple[int, bool] | None = None  # (recoveries done, the outcome left alone): label_decision's
        self._run_to_decision()
        return self._observation(), dict(self._episode)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        asked, rewards = LEARNED_MODES[int(action)], self.config.reward
        if rewards.counterfactual and asked is not Mode.EXECUTE and self._left_alone is None:
            self._left_alone = self._alone = self._outcome_left_alone()
        self._selector.mode = asked
        self._loop.step()  # the supervisor decides (admitting the mode or not) and acts on it
        mode = self._supervisor.applied_mode
        self._run_to_decision()
        reward = rewards.per_decision + rewards.cost(mode)
        if rewards.counterfactual == "intervention" and mode is not Mode.EXECUTE and self._alone is not None:
            after = self._loop.success if self._loop.over else self._outcome_left_alone()
            reward += rewards.value(after) - rewards.value(self._alone)
            self._alone = after
        done = self._loop.over
        info = {"mode": mode.name}
        if done:
            success = self._loop.success
            reward += rewards.outcome(success, self._alone)
            info.update(self._episode, is_success=success, left_alone=self._left_alone, steps=self._loop.steps,
                        **self._supervisor.summary())
        return self._observation(), float(reward), done, False, info

    def decision_context(self) -> DecisionContext:
        """The supervisor's view at the pending decision."""
        return self._context

    def teacher_advice(self, teacher: str, rule_teaches: tuple[str, ...] = ()) -> Mode:
        """The warm start's teacher's mode at the pending decision: the rule's advice, or the
        disturbance oracle's (it reads this environment's simulated disturbance); with the oracle, the
        rule's in an episode under one of ``rule_teaches`` once that disturbance has begun."""
        ruled = self._episode["disturbance"] in rule_teaches and self._backend.record()["fired_at"] is not None
        if teacher == "rule" or ruled:
            return self._advisor.advise(self._context)
        return self._oracle.decide(self._context)

    def label_decision(self, window: int, mode: Mode = Mode.RETRY) -> dict | None:
        """At a pending decision of a disturbed episode within ``window`` steps after the burst ended
        (None elsewhere): the outcomes the base policy reaches left alone from here, and asked for
        ``mode`` once, then left alone (``counterfactual.outcome_after``), each played out in simulation
        and undone. The first is played once per stretch without a recovery: the simulation is
        deterministic, so executing on leads where leaving alone would."""
        since = self._backend.steps_since_disturbance
        if self._loop.over or since is None or since >= window:
            return None
        key = self._supervisor.rollbacks
        if self._alone_from is None or self._alone_from[0] != key:
            self._alone_from = (key, self._outcome_left_alone())
        after, ran = outcome_after(self._backend, self._supervisor, mode, self._loop.steps, self._loop.config.max_steps)
        return {"since": since, "alone": self._alone_from[1], "after": after, "ran": ran, **self._world_change()}

    def _world_change(self) -> dict:
        """What the selector's observation does not show: how far the objects the instruction names
        moved and tilted since the episode's start (the largest of each), and whether the hand holds
        something (``recovery improve-selector`` reports whether they tell where a recovery pays)."""
        then = self._supervisor.memory.start.observation["object_poses"]
        now = self._backend.observe()["object_poses"]
        changes = [pose_change(then[name], pose) for name, pose in now.items()
                   if name in then and named_in(self._backend.instruction, name)] or [(0.0, 0.0)]
        return {"displaced": max(d for d, _ in changes), "tilted": max(t for _, t in changes),
                "holding": self._supervisor.grasp.holding}

    def close(self) -> None:
        if self._built is not None:
            _, backend, _, supervisor, _ = self._built
            supervisor.close()
            backend.close()
            self._built = None

    # --- between decisions ---------------------------------------------------------------------------
    def _run_to_decision(self) -> None:
        """Run the episode loop until the supervisor is about to decide, or the episode is over."""
        while True:
            if self._loop.error is not None:
                raise self._loop.error
            if self._loop.over:
                self._context = self._supervisor.context()
                return
            context = self._supervisor.pending_decision(self._backend.observe())
            if context is not None:
                self._context = context
                return
            self._loop.step()

    def _outcome_left_alone(self) -> bool:
        return outcome_left_alone(self._backend, self._broker, self._loop.steps, self._loop.config.max_steps)

    def _observation(self) -> np.ndarray:
        layout = self.config.observation
        return layout.encode(self._context, self._advisor.advise(self._context) if layout.advised else None)

    def _build(self, task) -> tuple:
        if self._built is None or self._built[0] != task.index:
            self.close()
            self._built = (task.index, *build_supervised_task(self.config, task))
        return self._built[1:]


class TrainingAgentSelector:
    """Stands in the supervisor for the agent being trained: it decides what the environment's
    ``step`` was given."""

    reads_value = True  # the observation holds value and risk

    def __init__(self) -> None:
        self.mode = Mode.EXECUTE

    def reset(self) -> None:
        self.mode = Mode.EXECUTE

    def settings(self) -> dict:
        return {}

    def decide(self, ctx: DecisionContext) -> Mode:
        return self.mode


def build_supervised_task(config: SelectorEnvConfig, task) -> tuple:
    """A disturbable LIBERO backend (physics only), the broker over the base policy, a supervisor
    around it, and the selector through which the agent being trained decides."""
    backend = DisturbedBackend(LiberoBackend(task), DisturbanceConfig(), task.index)  # each episode sets its own
    broker = ChunkBroker(make_policy(config.policy, backend, config.policy_options))
    options = RecoveryOptions(rollback=config.rollback, references=config.references, critic=config.critic,
                              supervisor=config.supervisor)
    selector = TrainingAgentSelector()
    supervisor: Supervisor = build_supervisor(backend, broker, task.suite, task.name, selector, options)
    return backend, broker, supervisor, selector
