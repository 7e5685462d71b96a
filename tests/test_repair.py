"""Repairs on the kinematic robot: what a repair targets, when a RETRY becomes one, how it ends."""

from __future__ import annotations

import numpy as np
import pytest

from critics.quality import QualityMonitor
from recovery.core.actions import GRIPPER_CLOSE, GRIPPER_OPEN, POS_SCALE
from recovery.core.loop import LoopConfig, run_episode
from recovery.core.modes import Mode
from recovery.core.robot import EefPose, JointTarget, Observation
from recovery.supervision.config import RepairConfig, RollbackConfig, SupervisorConfig
from recovery.supervision.memory import NominalState
from recovery.supervision.repair import followed, repair_target, repaired
from recovery.supervision.selectors import RuleSelector
from recovery.supervision.supervisor import Supervisor
from tests.kinematic_robot import BASE, GRASP_REACH, KinematicRobot, ReachPolicy
from tests.test_loop import UNREACHABLE, Log, ScriptedSelector
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput
from vla_wrappers.broker import ChunkBroker

CAN = BASE + np.array([0.05, 0.05, 0.0])
CONFIG = RepairConfig()
TASK = "reach the goal past the can and the box"  # a repair restores only the objects the task names


class ServoRepair(Policy):
    """A repair policy for the kinematic robot that honours the real contract (it reads only the
    observation and its ``repair_target``), standing in for the learned network: it fetches the
    focus, carries it to its place (or keeps it, when it was held there), then goes to the target's
    grip pose."""

    def reset(self, instruction: str) -> None:
        self.placed = False

    def infer(self, obs: Observation) -> PolicyOutput:
        goal, eef = obs["repair_target"], obs["eef_pos"]
        focus, fingers = goal["focus"], obs["state"][6] - obs["state"][7]
        if focus and not self.placed:
            obj = obs["object_poses"][focus][:3]
            if np.linalg.norm(obj - eef) > GRASP_REACH / 2:
                return self._toward(eef, obj, GRIPPER_OPEN)
            if fingers > 0.015:
                return self._toward(eef, eef, GRIPPER_CLOSE)
            if not goal["focus_held"]:
                place = goal["object_poses"][focus][:3]
                if np.linalg.norm(place - eef) > 0.002:
                    return self._toward(eef, place, GRIPPER_CLOSE)
                self.placed = True
        if self.placed and fingers < 0.03:
            return self._toward(eef, eef, GRIPPER_OPEN)  # let go in place before leaving
        gripper = GRIPPER_CLOSE if goal["holding"] else GRIPPER_OPEN
        return self._toward(eef, np.asarray(goal["eef_pos"]), gripper)

    @staticmethod
    def _toward(eef: np.ndarray, point: np.ndarray, gripper: float) -> PolicyOutput:
        move = np.clip(0.3 * (point - eef) / (0.2 * POS_SCALE), -1.0, 1.0)  # the robot lags a period: gently
        return PolicyOutput(np.r_[move, 0.0, 0.0, 0.0, gripper][None])


class Idle(Policy):
    """A repair policy that never gets anywhere: its repairs end on their budget."""

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs: Observation) -> PolicyOutput:
        return PolicyOutput(np.array([[0.0] * 6 + [GRIPPER_OPEN]]))


def _supervised(robot: KinematicRobot, plan: dict[int, Mode], repair: Policy | None, **repair_config) -> Supervisor:
    config = SupervisorConfig(repair=RepairConfig(**repair_config), keep_trace=True)
    return Supervisor(robot, ChunkBroker(ReachPolicy(robot, UNREACHABLE)), ScriptedSelector(plan), QualityMonitor(None),
                      config=config, repair=ChunkBroker(repair, 1) if repair else None)


def _episode(robot: KinematicRobot, supervisor: Supervisor, knock_at: int | None = None, max_steps: int = 120):
    """``knock_at``: after that executed period the can lies 10 cm away (a decision there sees it first)."""
    log = Log()
    if knock_at is not None:
        log.on_step = lambda step, knock=log.on_step: (knock(step), step.index == knock_at
                                                        and robot.place("can", CAN + [0.1, 0.0, 0.0]))
    robot.instruction = TASK
    robot.reset(0, 7)
    robot.place("can", CAN)
    outcome = run_episode(robot, supervisor, robot.instruction, LoopConfig(max_steps=max_steps, wait_steps=0), (log,))
    return outcome, log


@pytest.mark.parametrize("mode", [Mode.RETRY, Mode.REPAIR])
def test_a_recovery_whose_world_is_as_remembered_stays_a_rollback(mode):
    robot = KinematicRobot(goal=UNREACHABLE)
    outcome, log = _episode(robot, _supervised(robot, {20: mode}, ServoRepair()))
    (recovery,) = outcome.extras["recoveries"]
    assert recovery["mode"] == mode.name and "repair" not in recovery
    assert any(isinstance(step.command, JointTarget) for step in log.steps)


def test_a_retry_after_an_object_was_knocked_away_becomes_a_repair_that_puts_it_back():
    robot = KinematicRobot(goal=UNREACHABLE)
    outcome, log = _episode(robot, _supervised(robot, {25: Mode.RETRY}, ServoRepair()), knock_at=25)
    (recovery,) = outcome.extras["recoveries"]
    assert recovery["mode"] == "REPAIR" and recovery["repair"] == "can" and recovery["reached"]
    assert recovery["repair_kind"] == "put back"
    repairing = [step for step in log.steps if step.mode == Mode.REPAIR]
    assert len(repairing) == recovery["steps"] > 10  # the repair's periods, each executed by the loop
    assert not any(isinstance(step.command, JointTarget) for step in repairing)  # the policy's actions
    assert np.linalg.norm(repairing[-1].result.observation["object_poses"]["can"][:3] - CAN) < CONFIG.placed
    assert outcome.steps == 120  # the repair's periods count against the episode's budget


def test_without_a_repair_policy_a_knocked_world_is_only_rolled_back():
    robot = KinematicRobot(goal=UNREACHABLE)
    outcome, log = _episode(robot, _supervised(robot, {25: Mode.RETRY}, None), knock_at=25)
    (recovery,) = outcome.extras["recoveries"]
    assert recovery["mode"] == "RETRY" and "repair" not in recovery
    assert np.linalg.norm(log.steps[-1].result.observation["object_poses"]["can"][:3] - CAN) > 0.09


def test_a_repair_that_gets_nowhere_ends_on_its_budget():
    robot = KinematicRobot(goal=UNREACHABLE)
    outcome, log = _episode(robot, _supervised(robot, {25: Mode.REPAIR}, Idle(), max_steps=12), knock_at=25)
    (recovery,) = outcome.extras["recoveries"]
    assert recovery["mode"] == "REPAIR" and recovery["steps"] == 12 and not recovery["reached"]
    assert log.modes()[-1] == "EXECUTE"  # control went back to the base policy
    robot = KinematicRobot(goal=UNREACHABLE)
    outcome, _ = _episode(robot, _supervised(robot, {25: Mode.REPAIR}, Idle()), knock_at=25, max_steps=60)
    (recovery,) = outcome.extras["recoveries"]  # the budget ran out inside the repair: listed all the same
    assert recovery["unfinished"] and recovery["steps"] == 35 and recovery["repair"] == "can"


def _state(step: int, eef, objects: dict, holding: bool = False) -> NominalState:
    eef = np.asarray(eef, dtype=np.float64)
    obs = {"state": np.r_[eef, 0, 0, 0, 0.02, -0.02], "eef_pos": eef,
           "object_poses": {n: np.r_[np.asarray(p, dtype=np.float64), 0, 0, 0, 1] for n, p in objects.items()}}
    return NominalState(step, EefPose(eef, np.eye(3)), np.zeros(7), 1.0, 1.0, True, holding=holding, observation=obs)


def test_the_focus_is_the_dropped_object_else_a_named_one_knocked_over_else_the_most_displaced():
    then = _state(10, [0.5, 0, 1.0], {"can": [0.5, 0, 1.0], "box": [0.3, 0, 0.9], "jar": [0.2, 0, 0.9]}, holding=True)
    now = _state(20, [0.6, 0, 1.1], {"can": [0.4, 0.1, 0.9], "box": [0.3, 0.05, 0.9], "jar": [0.2, 0.3, 0.9]})
    dropped = repair_target(now.observation, then, TASK, CONFIG)
    assert (dropped.focus, dropped.focus_held) == ("can", True)  # held there, not in the hand now
    free = _state(10, [0.5, 0, 1.0], {"box": [0.3, 0, 0.9], "jar": [0.2, 0, 0.9]})
    moved = repair_target(now.observation, free, TASK, CONFIG)
    assert (moved.focus, moved.focus_held, moved.focus_tipped) == ("box", False, False)  # the jar moved more: unnamed
    over = np.r_[0.3, 0.0, 0.9, np.sin(0.4), 0, 0, np.cos(0.4)]  # 46 degrees over, in place
    tipped = dict(now.observation, object_poses={**now.observation["object_poses"], "box": over})
    both = _state(10, [0.5, 0, 1.0], {"box": [0.3, 0, 0.9], "can": [0.4, 0.3, 0.9]})
    stand = repair_target(tipped, both, TASK, CONFIG)  # the can lies 20 cm off, the box knocked over
    assert (stand.focus, stand.focus_tipped) == ("box", True)
    assert repair_target(now.observation, free, "reach the goal", CONFIG).focus is None  # nothing named


def test_a_rollback_follows_the_object_its_target_had_the_hand_at_once_it_has_moved():
    """The hand was over the can there (3 cm above it); the burst shoved the can 4 cm: the rollback goes where
    the hand was against the can. Not for a can moved less, knocked over, or one the hand was not over."""
    rollback, tipped = RollbackConfig(), CONFIG.tipped
    then = _state(10, [0.5, 0, 1.03], {"can": [0.5, 0.01, 1.0], "box": [0.3, 0, 0.9]})
    now = _state(20, [0.6, 0, 1.1], {"can": [0.5, 0.05, 1.0], "box": [0.3, 0.1, 0.9]})
    follow = followed(now.observation, then, rollback, tipped)
    assert follow.name == "can" and np.allclose(follow.shift, [0.0, 0.04, 0.0])  # the box moved more, but far off
    assert followed(then.observation, then, rollback, tipped) is None  # nothing moved
    nudged = _state(20, [0.6, 0, 1.1], {"can": [0.5, 0.025, 1.0], "box": [0.3, 0.1, 0.9]})
    assert followed(nudged.observation, then, rollback, tipped) is None  # within follow_moved
    over = np.r_[0.5, 0.05, 1.0, np.sin(0.4), 0, 0, np.cos(0.4)]  # 46 degrees over
    knocked = dict(now.observation, object_poses={**now.observation["object_poses"], "can": over})
    assert followed(knocked, then, rollback, tipped) is None
    away = _state(10, [0.5, 0, 1.2], {"can": [0.5, 0.01, 1.0], "box": [0.3, 0, 0.9]})  # the hand 20 cm up
    assert followed(now.observation, away, rollback, tipped) is None
    beside = _state(10, [0.5, 0, 1.0], {"can": [0.53, 0, 1.0], "box": [0.3, 0, 0.9]})  # at its side (a bowl's rim)
    assert followed(_state(20, [0.6, 0, 1.1], {"can": [0.53, 0.04, 1.0]}).observation, beside, rollback, tipped) is None
    held = _state(10, [0.5, 0, 1.03], {"can": [0.5, 0.01, 1.0], "box": [0.3, 0, 0.9]}, holding=True)
    assert followed(now.observation, held, rollback, tipped) is None  # carried back: it comes along
    assert followed(now.observation, then, RollbackConfig(follow=0.0), tipped) is None  # off
    assert followed(now.observation, then, RollbackConfig(kind="snapshot"), tipped) is None  # the world is restored


def test_a_larger_displaced_threshold_leaves_moved_objects_to_the_base_policy_but_still_repairs_drops_and_tips():
    drops_and_tips = RepairConfig(displaced=1.0)
    now = _state(20, [0.6, 0, 1.1], {"can": [0.4, 0.1, 0.9], "box": [0.3, 0.05, 0.9]})
    free = _state(10, [0.5, 0, 1.0], {"can": [0.5, 0, 1.0], "box": [0.3, 0, 0.9]})
    assert repair_target(now.observation, free, TASK, CONFIG).focus == "can"  # 14 cm off: the default puts it back
    assert repair_target(now.observation, free, TASK, drops_and_tips).focus is None
    held = _state(10, [0.5, 0, 1.0], {"can": [0.5, 0, 1.0], "box": [0.3, 0, 0.9]}, holding=True)
    assert repair_target(now.observation, held, TASK, drops_and_tips).focus_held  # dropped: picked up again
    over = np.r_[0.3, 0.0, 0.9, np.sin(0.4), 0, 0, np.cos(0.4)]
    tipped = dict(now.observation, object_poses={**now.observation["object_poses"], "box": over})
    assert repair_target(tipped, free, TASK, drops_and_tips).focus_tipped  # knocked over: stood up


def test_repaired_needs_the_focus_back_and_the_arm_at_the_target_with_the_gripper_as_it_was():
    then = _state(10, [0.5, 0, 1.0], {"box": [0.3, 0, 0.9]})
    goal = repair_target(_state(20, [0.5, 0, 1.0], {"box": [0.3, 0.1, 0.9]}).observation, then, TASK, CONFIG)
    at_target = then.observation
    assert repaired(at_target, then.pose, goal, CONFIG)
    box_off = dict(at_target, object_poses={"box": np.r_[0.3, 0.05, 0.9, 0, 0, 0, 1]})
    assert not repaired(box_off, then.pose, goal, CONFIG)
    arm_off = EefPose(then.pose.pos + [0.02, 0, 0], then.pose.rot)
    assert not repaired(at_target, arm_off, goal, CONFIG)
    closed = dict(at_target, state=np.r_[at_target["state"][:6], 0.001, -0.001])
    assert not repaired(closed, then.pose, goal, CONFIG)  # the target's fingers were open


def test_a_repair_policy_needs_the_physical_rollback():
    robot = KinematicRobot()
    with pytest.raises(ValueError, match="physical"):
        Supervisor(robot, ChunkBroker(ReachPolicy(robot)), ScriptedSelector({}), QualityMonitor(None),
                   config=SupervisorConfig(rollback=SupervisorConfig().rollback.__class__(kind="snapshot")),
                   repair=ChunkBroker(Idle()))


def test_the_rule_repairs_a_named_object_knocked_over_that_nothing_else_would_notice():
    """Quality and tracking stay calm (the arm was never touched); only the world says so. Not while
    the hand holds something: a repair needs an empty hand (and what it carries tilts with it)."""
    def knock_over(robot: KinematicRobot, step) -> None:
        if step.index == 30:
            robot.objects["can"][3:7] = [np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4)]  # a quarter over, xyzw

    for repair, holding, expected in ((Idle(), False, [("REPAIR", "can", False)]), (None, False, []),
                                      (Idle(), True, [])):
        robot = KinematicRobot(goal=UNREACHABLE)
        config = SupervisorConfig(repair=RepairConfig(max_steps=20))
        base = ReachPolicy(robot, UNREACHABLE, gripper=1.0 if holding else -1.0)
        supervisor = Supervisor(robot, ChunkBroker(base), RuleSelector(), QualityMonitor(None),
                                config=config, repair=ChunkBroker(repair, 1) if repair else None)
        log = Log()
        log.on_step = lambda step, record=log.on_step, robot=robot: (record(step), knock_over(robot, step))
        robot.instruction = TASK
        robot.reset(0, 7)
        robot.place("can", CAN)
        robot.touching = frozenset({"box"} if holding else ())  # a gripper commanded closed on it: a grasp
        outcome = run_episode(robot, supervisor, TASK, LoopConfig(max_steps=80, wait_steps=0), (log,))
        got = [(r["mode"], r.get("repair"), r["reached"]) for r in outcome.extras["recoveries"]]
        assert got[:1] == expected, got


class NoCheckpoint(Idle):
    """A repair policy whose checkpoint is missing: it fails when it is made ready for the task."""

    def reset(self, instruction: str) -> None:
        raise PolicyConfigError("no repair checkpoint for this task")


def test_a_repair_policy_that_cannot_serve_the_task_fails_the_episode_at_its_start():
    robot = KinematicRobot()
    outcome = run_episode(robot, _supervised(robot, {}, NoCheckpoint()), TASK, LoopConfig(max_steps=50, wait_steps=0))
    assert isinstance(outcome.error, PolicyConfigError) and outcome.steps == 0  # its own error, not a later one
    assert outcome.extras["rollbacks"] == 0  # the summary of an episode that never started
