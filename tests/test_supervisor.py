"""The supervisor, rollbacks and disturbances on real short LIBERO episodes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from critics.quality import QualityMonitor
from recovery.core.actions import GRIPPER_CLOSE
from recovery.core.decision import Decision
from recovery.core.loop import EpisodeLoop, LoopConfig, Subscriber
from recovery.core.modes import Mode
from recovery.core.robot import CartesianStep, JointTarget
from recovery.evaluation.trajectory import TrajectoryRecorder
from recovery.evaluation.world import WorldWatch
from recovery.supervision.config import RepairConfig, RollbackConfig, SupervisorConfig
from recovery.supervision.repair import followed
from recovery.supervision.rollback import LIFTED, PhysicalRollback, RollbackResult
from recovery.supervision.selectors import NoneSelector, RuleSelector
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from tests.episodes import play, remember, roll_back
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy

pytestmark = pytest.mark.sim


class ScriptedSelector:
    """Chooses given modes at given steps (a test double for the selector interface)."""

    def __init__(self, plan: dict[int, Mode]):
        self.plan = plan

    def reset(self) -> None:
        pass

    def decide(self, ctx) -> Mode:
        return self.plan.get(ctx.step, Mode.EXECUTE)


def _supervisor(backend, selector, rollback="physical", **config):
    broker = ChunkBroker(make_policy("expert", backend), replan_every=5)
    return Supervisor(backend, broker, selector, QualityMonitor(None),
                      config=SupervisorConfig(rollback=RollbackConfig(kind=rollback), keep_trace=True, **config))


def test_none_selector_is_transparent(object_backend):
    plain = play(object_backend, ChunkBroker(make_policy("expert", object_backend)), 0, 7, 280)
    supervised = play(object_backend, _supervisor(object_backend, NoneSelector()), 0, 7, 280)
    assert plain.success and (supervised.success, supervised.steps) == (True, plain.steps)
    assert supervised.extras["rollbacks"] == 0 and supervised.extras["modes"] == {"EXECUTE": plain.steps // 5}


def test_physical_retry_returns_to_a_remembered_pose(object_backend):
    supervisor = _supervisor(object_backend, ScriptedSelector({25: Mode.RETRY}), max_rollbacks=1)
    outcome = play(object_backend, supervisor, 1, 7, 280)
    (decision,) = outcome.extras["recoveries"]  # step 25: approaching, nothing held yet
    assert decision["mode"] == "RETRY" and 25 - 15 <= decision["target_step"] < 25
    assert decision["reached"] and decision["steps"] > 0
    assert outcome.extras["recovery_steps"] == decision["steps"]
    # the budget counts the rollback's control steps; the history does not hold them
    assert len(outcome.extras["trace"]["quality"]) == outcome.steps - decision["steps"]
    assert outcome.success  # the expert picks up from there


def test_snapshot_rollback_is_bit_exact_and_one_event(object_backend):
    supervisor = _supervisor(object_backend, ScriptedSelector({30: Mode.REPAIR}), rollback="snapshot")
    restored = []

    class Restores(Subscriber):
        def on_event(self, event):
            if event["event"] == "restore":
                restored.append((event["step"], object_backend.snapshot()))

    object_backend.reset(2, 7)
    loop = EpisodeLoop(object_backend, supervisor, LoopConfig(max_steps=32), (Restores(),))
    loop.start(object_backend.instruction)
    while not loop.over:
        loop.step()
    target = supervisor.memory.best_contact_free(30, 30)
    ((step, state),) = restored
    assert step == 30 and loop.steps == 32  # a restore takes no control period
    np.testing.assert_array_equal(state.physics, target.snapshot.physics)
    assert supervisor.summary()["note"].startswith("snapshot rollback: simulation-only")


class Grippers(Subscriber):
    """The gripper command of every rollback period."""

    def __init__(self):
        self.commands = []

    def on_step(self, step):
        if isinstance(step.command, JointTarget):
            self.commands.append(step.command.gripper)


def test_physical_rollback_carries_back_what_the_gripper_holds(object_backend):
    """RETRYs while the expert carries the can take the arm back, gripper closed, to states where it
    held it; the can stays in hand and the task still succeeds. A RESET would drop it: refused."""
    grippers = Grippers()
    supervisor = _supervisor(object_backend, ScriptedSelector({s: Mode.RETRY for s in range(45, 70, 5)}))
    outcome = play(object_backend, supervisor, 1, 7, 280, (grippers,))  # the expert holds the can from ~step 45
    assert outcome.extras["rollbacks"] > 0 and outcome.success
    assert grippers.commands and set(grippers.commands) == {GRIPPER_CLOSE}
    assert all(d["reached"] and d["step"] - 15 <= d["target_step"] < d["step"] for d in outcome.extras["recoveries"])
    resets = _supervisor(object_backend, ScriptedSelector({s: Mode.RESET for s in range(50, 70, 5)}))
    outcome = play(object_backend, resets, 1, 7, 280)
    assert outcome.extras["rollbacks"] == 0 and outcome.success


def test_physical_rollback_carries_a_light_bowl_back_closed():
    """The carried bowl presses on the fingers with less than the 5 N contact-free threshold: by
    force alone the RETRYs below would take states where it was held for free ones and open the
    gripper, dropping it. Carried back, it is within a centimetre of where it was at each target."""
    backend = LiberoBackend(resolve_task("libero_spatial", 1))
    forces, grippers, world = [], Grippers(), WorldWatch()

    class Forces(Subscriber):
        def on_step(self, step):
            forces.append(backend.contacts().force)

    try:
        supervisor = _supervisor(backend, ScriptedSelector({s: Mode.RETRY for s in range(70, 100, 5)}))
        outcome = play(backend, supervisor, 0, 7, 220, (Forces(), grippers, world))  # carried from ~step 52
    finally:
        backend.close()
    assert min(forces[69:95]) < 5.0  # the force test would have called some of those states contact-free
    assert outcome.extras["rollbacks"] > 0 and set(grippers.commands) == {GRIPPER_CLOSE}
    for rollback in world.summary["rollbacks"]:
        assert rollback["reached"] and rollback["after"]["akita_black_bowl_1"][0] < 0.01


def test_a_retry_falls_back_to_the_start_only_while_the_task_objects_lie_there(object_backend):
    """A RETRY whose window holds no state to go back to (here none: a horizon of 0) falls back to
    the start while the objects the instruction names lie where they did there. Once one has moved
    (slid aside, here), driving the arm home would not bring the start back: the RETRY is refused."""
    def retry_at_25(backend):
        supervisor = _supervisor(backend, ScriptedSelector({25: Mode.RETRY}), retry_horizon=0)
        return play(backend, supervisor, 0, 7, 40).extras

    calm = retry_at_25(object_backend)
    assert [(r["mode"], r["target_step"]) for r in calm["recoveries"]] == [("RETRY", 0)]
    shifted = DisturbedBackend(object_backend, DisturbanceConfig(name="object_shift", onset_min=10, onset_max=12), 0)
    refused = retry_at_25(shifted)
    assert shifted.record()["fired_at"] < 25
    assert refused["rollbacks"] == 0 and set(refused["modes"]) == {"EXECUTE"}


def test_a_retry_bounded_by_the_trouble_s_onset_goes_back_before_it(object_backend):
    """A selector that knows when the trouble began (the rule: where the tracking error crossed its
    limit) bounds the RETRY's window there: its target is the best state of the 15 steps before
    that step, not of the latest 15."""
    def retry_at_30(choice):
        supervisor = _supervisor(object_backend, ScriptedSelector({30: choice}), max_rollbacks=1)
        (recovery,) = play(object_backend, supervisor, 1, 7, 40).extras["recoveries"]
        return recovery["target_step"]

    assert 15 <= retry_at_30(Mode.RETRY) < 30
    assert 0 <= retry_at_30(Decision(Mode.RETRY, before=14)) < 14


def test_a_retry_ranked_by_value_goes_to_the_remembered_state_of_highest_value(object_backend):
    """With ``target_score="value"`` the rollback's target is the state the value critic rates
    highest in the window, not the one of best quality (here a stand-in critic: V = hand height)."""
    def heights(instruction):
        return lambda observations: [float(obs["eef_pos"][2]) for obs in observations]

    broker = ChunkBroker(make_policy("expert", object_backend), replan_every=5)
    supervisor = Supervisor(object_backend, broker, ScriptedSelector({30: Mode.RETRY}), QualityMonitor(None),
                            value_fn=heights, config=SupervisorConfig(max_rollbacks=1, keep_trace=True,
                                                                      target_score="value"))
    outcome = play(object_backend, supervisor, 1, 7, 40)
    (recovery,) = outcome.extras["recoveries"]
    values, qualities = outcome.extras["trace"]["value"], outcome.extras["trace"]["quality"]
    assert 15 <= recovery["target_step"] < 30 and outcome.extras["target_score"] == "value"
    assert values[recovery["target_step"]] == max(values[15:30])
    assert qualities[recovery["target_step"]] < max(qualities[15:30])  # quality would have gone elsewhere


def test_rule_selector_intervenes_on_a_stalled_arm_within_budget(object_backend):
    class PushDown(ChunkBroker):  # full downward actions into the floor: no motion, low quality
        def act(self, obs):
            return np.array([0, 0, -1.0, 0, 0, 0, -1.0])

    broker = PushDown(make_policy("zero", object_backend))
    supervisor = Supervisor(object_backend, broker, RuleSelector(), QualityMonitor(None),
                            config=SupervisorConfig(max_rollbacks=2))
    outcome = play(object_backend, supervisor, 0, 7, 150)
    assert outcome.extras["rollbacks"] == 2  # it fired, and the budget capped it
    assert outcome.steps == 150 and outcome.extras["recovery_steps"] > 0  # rollback motion spends the budget


def test_disturbed_backend_observes_where_a_rollback_left_the_arm(object_backend):
    disturbed = DisturbedBackend(object_backend, DisturbanceConfig(name="action_noise"), 0)
    disturbed.reset(0, 7)
    start = remember(disturbed)
    for _ in range(10):
        disturbed.step(np.array([0.5, 0, 0, 0, 0, 0, -1.0]))
    clock = disturbed.steps_since_disturbance, disturbed._t
    assert roll_back(disturbed, start, RollbackConfig(max_steps=60)).reached
    np.testing.assert_allclose(disturbed.observe()["eef_pos"], object_backend.observe()["eef_pos"])
    assert np.linalg.norm(disturbed.observe()["eef_pos"] - start.pose.pos) < 0.02  # the observation is fresh
    assert (disturbed.steps_since_disturbance, disturbed._t) == clock  # rollback motion is no policy step


def test_a_rollback_to_a_target_aside_lifts_the_hand_clear_first(object_backend):
    """A straight joint-space line sweeps the hand low across the table; the rollback rises first."""
    def roll_back_from_low_aside(clearance: float) -> tuple[list, list[float], RollbackResult, float]:
        object_backend.reset(0, 7)
        for _ in range(8):
            object_backend.step(np.array([0.0, 0.0, -0.5, 0.0, 0.0, 1e-9, -1.0]))
        target = remember(object_backend)
        for _ in range(10):
            object_backend.step(np.array([0.4, 0.4, -0.3, 0.0, 0.0, 1e-9, -1.0]))
        rollback = PhysicalRollback(target, RollbackConfig(clearance=clearance), object_backend)
        commands, heights = [], []
        while (control := rollback.next(object_backend.observe(), object_backend.eef_pose(), Mode.RETRY)) is not None:
            commands.append(control.command)
            heights.append(float(object_backend.eef_pose().pos[2]))
            object_backend.step(control.command)
        return commands, heights, rollback.result(), target.pose.pos[2]

    commands, heights, result, target_height = roll_back_from_low_aside(0.05)
    lifting = [isinstance(command, CartesianStep) for command in commands]
    first_joint = lifting.index(False)
    assert result.reached and first_joint > 0 and not any(lifting[first_joint:])  # rise, then the joint motion
    assert result.details == {"lift_steps": first_joint} and result.steps == len(commands)
    assert heights[first_joint] >= target_height + 0.05 - LIFTED  # above the target by the clearance
    assert heights == sorted(heights[:first_joint + 1]) + heights[first_joint + 1:]  # straight up, never down
    commands, _, result, _ = roll_back_from_low_aside(0.0)  # no clearance: straight to the joints
    assert result.reached and result.details == {} and all(isinstance(command, JointTarget) for command in commands)


def _place(backend: LiberoBackend, name: str, xy: np.ndarray) -> None:
    """Put an object's origin at ``xy`` on the table (its height and orientation kept)."""
    sim = backend.raw.sim
    addr = sim.model.get_joint_qpos_addr(backend.raw.objects_dict[name].joints[-1])[0]
    sim.data.qpos[addr:addr + 2] = xy
    sim.forward()


def test_a_rollback_blocked_by_an_object_backs_off_instead_of_pressing_on(object_backend):
    """The milk carton stands where the hand is going back to: the joint motion presses on it and the
    hand comes no closer; the rollback rises clear and hands over, where it pressed on for its budget."""
    def roll_back_onto_the_carton(config: RollbackConfig) -> tuple[list, RollbackResult, float]:
        object_backend.reset(0, 7)
        for _ in range(15):
            object_backend.step(np.array([0.0, 0.0, -1.0, 0.0, 0.0, 1e-9, -1.0]))  # down to the table
        target = remember(object_backend)
        for _ in range(10):
            object_backend.step(np.array([0.0, 0.0, 1.0, 0.0, 0.0, 1e-9, -1.0]))
        _place(object_backend, "milk_1", target.pose.pos[:2])  # under the hand, in the way down
        for _ in range(5):
            object_backend.step(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1e-9, -1.0]))
        rollback, commands = PhysicalRollback(target, config, object_backend), []
        while (control := rollback.next(object_backend.observe(), object_backend.eef_pose(), Mode.RETRY)) is not None:
            commands.append(control.command)
            object_backend.step(control.command)
        return commands, rollback.result(), object_backend.contacts().force

    config = RollbackConfig()
    commands, result, force = roll_back_onto_the_carton(config)
    blocked = result.details["blocked_at"]
    assert not result.reached and result.steps == len(commands) == blocked + result.details["back_off_steps"]
    assert blocked < config.max_steps // 2 and force < config.blocked_force  # stopped early, clear of the carton
    assert all(isinstance(c, JointTarget) for c in commands[:blocked])
    assert all(isinstance(c, CartesianStep) and c.action[2] > 0 for c in commands[blocked:])  # straight up
    commands, result, force = roll_back_onto_the_carton(replace(config, blocked_force=0.0))  # as before: press on
    assert not result.reached and result.details == {} and result.steps == config.max_steps
    assert force >= config.blocked_force


def test_a_rollback_follows_the_object_its_target_had_the_hand_at(object_backend):
    """The hand was over the soup can at the target; the can has been shoved 4 cm since: the rollback
    goes back over the can, where the hand was against it, not to the place the can has left."""
    still, soup = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1e-9, -1.0]), "alphabet_soup_1"

    def roll_back_after_the_can_moved(follow: float) -> tuple[RollbackResult, np.ndarray, np.ndarray, float]:
        object_backend.reset(0, 7)
        for _ in range(12):
            object_backend.step(np.array([0.0, 0.0, -1.0, 0.0, 0.0, 1e-9, -1.0]))
        _place(object_backend, soup, object_backend.eef_pose().pos[:2])  # under the hand
        for _ in range(5):
            object_backend.step(still)
        target = replace(remember(object_backend), observation=object_backend.observe())
        for _ in range(10):
            object_backend.step(np.array([0.0, 0.0, 1.0, 0.0, 0.0, 1e-9, -1.0]))
        _place(object_backend, soup, target.observation["object_poses"][soup][:2] + [0.04, 0.0])
        for _ in range(5):
            object_backend.step(still)
        shoved = object_backend.observe()["object_poses"][soup][:3]
        config = RollbackConfig(follow=follow)
        rollback = PhysicalRollback(target, config, object_backend,
                                    followed(object_backend.observe(), target, config, RepairConfig().tipped))
        while (control := rollback.next(object_backend.observe(), object_backend.eef_pose(), Mode.RETRY)) is not None:
            object_backend.step(control.command)
        moved = float(np.linalg.norm(object_backend.observe()["object_poses"][soup][:3] - shoved))
        return rollback.result(), object_backend.eef_pose().pos - target.pose.pos, shoved, moved

    result, offset, shoved, moved = roll_back_after_the_can_moved(RollbackConfig.follow)
    assert result.reached and result.details["follows"] == soup
    np.testing.assert_allclose(result.details["shift"], [0.04, 0.0, 0.0], atol=0.002)
    np.testing.assert_allclose(offset, result.details["shift"], atol=RollbackConfig.pos_tol)  # over the can again
    assert moved < 0.002  # and it went around it
    result, offset, _, _ = roll_back_after_the_can_moved(0.0)  # off: back to the joints, beside the can
    assert result.reached and "follows" not in result.details and np.linalg.norm(offset) < RollbackConfig.pos_tol


@pytest.mark.parametrize("name", ["action_noise", "object_push", "gripper_open", "obs_noise"])
def test_disturbances_are_reproducible_recorded_and_felt(object_backend, name):
    disturbed = DisturbedBackend(object_backend, DisturbanceConfig(name=name, onset_min=20, onset_max=30), 0)

    def observed_states(backend, init):
        recorder = TrajectoryRecorder()
        play(backend, ChunkBroker(make_policy("expert", backend)), init, 7, 80, (recorder,))
        return recorder.arrays()["state"]

    first, record = observed_states(disturbed, 3), disturbed.record()
    again, record_again = observed_states(disturbed, 3), disturbed.record()
    assert record == record_again and 20 <= record["onset"] <= 30 and record["fired_at"] >= record["onset"]
    np.testing.assert_array_equal(first, again)  # same episode seed: the same disturbance
    nominal = observed_states(object_backend, 3)
    fired = record["fired_at"]
    assert np.array_equal(first[:fired], nominal[:fired])  # nothing before the onset
    assert not np.array_equal(first, nominal[: len(first)])  # and something after it
    other = observed_states(disturbed, 4)
    assert disturbed.record() != record or not np.array_equal(other, first)


def test_a_rollback_right_after_a_drop_opens_the_hand_and_the_policy_picks_up_again(tmp_path):
    """libero_object task 1, init 0, the embedded policy: gripper_open (steps 54-58) drops the cream cheese. The
    oracle's RETRY at step 60 comes two steps after the fingers last touched it; the contact latch alone
    still counted the hand as holding, and the rollback carried nothing back, gripper closed, to where it
    had held it (the episode failed). The fingers, commanded closed, opened: the hand is empty, the
    rollback goes to a state with the gripper open (the start: the window before the drop is all grasp),
    and the policy picks it up again."""
    from recovery.evaluation.runner import EvalConfig, evaluate
    from recovery.supervision.config import RecoveryOptions

    (record,) = evaluate(EvalConfig(suite="libero_object", tasks=(1,), episodes=1, policy="embedded",
                                    disturbance="gripper_open", recovery=RecoveryOptions(selector="oracle"),
                                    out=tmp_path / "r.jsonl", progress=False))
    (recovery,) = record["recovery"]["recoveries"]
    assert record["disturbance_info"]["fired_at"] == 54 and recovery["step"] == 60
    assert recovery["target_step"] == 0 and recovery["reached"] and record["success"]


def test_the_oracle_rolls_back_once_right_after_the_burst(object_backend):
    from sim.oracle import DisturbanceOracle

    disturbed = DisturbedBackend(object_backend, DisturbanceConfig(name="action_noise", onset_min=20, onset_max=40), 0)
    oracle = DisturbanceOracle(window=SupervisorConfig.retry_horizon)
    oracle.bind(disturbed)
    outcome = play(disturbed, _supervisor(disturbed, oracle), 0, 7, 120)
    (decision,) = outcome.extras["recoveries"]
    burst_end = disturbed.record()["fired_at"] + disturbed.config.duration
    # the first decision after the burst, or, while the closed gripper still counts as holding the can
    # it closed on (recovery.supervision.grasp), the first one after that: within the window, never before the end
    assert decision["mode"] == "RETRY" and burst_end <= decision["step"] < burst_end + oracle.window
    assert decision["target_step"] < decision["step"] and outcome.extras["rollbacks"] == 1
    with pytest.raises(TypeError, match="DisturbedBackend"):
        oracle.bind(object_backend)
