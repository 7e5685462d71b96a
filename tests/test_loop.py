"""The episode loop, the supervisor and its rollbacks on the kinematic robot: fast, no MuJoCo."""

from __future__ import annotations

import numpy as np
import pytest

from critics.quality import QualityMonitor
from recovery.core.loop import EpisodeLoop, LoopConfig, Step, Subscriber, run_episode
from recovery.core.modes import Mode
from recovery.core.actions import GRIPPER_CLOSE, InvalidActionError
from recovery.core.robot import RECOVERY_MOTION, JointTarget
from recovery.supervision.config import RollbackConfig, SupervisorConfig
from recovery.supervision.selectors import NoneSelector, RuleConfig, RuleSelector
from recovery.supervision.supervisor import Supervisor
from tests.kinematic_robot import KinematicRobot, ReachPolicy
from vla_wrappers.base import Policy, PolicyError, PolicyOutput
from vla_wrappers.broker import ChunkBroker

UNREACHABLE = np.array([5.0, 0.0, 0.0])  # a goal the arm never gets to: episodes run to their budget


class ScriptedSelector:
    """Chooses given modes at given steps (a test double for the selector contract)."""

    reads_value = False

    def __init__(self, plan: dict[int, Mode]):
        self.plan = plan

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        return {}

    def decide(self, ctx) -> Mode:
        return self.plan.get(ctx.step, Mode.EXECUTE)


class Log(Subscriber):
    """Everything the loop tells its subscribers."""

    def __init__(self, robot: KinematicRobot | None = None, push_at: int | None = None, push=(0.0, 0.06, 0.0)):
        self.steps: list[Step] = []
        self.events: list[dict] = []
        self.outcome = None
        self.robot, self.push_at, self.push = robot, push_at, np.array(push)

    def on_step(self, step: Step) -> None:
        self.steps.append(step)
        if step.index == self.push_at:
            self.robot.push(self.push)

    def on_event(self, event: dict) -> None:
        self.events.append(event)

    def on_episode_end(self, outcome) -> None:
        self.outcome = outcome

    def modes(self) -> list[str]:
        return [e["mode"] for e in self.events if e["event"] == "mode"]


def supervisor(robot: KinematicRobot, selector, target=None, **config) -> Supervisor:
    rollback = config.pop("rollback", RollbackConfig())
    return Supervisor(robot, ChunkBroker(ReachPolicy(robot, target)), selector, QualityMonitor(None),
                      config=SupervisorConfig(rollback=rollback, keep_trace=True, **config))


def play(robot, agent, max_steps=60, subscribers=(), **loop):
    robot.reset(0, 7)
    return run_episode(robot, agent, robot.instruction, LoopConfig(max_steps=max_steps, **loop), subscribers)


def test_the_loop_counts_every_executed_period_and_stops_at_the_budget():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log()
    outcome = play(robot, ChunkBroker(ReachPolicy(robot)), max_steps=40, subscribers=(log,))
    assert (outcome.success, outcome.steps, outcome.reason) == (False, 40, "max_steps")
    assert [s.index for s in log.steps] == list(range(1, 41)) and log.outcome is outcome
    assert len(robot.commands) == 40 + 10  # the wait steps come first and count for nothing
    assert outcome.inferences == 8  # a chunk of 5 per inference


def test_a_reachable_goal_ends_the_episode_with_success():
    robot = KinematicRobot()
    outcome = play(robot, supervisor(robot, NoneSelector()))
    assert outcome.success and outcome.reason == "success" and outcome.steps < 60
    assert outcome.extras["rollbacks"] == 0


def test_a_rollback_is_a_sequence_of_loop_steps_in_its_mode():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log(robot, push_at=12)
    outcome = play(robot, supervisor(robot, ScriptedSelector({15: Mode.RETRY}), UNREACHABLE), subscribers=(log,))
    rollback = [s for s in log.steps if s.mode == Mode.RETRY]
    assert rollback and all(isinstance(s.command, RECOVERY_MOTION) for s in rollback)  # a rise, then joint space
    assert all(not isinstance(s.command, RECOVERY_MOTION) for s in log.steps if s.mode == Mode.EXECUTE)
    indices = [s.index for s in rollback]
    assert indices == list(range(16, 16 + len(indices)))  # right after the decision, one period each
    (decision,) = outcome.extras["recoveries"]
    assert decision["reached"] and decision["steps"] == len(rollback) == outcome.extras["recovery_steps"]
    assert outcome.steps == 60  # the budget holds rollback motion too
    assert log.modes() == ["RETRY", "EXECUTE"]
    decided = next(e for e in log.events if e["event"] == "decision")
    assert decided["mode"] == "RETRY" and decided["step"] == 15 and decided["target_step"] < 15
    ended = next(e for e in log.events if e["event"] == "rollback_end")
    assert ended["reached"] and ended["pos_error"] <= RollbackConfig().pos_tol


def test_the_rollback_goes_back_to_the_remembered_joints_with_open_fingers():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log(robot, push_at=12, push=(0.0, 0.08, 0.03))
    sup = supervisor(robot, ScriptedSelector({15: Mode.RESET}), UNREACHABLE)
    play(robot, sup, max_steps=45, subscribers=(log,))
    start = sup.memory.start
    last = [s for s in log.steps if s.mode == Mode.RESET][-1]
    np.testing.assert_allclose(last.command.joints, start.joints)
    assert last.command.gripper == -1.0
    assert last.result.observation["eef_pos"] == pytest.approx(start.pose.pos, abs=RollbackConfig().pos_tol)


def test_a_success_reached_during_a_rollback_counts():
    robot = KinematicRobot()
    robot.reset(0, 7)
    robot.goal = robot.eef_pose().pos.copy()  # the start is the goal: the policy walks away from it ...
    robot.goal_counts_from = 5  # ... before it counts
    away = robot.goal + np.array([0.0, 0.3, 0.0])
    log = Log()
    sup = supervisor(robot, ScriptedSelector({20: Mode.RESET}), away)
    outcome = run_episode(robot, sup, robot.instruction, LoopConfig(max_steps=60, wait_steps=0), (log,))
    assert outcome.success and outcome.steps < 60
    assert log.steps[-1].mode == Mode.RESET  # it ended inside the rollback


def test_a_snapshot_rollback_is_one_restore_event_and_no_period():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log(robot, push_at=12)
    sup = supervisor(robot, ScriptedSelector({15: Mode.RETRY}), UNREACHABLE, rollback=RollbackConfig(kind="snapshot"))
    outcome = play(robot, sup, subscribers=(log,))
    (restore,) = [e for e in log.events if e["event"] == "restore"]
    assert restore["step"] == 15 and outcome.extras["recovery_steps"] == 0
    assert not any(s.mode == Mode.RETRY for s in log.steps)  # no period ran in the rollback's mode
    assert outcome.steps == 60
    after = log.steps[15]  # the first period after the restore starts from the remembered state
    target = outcome.extras["recoveries"][0]["target_step"]
    assert after.observation["eef_pos"] == pytest.approx(log.steps[target - 1].result.observation["eef_pos"])


def test_a_refused_rollback_commands_nothing_and_counts_as_failed():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log()
    sup = supervisor(robot, ScriptedSelector({15: Mode.RETRY}), UNREACHABLE)
    robot.reset(0, 7)
    robot.refuse = "joint 4 would leave its limits"
    outcome = run_episode(robot, sup, robot.instruction, LoopConfig(max_steps=30), (log,))
    assert not any(isinstance(c, RECOVERY_MOTION) for c in robot.commands)
    ended = next(e for e in log.events if e["event"] == "rollback_end")
    assert ended["refused"] == "joint 4 would leave its limits" and ended["steps"] == 0
    assert outcome.extras["failed_rollbacks"] == 1 and outcome.steps == 30


def test_while_the_gripper_holds_something_a_rollback_carries_it_and_a_reset_is_refused():
    class Grasp(ReachPolicy):
        def infer(self, obs):
            out = super().infer(obs).actions
            out[:, 6] = 1.0  # closed
            return PolicyOutput(out)

    class Grippers(Subscriber):
        def __init__(self):
            self.commands: list[float] = []

        def on_step(self, step: Step) -> None:
            if isinstance(step.command, JointTarget):
                self.commands.append(step.command.gripper)

    robot = KinematicRobot(goal=UNREACHABLE)
    sup = Supervisor(robot, ChunkBroker(Grasp(robot, UNREACHABLE)), ScriptedSelector({10: Mode.RETRY, 20: Mode.RESET}),
                     QualityMonitor(None), config=SupervisorConfig(keep_trace=True))
    robot.reset(0, 7)
    robot.touching = frozenset({"cube"})
    grippers = Grippers()
    outcome = run_episode(robot, sup, robot.instruction, LoopConfig(max_steps=30), (grippers,))
    (rollback,) = outcome.extras["recoveries"]
    assert rollback["mode"] == "RETRY" and 0 < rollback["target_step"] < 10  # a state where it held the cube
    assert grippers.commands and set(grippers.commands) == {GRIPPER_CLOSE}  # carried, never dropped
    assert "RESET" not in outcome.extras["modes"]  # a RESET would drop it


@pytest.mark.parametrize("start_hand, to_start", [(RollbackConfig.start_hand, False), (0.08, True)])
def test_with_no_free_state_a_rollback_goes_to_the_start_only_if_the_named_objects_lie_as_there(start_hand, to_start):
    """The can the task names lies 7 cm from the hand, moved since the start: the start is not the
    world it left (the rollback is refused) unless the can is close enough to count as the hand's."""
    robot = KinematicRobot(goal=UNREACHABLE)
    robot.instruction = "reach past the can"
    sup = supervisor(robot, ScriptedSelector({20: Mode.RETRY}), UNREACHABLE,
                     rollback=RollbackConfig(start_hand=start_hand))
    log = Log()
    log.on_step = lambda step, record=log.on_step: (record(step), step.index == 20 and robot.place(
        "can", robot.eef_pose().pos + [0.0, 0.07, 0.0]))
    robot.reset(0, 7)
    robot.place("can", robot.eef_pose().pos + [0.0, -0.1, 0.0])
    robot.touching = frozenset({"table"})  # no contact-free state to go back to: the start is the only one
    outcome = run_episode(robot, sup, robot.instruction, LoopConfig(max_steps=40, wait_steps=0), (log,))
    assert [r["target_step"] for r in outcome.extras["recoveries"]] == ([0] if to_start else [])


def test_the_rollback_budget_caps_a_selector_that_always_asks():
    robot = KinematicRobot(goal=UNREACHABLE)
    sup = supervisor(robot, ScriptedSelector({s: Mode.RETRY for s in range(5, 200, 5)}), UNREACHABLE, max_rollbacks=2)
    outcome = play(robot, sup, max_steps=80)
    assert outcome.extras["rollbacks"] == 2 and outcome.extras["modes"]["RETRY"] == 2


def test_hold_commands_the_hold_action_until_the_next_decision():
    robot = KinematicRobot(goal=UNREACHABLE)
    log = Log()
    outcome = play(robot, supervisor(robot, ScriptedSelector({10: Mode.HOLD}), UNREACHABLE), max_steps=20,
                   subscribers=(log,))
    held = [s for s in log.steps if s.mode == Mode.HOLD]
    assert [s.index for s in held] == list(range(11, 16))  # until the decision at step 15
    assert all(np.array_equal(s.command[:6], [0, 0, 0, 0, 0, 1e-9]) and s.command[6] == 0 for s in held)
    assert outcome.extras["modes"]["HOLD"] == 1 and log.modes() == ["HOLD", "EXECUTE"]


def test_the_rule_rolls_back_after_a_shove_it_sees_in_the_tracking_error():
    robot = KinematicRobot(goal=UNREACHABLE)
    rule = RuleSelector(RuleConfig(quality_min=0.0, quality_drop=1.0, tracking_max=0.02))
    log = Log(robot, push_at=22)
    outcome = play(robot, supervisor(robot, rule, UNREACHABLE), max_steps=60, subscribers=(log,))
    decision = outcome.extras["recoveries"][0]
    assert decision["mode"] == "RETRY" and 22 < decision["step"] <= 30 and decision["target_step"] <= 22
    quiet = play(robot, supervisor(robot, rule, UNREACHABLE), max_steps=60)
    assert quiet.extras["rollbacks"] == 0  # no shove, no rollback


class _Transient(Exception):
    pass


class FlakyRobot(KinematicRobot):
    """Its state goes stale for a few periods (as a real arm's inputs can)."""

    def __init__(self, stale: range, **kw):
        super().__init__(**kw)
        self.stale, self.calls = stale, 0

    def observe(self):
        self.calls += 1
        if self.calls in self.stale:
            raise _Transient("joints are 0.3 s old")
        return super().observe()


def test_a_transient_input_error_holds_without_spending_the_budget():
    robot = FlakyRobot(stale=range(20, 24), goal=UNREACHABLE)
    log = Log()
    outcome = play(robot, ChunkBroker(ReachPolicy(robot)), max_steps=30, subscribers=(log,), hold_on=(_Transient,))
    assert outcome.steps == 30 and outcome.error is None
    assert sum(c is None for c in robot.commands) == 4  # four idle periods, nothing commanded
    hold = next(e for e in log.events if e["event"] == "mode")
    assert hold["mode"] == "HOLD" and "0.3 s old" in hold["reason"]
    assert log.modes() == ["HOLD", "EXECUTE"]


def test_an_error_ends_the_episode_and_keeps_its_counts():
    class Explodes(Policy):
        def __init__(self):
            self.calls = 0

        def reset(self, instruction):
            pass

        def infer(self, obs):
            self.calls += 1
            if self.calls == 4:
                raise PolicyError("server went away")
            return PolicyOutput(np.zeros((5, 7)))

    robot = KinematicRobot()
    log = Log()
    outcome = play(robot, ChunkBroker(Explodes()), subscribers=(log,))
    assert outcome.reason == "error" and isinstance(outcome.error, PolicyError)
    assert outcome.steps == 15 and outcome.inferences == 3 and log.outcome is outcome


def test_a_stop_request_ends_the_episode_between_periods():
    robot = KinematicRobot(goal=UNREACHABLE)
    loop = EpisodeLoop(robot, ChunkBroker(ReachPolicy(robot)), LoopConfig(max_steps=100),
                       stop=lambda: "stopped" if len(robot.commands) >= 25 else None)
    robot.reset(0, 7)
    loop.start(robot.instruction)
    while not loop.over:
        loop.step()
    outcome = loop.finish()
    assert outcome.reason == "stopped" and outcome.steps == 15  # 10 wait steps, then 15 periods


def test_a_joint_target_is_finite_by_construction():
    with pytest.raises(InvalidActionError, match="finite"):
        JointTarget(np.r_[np.zeros(6), np.nan])
    with pytest.raises(InvalidActionError, match="finite"):
        JointTarget(np.zeros(7), gripper=float("inf"))


def test_a_command_that_fails_after_a_decision_is_retried_without_deciding_again():
    class FailsOnce(ReachPolicy):
        def __init__(self, robot):
            super().__init__(robot, UNREACHABLE)
            self.calls = 0

        def infer(self, obs):
            self.calls += 1
            if self.calls == 4:  # the inference right after the decision at step 15
                raise PolicyError("one request lost")
            return super().infer(obs)

    class Counting(ScriptedSelector):
        asked = 0

        def decide(self, ctx):
            Counting.asked += 1
            return super().decide(ctx)

    robot = KinematicRobot(goal=UNREACHABLE)
    sup = Supervisor(robot, ChunkBroker(FailsOnce(robot)), Counting({}), QualityMonitor(None))
    outcome = play(robot, sup, max_steps=20, hold_on=(PolicyError,))
    assert outcome.steps == 20 and Counting.asked == 3  # steps 5, 10, 15: once each
    assert sum(c is None for c in robot.commands) == 1  # one idle period for the lost request
