import numpy as np

from recovery.core.robot import ContactInfo, EefPose
from recovery.supervision.grasp import GraspMonitor
from recovery.supervision.memory import NominalMemory, NominalState


def _state(step, quality, value=0.5, contact_free=True, x=0.0):
    return NominalState(step, EefPose(np.array([x, 0, 0]), np.eye(3)), np.zeros(7), quality, value, contact_free)


def test_best_recent_and_best_contact_free_respect_their_windows():
    memory = NominalMemory(capacity=64)
    for step in range(40):
        quality = 0.9 if step == 5 else (0.8 if step == 30 else 0.5)
        memory.add(_state(step, quality, contact_free=step not in (30, 31)))
    assert memory.best_recent(now=40, horizon=15).step == 30  # step 5 is too old
    assert memory.best_recent(now=40, horizon=40).step == 5
    best_free = memory.best_contact_free(now=40, horizon=30)
    assert best_free.contact_free and best_free.step not in (30, 31)
    assert memory.start.step == 0


def test_a_physical_rollback_targets_only_states_it_can_reproduce():
    """Empty-handed it opens the gripper: free states with the gripper open. Carrying, it keeps the
    gripper closed: states where something was held."""
    memory = NominalMemory(capacity=64)
    pose = EefPose(np.zeros(3), np.eye(3))
    for step in range(30):
        closing, holding = step >= 10, step >= 20
        memory.add(NominalState(step, pose, np.zeros(7), quality=float(step), value=0.5,
                                contact_free=not holding, holding=holding, closing=closing))
    assert memory.best_physical(now=30, horizon=30, carrying=False).step == 9  # 10-19: fingers closing
    assert memory.best_physical(now=30, horizon=30, carrying=True).step == 29
    assert memory.best_physical(now=30, horizon=5, carrying=False) is None  # 25-29 all held


def test_a_target_ranked_by_value_is_the_state_most_likely_to_succeed_not_the_best_executed():
    memory = NominalMemory(capacity=64)
    for step in range(30):
        memory.add(_state(step, quality=0.9 if step == 20 else 0.5, value=0.8 if step == 12 else 0.3))
    assert memory.best_physical(now=30, horizon=30, carrying=False).step == 20
    assert memory.best_physical(now=30, horizon=30, carrying=False, score="value").step == 12
    assert memory.repairable(now=30, horizon=30, score="value")[0].step == 12


def test_capacity_bounds_memory_but_keeps_the_start():
    memory = NominalMemory(capacity=10)
    for step in range(100):
        memory.add(_state(step, 0.5))
    assert len(memory) == 10 and memory.start.step == 0
    assert memory.best_recent(now=100, horizon=200).step == 99  # latest wins ties


def test_empty_windows_return_none():
    memory = NominalMemory()
    assert memory.best_recent(now=0) is None
    memory.add(_state(0, 0.5, contact_free=False))
    assert memory.best_contact_free(now=1) is None


def _contacts(force=0.0, touching=()):
    return ContactInfo(force, frozenset(touching))


def test_grasp_monitor_bridges_flickering_contacts_and_lets_go_of_a_slipped_object():
    grasp = GraspMonitor(latch_steps=2)
    held = 0.04  # m: the fingers' opening around the object
    assert not grasp.update(closed=False, contacts=_contacts(9.0, ["bowl"]), force_threshold=5.0, gap=0.08)  # open
    assert not grasp.update(True, _contacts(), 5.0, 0.06)  # closing on nothing
    assert grasp.update(True, _contacts(3.0, ["bowl"]), 5.0, held)  # light touch, under the force threshold
    assert grasp.update(True, _contacts(), 5.0, held) and grasp.update(True, _contacts(), 5.0, held)  # flicker
    assert not grasp.update(True, _contacts(), 5.0, held)  # untouched for longer: it slipped out
    assert grasp.update(True, _contacts(6.0), 5.0, held)  # a force sensor without contact names (a real arm)
    assert not grasp.update(False, _contacts(6.0, ["bowl"]), 5.0, held)  # commanded open: let go
    grasp.update(True, _contacts(1.0, ["bowl"]), 5.0, held)
    grasp.reset()
    assert not grasp.holding


def test_grasp_monitor_lets_go_at_once_when_the_closed_fingers_open():
    """A gripper commanded closed whose untouched fingers open (a fault) dropped what it held:
    the latch does not hold on, and it does not come back without a new touch."""
    grasp = GraspMonitor(latch_steps=5, opening=0.001)
    held = 0.04
    assert grasp.update(True, _contacts(30.0, ["can"]), 5.0, held)
    assert grasp.update(True, _contacts(), 5.0, held + 0.0005) and not grasp.let_go  # within the margin: a flicker
    assert not grasp.update(True, _contacts(), 5.0, held + 0.002) and grasp.let_go  # opened: dropped
    assert not grasp.update(True, _contacts(), 5.0, held - 0.01) and not grasp.let_go  # closing again on nothing
    assert grasp.update(True, _contacts(20.0, ["can"]), 5.0, held)  # re-grasped


def test_pose_distance_is_numpys_norm_and_rotation_angle_to_the_bit():
    """A rollback reads it every period, in plain floats: the bits must be those of the numpy
    formulas the published episodes were run with (a changed bit can move a tolerance check)."""
    rng = np.random.default_rng(4)
    for _ in range(2000):
        rotations = [np.linalg.qr(rng.normal(size=(3, 3)))[0] for _ in range(2)]
        a = EefPose(rng.normal(size=3) * 10.0 ** rng.integers(-4, 1), rotations[0])
        b = EefPose(rng.normal(size=3), rotations[int(rng.integers(2))])
        cos = (np.trace(b.rot @ a.rot.T) - 1.0) / 2.0
        expected = float(np.linalg.norm(a.pos - b.pos)), float(np.arccos(np.clip(cos, -1.0, 1.0)))
        assert a.distance(b) == expected
    assert a.distance(a) == (0.0, 0.0)
