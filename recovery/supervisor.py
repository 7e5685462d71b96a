"""The supervisor: watches every step, decides every k steps, rolls back, hands control back.

It is an Agent (see recovery.evaluation.episode): it wraps the chunk broker of the base policy
and needs nothing but the RobotBackend interface, so it runs the same in LIBERO and on a robot.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from critics.quality import QualityMonitor
from critics.references import reference_feature
from critics.risk import RiskMonitor
from critics.tracking import TrackingMonitor
from recovery.backend import Observation, RobotBackend
from recovery.grasp import GraspMonitor
from recovery.memory import NominalMemory, NominalState
from recovery.modes import Mode
from recovery.rollback import RollbackConfig, roll_back
from recovery.selectors import DecisionContext, Selector
from vla_wrappers.broker import ChunkBroker

HOLD_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1e-9, 0.0])  # stay put, keep the grip (gripper 0 = hold)
ValueFn = Callable[[Observation], float]


@dataclass(frozen=True)
class SupervisorConfig:
    decision_every: int = 5  # k
    retry_horizon: int = 15  # RETRY: best quality within the last 15 steps
    repair_horizon: int = 30  # REPAIR: best contact-free state within the last 30 steps
    contact_threshold: float = 5.0  # N; "contact-free" below it (and not holding anything)
    grasp_latch: int = 5  # a closed gripper that touched something this many steps ago still holds it
    max_rollbacks: int = 3  # per-episode recovery budget
    history: int = 20  # steps of history in each DecisionContext (the learned selector's view)
    rollback: RollbackConfig = field(default_factory=RollbackConfig)
    keep_trace: bool = False  # per-step traces in the summary (for plots)


class Supervisor:
    def __init__(self, backend: RobotBackend, broker: ChunkBroker, selector: Selector, quality: QualityMonitor,
                 value_fn: Callable[[str], ValueFn] | None = None, risk: RiskMonitor | None = None,
                 config: SupervisorConfig = SupervisorConfig()):
        if config.rollback.kind == "snapshot" and not backend.supports_snapshot:
            raise ValueError(f"{type(backend).__name__} cannot snapshot: use the physical rollback")
        self.backend, self.broker, self.selector = backend, broker, selector
        self.quality, self.risk, self.config = quality, risk, config
        self._value_for_task = value_fn
        self.memory = NominalMemory(capacity=max(config.repair_horizon, config.retry_horizon) + 2)
        self.grasp = GraspMonitor(config.grasp_latch)
        self.tracking = TrackingMonitor()

    @property
    def inferences(self) -> int:
        return self.broker.inferences

    def reset(self, instruction: str) -> None:
        self.broker.reset(instruction)
        self.selector.reset()
        self.quality.reset()
        if self.risk:
            self.risk.reset()
        self.memory.reset()
        self.grasp.reset()
        self.tracking.reset()
        self._value = self._value_for_task(instruction) if self._value_for_task else None
        self._step, self._progress, self._last_action, self._mode = 0, 0, None, Mode.EXECUTE
        self.applied_mode = Mode.EXECUTE  # the mode the last decision actually ran
        self._last_rollback_step, self._last_rollback_mode = 0, None
        self.recovery_steps, self.rollbacks, self.failed_rollbacks = 0, 0, 0
        self._modes: Counter[str] = Counter()
        self._history: dict[str, deque] = {k: deque(maxlen=self.config.history)
                                            for k in ("state", "action", "quality", "value", "risk", "tracking")}
        self._trace: dict[str, list] = {k: [] for k in ("quality", "value", "risk", "tracking", "decisions")}

    # --- the Agent contract --------------------------------------------------------------------
    def act(self, obs: Observation) -> np.ndarray:
        """One control step: watch, decide when due, command. A learned selector in training drives
        the same three steps itself (recovery.learning.env), one decision per environment step."""
        self.observe(obs)
        if self.decision_due:
            obs = self.apply(self.selector.decide(self.context()))
        return self.command(obs)

    @property
    def decision_due(self) -> bool:
        return self._step > 0 and self._step % self.config.decision_every == 0

    def command(self, obs: Observation) -> np.ndarray:
        """The action for this step: the base policy's, or a hold."""
        action = HOLD_ACTION if self._mode == Mode.HOLD else self.broker.act(obs)
        self._last_action = np.asarray(action)
        self._step += 1
        self._progress += 1
        return action

    def close(self) -> None:
        self.broker.close()

    def summary(self) -> dict:
        out = {"modes": dict(self._modes), "rollbacks": self.rollbacks, "failed_rollbacks": self.failed_rollbacks,
               "recovery_steps": self.recovery_steps, "rollback": self.config.rollback.kind}
        if self.config.rollback.kind == "snapshot":
            out["note"] = "snapshot rollback: simulation-only upper bound"
        if self.config.keep_trace:
            out["trace"] = self._trace
        return out

    # --- watching ------------------------------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        """Score the state reached by the last action and remember it (rollback motion never gets here)."""
        self._obs = obs
        action = self._last_action if self._last_action is not None else np.zeros(7)
        quality = self.quality.update(self._progress, obs["eef_pos"], reference_feature(obs["state"]), action)
        value = self._value(obs) if self._value else 1.0
        risk = self.risk.update(value) if self.risk else 0.0
        tracking = self.tracking.update(obs["eef_pos"], action)
        contacts = self.backend.contacts()
        holding = self.grasp.update(action[6] > 0, contacts, self.config.contact_threshold)
        contact_free = contacts.is_free(self.config.contact_threshold) and not holding
        snapshot = self.backend.snapshot() if self.config.rollback.kind == "snapshot" else None
        self.memory.add(NominalState(self._step, self.backend.eef_pose(), quality, value, contact_free, snapshot,
                                     self._progress))
        for key, item in (("state", obs["state"]), ("action", action), ("quality", quality), ("value", value),
                          ("risk", risk), ("tracking", tracking)):
            self._history[key].append(item)
        if self.config.keep_trace:
            for key, item in (("quality", quality), ("value", value), ("risk", risk), ("tracking", tracking)):
                self._trace[key].append(round(float(item), 4))

    # --- deciding and recovering ---------------------------------------------------------------
    def context(self) -> DecisionContext:
        return DecisionContext(
            step=self._step, quality=self.quality.value, value=self._history["value"][-1],
            risk=self._history["risk"][-1], flags=dict(self.risk.flags) if self.risk else {},
            rollbacks_left=self.config.max_rollbacks - self.rollbacks,
            steps_since_rollback=self._step - self._last_rollback_step, last_rollback_mode=self._last_rollback_mode,
            history={k: np.array(v) for k, v in self._history.items()},
        )

    def apply(self, mode: Mode) -> Observation:
        """Switch to ``mode``; a rollback mode moves the arm now. Returns the observation to act on.
        A rollback past the episode's budget, or one that would drop what the gripper holds, becomes
        EXECUTE: whatever the selector, learned or not, asked for."""
        if mode.is_rollback and (self.rollbacks >= self.config.max_rollbacks
                                 or self.config.rollback.kind == "physical" and self.grasp.holding):
            mode = Mode.EXECUTE
        self.applied_mode = mode
        self._modes[mode.name] += 1
        self._mode = mode
        if not mode.is_rollback:
            return self._obs
        target = self._target(mode)
        result = roll_back(self.backend, target, self.config.rollback)
        self.recovery_steps += result.steps
        self.rollbacks += 1
        self.failed_rollbacks += not result.reached
        self._last_rollback_step, self._last_rollback_mode = self._step, mode
        self._progress = target.progress  # back where the task stood then: compare with the references there
        self.broker.flush()  # the in-flight chunk was planned for a state we left
        self.quality.reset()  # execution starts over from a nominal state; the jump is not the policy's motion
        self.tracking.reset()
        self._history["quality"].clear()
        self._history["tracking"].clear()
        self._mode = Mode.EXECUTE
        if self.config.keep_trace:
            self._trace["decisions"].append({"step": self._step, "mode": mode.name, "target_step": target.step,
                                             "reached": result.reached, "steps": result.steps})
        return self.backend.observe()

    def _target(self, mode: Mode) -> NominalState | None:
        """RETRY: best quality of the last ``retry_horizon`` steps; REPAIR: best contact-free state
        of the last ``repair_horizon``; RESET: the episode's start. A physical rollback opens the
        gripper, so it cannot reproduce a state that held something: it only takes contact-free
        targets, and falls back to the start when the window has none."""
        cfg, memory = self.config, self.memory
        physical = cfg.rollback.kind == "physical"
        if mode == Mode.RETRY:
            pick = memory.best_contact_free if physical else memory.best_recent
            target = pick(self._step, cfg.retry_horizon)
        elif mode == Mode.REPAIR:
            target = memory.best_contact_free(self._step, cfg.repair_horizon)
        else:
            target = None
        return target or memory.start
