"""The supervisor: watches every step, decides every k steps, rolls back, hands control back.

It is the episode loop's agent (``recovery.core.loop``): each control period it answers with what
the robot does next (the base policy's action through the chunk broker, a hold, or the next period
of a rollback) and never steps the robot itself. It needs nothing but the RobotBackend interface,
so it runs the same in LIBERO and on a robot.
"""

from __future__ import annotations

import copy
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Callable, NamedTuple

import numpy as np

from critics.quality import QualityMonitor
from critics.references import reference_feature
from critics.risk import RiskMonitor
from critics.tracking import TrackingMonitor
from recovery.core.actions import HOLD_ACTION
from recovery.core.decision import Decision, DecisionContext, History, Selector
from recovery.core.loop import Control
from recovery.core.modes import Mode
from recovery.core.robot import ContactInfo, EefPose, Observation, RobotBackend
from recovery.supervision.config import SupervisorConfig
from recovery.supervision.grasp import GraspMonitor
from recovery.supervision.memory import NominalMemory, NominalState
from recovery.supervision.repair import (PolicyRepair, RepairTarget, finger_gap, followed, knocked_over,
                                         misplaced_named, repair_target)
from recovery.supervision.rollback import Rollback, RollbackResult, start_rollback
from vla_wrappers.broker import ChunkBroker

ValueFn = Callable[[Sequence[Observation]], list[float]]  # V of each observation, in one pass


class _Observed(NamedTuple):
    """A policy step's state as recorded, waiting to be scored (a tuple: the cheapest to build)."""

    step: int
    progress: int
    obs: Observation  # backends hand out a new observation every step and never change it
    action: np.ndarray  # the action that led here
    contacts: ContactInfo
    pose: EefPose
    snapshot: Any


class Supervisor:
    def __init__(self, backend: RobotBackend, broker: ChunkBroker, selector: Selector, quality: QualityMonitor,
                 value_fn: Callable[[str], ValueFn] | None = None, risk: RiskMonitor | None = None,
                 config: SupervisorConfig = SupervisorConfig(), repair: ChunkBroker | None = None):
        """``repair``: the repair policy's broker; with one, a recovery whose remembered world differs
        from the current one runs it (``apply``, ``recovery.supervision.repair``)."""
        if config.rollback.kind == "snapshot" and not backend.supports_snapshot:
            raise ValueError(f"{type(backend).__name__} cannot snapshot: use the physical rollback")
        if repair is not None and config.rollback.kind != "physical":
            raise ValueError("a repair policy restores the world physically: it runs with the physical rollback")
        self.backend, self.broker, self.selector, self.repair = backend, broker, selector, repair
        self.quality, self.risk, self.config = quality, risk, config
        self._value_for_task = value_fn
        horizons = (config.repair_horizon, config.retry_horizon, config.repair.horizon)
        self.memory = NominalMemory(capacity=max(horizons) + 2)
        self.grasp = GraspMonitor(config.grasp_latch)
        self.tracking = TrackingMonitor()

    @property
    def inferences(self) -> int:
        return self.broker.inferences

    def reset(self, instruction: str) -> None:
        self._instruction = instruction
        self.selector.reset()
        self.quality.reset()
        if self.risk:
            self.risk.reset()
        self.memory.reset()
        self.grasp.reset()
        self.tracking.reset()
        self._value = self._value_for_task(instruction) if self._value_for_task else None
        self._step, self._progress, self._last_action, self._mode = 0, 0, None, Mode.EXECUTE
        self._let_go_at: int | None = None  # the policy step at which the hand last let go (a drop)
        self._observed_at = self._decided_at = -1  # the policy step whose observation was scored / decided on
        self._rollback: Rollback | None = None
        self._rollback_mode = Mode.EXECUTE
        self._next_target: NominalState | None = None  # where the admitted rollback goes
        self._next_goal: RepairTarget | None = None  # and, when a repair policy restores the world there, its goal
        self.applied_mode = Mode.EXECUTE  # the mode the last decision actually ran
        self._last_rollback_step, self._last_rollback_mode = 0, None
        self.recovery_steps, self.rollbacks, self.failed_rollbacks = 0, 0, 0
        self._modes: Counter[str] = Counter()
        self._history: dict[str, deque] = {k: deque(maxlen=self.config.history)
                                            for k in ("state", "action", "quality", "value", "risk", "tracking")}
        self._trace: dict[str, list] = {k: [] for k in ("quality", "value", "risk", "tracking")}
        self._recoveries: list[dict] = []  # each finished rollback or repair: when, to where, how long, reached
        self._unscored: list[_Observed] = []
        # last, once the episode's state exists: a policy that cannot serve this task (a missing
        # checkpoint) fails the episode here with its own error; the repair policy too, not at its first repair
        self.broker.reset(instruction)
        if self.repair is not None:
            self.repair.reset(instruction)

    # --- the Agent contract --------------------------------------------------------------------
    def act(self, obs: Observation) -> Control:
        """One control period: continue a rollback, or watch, decide when due, and command."""
        if self._rollback is not None:
            return self._continue_rollback(obs)
        context = self.pending_decision(obs)
        if context is None:
            return self._command(obs)
        self._decided_at = self._step  # once: a command that fails (a transient error) is asked again, not the selector
        mode = self.apply(self.selector.decide(context))
        event = {"event": "decision", "mode": mode.name, "rollbacks": self.rollbacks}
        if mode.is_rollback:
            return self._start_rollback(mode, obs, event)
        return self._command(obs, (event,) if mode != Mode.EXECUTE else ())

    def pending_decision(self, obs: Observation) -> DecisionContext | None:
        """Score ``obs`` (once per policy step) and return the decision context if a decision is due
        now. The selector's training environment stops here to let the agent being trained decide."""
        if self._rollback is not None:
            return None
        if self._observed_at != self._step:
            self.observe(obs)
            self._observed_at = self._step
        return self.context() if self.decision_due and self._decided_at != self._step else None

    @property
    def decision_due(self) -> bool:
        return self._step > 0 and self._step % self.config.decision_every == 0

    def close(self) -> None:
        self.broker.close()
        if self.repair is not None:
            self.repair.close()

    def fork(self, selector: Selector) -> Supervisor:
        """A copy deciding through ``selector`` that owns everything the episode changes (memory,
        monitors, counters, the rollback under way) and shares the rest: the robot, the policies and
        the critic. To play a branch of the episode out in simulation and drop it
        (``recovery.learning.counterfactual``); whoever restores the robot restores the brokers too."""
        shared = (self.backend, self.broker, self.repair, self._value_for_task, self._value)
        memo = {id(item): item for item in shared if item is not None}
        memo[id(self.selector)] = selector
        return copy.deepcopy(self, memo)

    @property
    def repair_goal(self) -> RepairTarget | None:
        """What the repair under way steers toward (None when none is): for recording repair demonstrations."""
        return self._rollback.goal if isinstance(self._rollback, PolicyRepair) else None

    def summary(self) -> dict:
        self._score()
        recoveries = self._recoveries
        if self._rollback is not None:  # the episode ended inside one (a success, or the budget spent)
            recoveries = recoveries + [{**self._recovery_record(self._rollback.result()), "unfinished": True}]
        out = {"modes": dict(self._modes), "rollbacks": self.rollbacks, "failed_rollbacks": self.failed_rollbacks,
               "recovery_steps": self.recovery_steps, "rollback": self.config.rollback.kind,
               "recoveries": recoveries}
        if self.config.rollback.kind == "snapshot":
            out["note"] = "snapshot rollback: simulation-only upper bound"
        if self.config.target_score != SupervisorConfig.target_score:
            out["target_score"] = self.config.target_score
        if self.config.keep_trace:
            out["trace"] = self._trace
        return out

    # --- watching ------------------------------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        """Record the state reached by the last action (rollback motion never gets here): what only
        the robot can tell now (contacts, pose, a snapshot) is read now, the rest is scored by
        ``_score`` when a decision reads it."""
        action = self._last_action if self._last_action is not None else np.zeros(7)
        snapshot = self.backend.snapshot() if self.config.rollback.kind == "snapshot" else None
        self._unscored.append(_Observed(self._step, self._progress, obs, action, self.backend.contacts(),
                                        self.backend.eef_pose(), snapshot))

    def _score(self) -> None:
        """Run the metrics, critics and memory over the recorded states, in order. They are read only
        at decisions (every k steps), and a burst of k states right after one another costs about
        half of scoring each state right after its physics step, when the caches are cold
        (``benchmarks/supervisor_overhead.py``); the value net and the nearest-reference search run
        once over all of them."""
        if not self._unscored:
            return
        cfg, unscored = self.config, self._unscored
        observations = [seen.obs for seen in unscored]
        states = [obs["state"] for obs in observations]
        values = self._value(observations) if self._value else [1.0] * len(unscored)
        risks = self.risk.update(values) if self.risk else [0.0] * len(unscored)
        positions = [np.asarray(obs["eef_pos"], dtype=np.float64).tolist() for obs in observations]
        translations = [seen.action[:3].tolist() for seen in unscored]
        qualities = self.quality.update([seen.progress for seen in unscored], positions,
                                        reference_feature(np.array(states)), translations)
        trackings = [self.tracking.update(position, move) for position, move in zip(positions, translations)]
        for seen, quality, value in zip(unscored, qualities, values):
            closing = bool(seen.action[6] > 0)
            holding = self.grasp.update(closing, seen.contacts, cfg.contact_threshold, finger_gap(seen.obs["state"]))
            if self.grasp.let_go:
                self._let_go_at = seen.step
            contact_free = seen.contacts.is_free(cfg.contact_threshold) and not holding
            self.memory.add(NominalState(seen.step, seen.pose, np.asarray(seen.obs["joint_pos"], dtype=np.float64),
                                         quality, value, contact_free, seen.snapshot, seen.progress, holding, closing,
                                         seen.obs))
        signals = {"state": states, "action": [seen.action for seen in unscored],
                   "quality": qualities, "value": values, "risk": risks, "tracking": trackings}
        for key, series in signals.items():
            self._history[key].extend(series)
            if cfg.keep_trace and key in self._trace:
                self._trace[key] += [round(float(item), 4) for item in series]
        self._unscored.clear()

    # --- deciding and recovering ---------------------------------------------------------------
    def context(self) -> DecisionContext:
        self._score()
        return DecisionContext(
            step=self._step, quality=self.quality.value, value=self._history["value"][-1],
            risk=self._history["risk"][-1], flags=dict(self.risk.flags) if self.risk else {},
            rollbacks_left=self.config.max_rollbacks - self.rollbacks,
            steps_since_rollback=self._step - self._last_rollback_step, last_rollback_mode=self._last_rollback_mode,
            history=History({k: tuple(v) for k, v in self._history.items()}),
            # with a full hand there is nothing to report: a repair runs only with an empty one, and what the
            # hand carries tilts with it (a bowl pinched at its rim rides 25 degrees over, 6-7 cm from the grip)
            knocked_over=knocked_over(self.memory.latest.observation, self.memory.start, self._instruction,
                                      self.config.repair) if self.repair is not None and not self.grasp.holding else (),
            instruction=self._instruction, let_go_at=self._let_go_at,
        )

    def apply(self, choice: Mode | Decision) -> Mode:
        """Admit the selector's choice and switch to it; returns the mode that runs. A rollback past
        the episode's budget, or one without a state it can reproduce (a physical RESET while the
        gripper holds something would drop it), becomes EXECUTE: whatever the selector, learned or
        not, asked for. With a repair policy, a recovery whose remembered world is not the current
        one runs the repair policy toward it (``_repair_for``), as a REPAIR (a RESET stays one):
        moving the arm back would not restore it."""
        decision = Decision.of(choice)
        mode = decision.mode
        self._next_target, self._next_goal = None, None
        if mode.is_rollback and self.rollbacks < self.config.max_rollbacks:
            self._next_target = self._target(mode, decision.before)
            repair = self._repair_for(mode)
            if repair is not None:
                (self._next_target, self._next_goal), mode = repair, Mode.RESET if mode == Mode.RESET else Mode.REPAIR
        if mode.is_rollback and self._next_target is None:
            mode = Mode.EXECUTE
        self.applied_mode = mode
        self._modes[mode.name] += 1
        self._mode = mode
        return mode

    def _repair_for(self, mode: Mode) -> tuple[NominalState, RepairTarget] | None:
        """The state a repair would bring back for ``mode`` and the repair's goal: the best state of
        the last ``RepairConfig.horizon`` steps whose world is not the current one and that a repair
        can reproduce (``NominalMemory.repairable``; the rollbacks' windows often hold only states
        that already show the disturbed world, which moving the arm back cannot undo), else the start;
        a RESET's: the start, if its world differs. None where nothing differs, and with a full hand, which only goes
        back (the rollback carries what it holds)."""
        if self.repair is None or self.grasp.holding:
            return None
        cfg = self.config
        states = [self.memory.start] if mode == Mode.RESET else \
            [*self.memory.repairable(self._step, cfg.repair.horizon, cfg.target_score), self.memory.start]
        for state in states:
            goal = repair_target(self.memory.latest.observation, state, self._instruction, cfg.repair)
            if goal.focus is not None:
                return state, goal
        return None

    def _command(self, obs: Observation, events: tuple[dict, ...] = ()) -> Control:
        """The base policy's action for this step, or a hold."""
        action = HOLD_ACTION if self._mode == Mode.HOLD else self.broker.act(obs)
        self._last_action = np.asarray(action)
        self._step += 1
        self._progress += 1
        return Control(action, self._mode, events=events)

    def _start_rollback(self, mode: Mode, obs: Observation, event: dict) -> Control:
        target = self._next_target
        if self._next_goal is not None:
            self.repair.reset(self._instruction)
            self._rollback = PolicyRepair(target, self._next_goal, self.repair, self.config.repair)
            event = {**event, "repair": self._next_goal.focus}
        else:
            self._rollback = start_rollback(target, self.config.rollback, self.backend,
                                            followed(obs, target, self.config.rollback, self.config.repair.tipped))
        self._rollback_mode = mode
        return self._continue_rollback(obs, ({**event, "target_step": target.step, "goal": target.joints.tolist()},))

    def _continue_rollback(self, obs: Observation, events: tuple[dict, ...] = ()) -> Control:
        control = self._rollback.next(obs, self.backend.eef_pose(), self._rollback_mode)
        if control is not None:
            return Control(control.command, control.mode, control.restore, events)
        return self._command(obs, events + (self._end_rollback(),))

    def _end_rollback(self) -> dict:
        """Book the finished rollback and start execution over from the state it reached."""
        result, target, mode = self._rollback.result(), self._rollback.target, self._rollback_mode
        self._rollback = None
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
        record = self._recovery_record(result, mode, target)
        self._recoveries.append(record)
        return {"event": "rollback_end", **record, "pos_error": result.pos_error, "rot_error": result.rot_error}

    def _recovery_record(self, result: RollbackResult, mode: Mode | None = None,
                         target: NominalState | None = None) -> dict:
        """What the results record shows of a recovery (by default the one under way)."""
        mode, target = mode or self._rollback_mode, target or self._rollback.target
        record = {"step": self._step, "mode": mode.name, "target_step": target.step, "reached": result.reached,
                  "steps": result.steps, **result.details}
        return {**record, "refused": result.refused} if result.refused else record

    def _target(self, mode: Mode, before: int | None = None) -> NominalState | None:
        """RETRY: best quality of the last ``retry_horizon`` steps; REPAIR: best contact-free state
        of the last ``repair_horizon``; RESET: the episode's start. With ``before`` (the selector
        knows when the trouble began: ``Decision``), the window ends there instead of now, and the
        latest one stands in where it holds no state to go to. A physical rollback takes only
        states it can reproduce (``NominalMemory.best_physical``): while the gripper holds
        something, it carries it back to a state where it held it (None when there is none, or for
        a RESET); otherwise it falls back to the start when the window has no free state, as long as
        the objects the instruction names still lie as they did there (``_start_unchanged``)."""
        cfg, memory = self.config, self.memory
        carrying = cfg.rollback.kind == "physical" and self.grasp.holding
        if mode == Mode.RESET:
            return None if carrying else memory.start
        horizon = cfg.retry_horizon if mode == Mode.RETRY else cfg.repair_horizon

        def best(end: int) -> NominalState | None:  # of the ``horizon`` steps before ``end``
            if cfg.rollback.kind == "physical":
                return memory.best_physical(end, horizon, carrying, cfg.target_score)
            if mode == Mode.RETRY:
                return memory.best_recent(end, horizon, cfg.target_score)
            return memory.best_contact_free(end, horizon, cfg.target_score)

        target = (best(min(before, self._step)) if before is not None else None) or best(self._step)
        return target or (memory.start if not carrying and self._start_unchanged() else None)

    def _start_unchanged(self) -> bool:
        """Whether the objects the instruction names lie where they did at the start. Once the task
        has moved one (placed the first of two objects), driving the arm home does not bring the
        start back: it leaves the base policy a half-done task seen from where it began, which it
        has never met (libero_10: 8 of the 10 nominal episodes the rule lost went back to the start
        135-400 steps in). A snapshot restores the whole world and always may."""
        if self.config.rollback.kind == "snapshot":
            return True
        near_hand = replace(self.config.repair, held=self.config.rollback.start_hand)
        return not misplaced_named(self.memory.latest.observation, self.memory.start, self._instruction, near_hand)
