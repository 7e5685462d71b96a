"""The LIBERO backend on the real simulator: steps, bad actions, snapshots, determinism, rollback."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from recovery.core.actions import InvalidActionError
from recovery.core.robot import EefPose
from recovery.supervision.config import RollbackConfig
from recovery.supervision.memory import NominalState
from sim.libero_backend import InitStateError, LiberoBackend
from sim.tasks import resolve_task
from tests.episodes import remember, roll_back

pytestmark = pytest.mark.sim

RNG_ACTIONS = np.random.default_rng(0).uniform(-1, 1, size=(80, 7))


def _states(backend, actions):
    return np.array([backend.step(a).observation["state"] for a in actions])


def test_observation_layout(object_backend):
    obs = object_backend.reset(0, seed=7)
    assert obs["state"].shape == (8,)
    np.testing.assert_allclose(obs["state"][:3], obs["eef_pos"])
    assert obs["joint_pos"].shape == (7,) and obs["eef_quat"].shape == (4,)
    assert "alphabet_soup_1" in obs["object_poses"] and obs["object_poses"]["basket_1"].shape == (7,)
    assert not any(k.endswith("image") for k in obs), "no camera may be rendered unless asked"
    assert object_backend.instruction == "pick up the alphabet soup and place it in the basket"


def test_short_episode_moves_the_arm(object_backend):
    obs = object_backend.reset(0, seed=7)
    start = obs["eef_pos"].copy()
    for _ in range(10):
        result = object_backend.step(np.array([0, 0, 1.0, 0, 0, 0, -1]))
    assert result.observation["eef_pos"][2] - start[2] > 0.05  # ~1.25 cm per unit step
    assert result.success is False


@pytest.mark.parametrize("bad", [np.zeros(6), np.zeros((1, 7)), [0, 0, np.nan, 0, 0, 0, 0], [np.inf] * 7, "left"])
def test_bad_action_is_refused_before_mujoco(object_backend, bad):
    object_backend.reset(0, seed=7)
    before = object_backend.snapshot().physics.copy()
    with pytest.raises(InvalidActionError):
        object_backend.step(bad)
    np.testing.assert_array_equal(object_backend.snapshot().physics, before)


def test_init_index_out_of_range(object_backend):
    with pytest.raises(InitStateError, match="has 50 init states"):
        object_backend.reset(50, seed=7)


def test_snapshot_restore_is_bit_identical(object_backend):
    object_backend.reset(2, seed=7)
    _states(object_backend, RNG_ACTIONS[:20])  # mid-motion, gripper command mid-ramp
    snap = object_backend.snapshot()
    reference = _states(object_backend, RNG_ACTIONS[20:50])
    _states(object_backend, RNG_ACTIONS[50:65])  # wander off
    object_backend.restore(snap)
    np.testing.assert_array_equal(_states(object_backend, RNG_ACTIONS[20:50]), reference)
    # also after a reset into another init state, and with rotation exactly 0.0 (OSC keeps goal_ori)
    object_backend.reset(5, seed=7)
    _states(object_backend, RNG_ACTIONS[:5])
    object_backend.restore(snap)
    still = np.tile([0.2, 0, 0, 0, 0, 0, 1.0], (10, 1))
    first = _states(object_backend, still)
    object_backend.restore(snap)
    np.testing.assert_array_equal(_states(object_backend, still), first)


def _reads(backend) -> tuple:
    pose, contacts = backend.eef_pose(), backend.contacts()
    return (*pose.pos, *pose.rot.ravel(), contacts.force, *sorted(contacts.touching), backend.success())


def test_a_derived_snapshot_comes_back_reading_what_it_read(object_backend):
    """Positions and contacts read after a step were computed before it integrated; a plain restore
    recomputes them (the future is the same, the reads right after it are not), one with ``derived``
    puts them back: the counterfactual's play-out must leave its episode exactly as it was."""
    object_backend.reset(0, seed=7)
    _states(object_backend, np.tile([0, 0, -1.0, 0, 0, 0, 1.0], (25, 1)))  # down onto the table: contacts
    present, plain, derived = _reads(object_backend), object_backend.snapshot(), object_backend.snapshot(derived=True)
    _states(object_backend, RNG_ACTIONS[:15])
    object_backend.restore(plain)
    assert _reads(object_backend) != present
    _states(object_backend, RNG_ACTIONS[:15])
    object_backend.restore(derived)
    assert _reads(object_backend) == present


def test_seeded_reset_is_deterministic_across_resets(object_backend):
    object_backend.reset(1, seed=7)
    first = _states(object_backend, RNG_ACTIONS[:30])
    object_backend.reset(4, seed=7)
    _states(object_backend, RNG_ACTIONS[:7])
    object_backend.reset(1, seed=7)
    np.testing.assert_array_equal(_states(object_backend, RNG_ACTIONS[:30]), first)


TRAJECTORY_HASH = """
import hashlib, numpy as np
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
b = LiberoBackend(resolve_task("libero_spatial", 4))
b.reset(3, seed=7)
h = hashlib.sha256()
for a in np.random.default_rng(1).uniform(-1, 1, size=(40, 7)):
    h.update(b.step(a).observation["state"].tobytes())
h.update(b.snapshot().physics.tobytes())
print(h.hexdigest())
b.close()
"""


def test_determinism_across_processes():
    digests = [
        subprocess.run([sys.executable, "-c", TRAJECTORY_HASH], capture_output=True, text=True, check=True)
        .stdout.strip().splitlines()[-1]
        for _ in range(2)
    ]
    assert len(digests[0]) == 64 and digests[0] == digests[1]


def test_physical_rollback_reaches_stored_pose(object_backend):
    object_backend.reset(0, seed=7)
    for _ in range(5):
        object_backend.step(np.array([0, 0, 0, 0, 0, 1e-9, -1]))
    target = remember(object_backend)
    for a in RNG_ACTIONS[:20]:
        object_backend.step(np.r_[a[:6], -1.0])
    pos_err, _ = object_backend.eef_pose().distance(target.pose)
    assert pos_err > 0.01
    result = roll_back(object_backend, target, RollbackConfig(max_steps=80, pos_tol=0.002, rot_tol=0.02))
    assert result.reached and result.steps < 80
    assert object_backend.eef_pose().distance(target.pose)[0] <= 0.002


def test_physical_rollback_hands_back_open_fingers(object_backend):
    """Half-closed fingers read as a grasp to the policy: the move ends only once they are open."""
    object_backend.reset(0, seed=7)
    target = remember(object_backend)
    for _ in range(4):  # a short squeeze, fingers still closing
        object_backend.step(np.array([0, 0, 0, 0, 0, 0, 1.0]))
    assert object_backend.observe()["state"][6] < 0.037
    result = roll_back(object_backend, target)
    assert result.reached and result.steps > 1
    assert object_backend.observe()["state"][6] > 0.038  # fully open (0.04)


def test_rollback_in_joint_space_pulls_a_stretched_arm_back(object_backend):
    """Pushed 30 steps straight out, the arm is stretched against its elbow limit (where a Cartesian
    servo cannot pull it back); the joints seen at the target can, and OSC takes over afterwards."""
    object_backend.reset(0, seed=7)
    start = remember(object_backend)
    for _ in range(30):
        object_backend.step(np.array([1.0, 0, 0, 0, 0, 0, -1.0]))
    result = roll_back(object_backend, start)
    assert result.reached and result.pos_error <= 0.005
    after = object_backend.step(np.array([0, 0, 0.5, 0, 0, 0, -1.0])).observation  # OSC is back in charge
    assert after["eef_pos"][2] > start.pose.pos[2]


def test_rollback_gives_up_within_budget(object_backend):
    object_backend.reset(0, seed=7)
    here = remember(object_backend)
    far = NominalState(0, EefPose(here.pose.pos + np.array([0, 0, -1.0]), here.pose.rot), here.joints, 1.0, 1.0, True)
    result = roll_back(object_backend, far, RollbackConfig(max_steps=15))  # 1 m into the floor
    assert not result.reached and result.steps == 15 and result.pos_error > 0.1


def test_contacts_report_the_grasped_scene(object_backend):
    object_backend.reset(0, seed=7)
    assert object_backend.contacts().is_free()
    for _ in range(60):  # push straight down onto the floor
        object_backend.step(np.array([0, 0, -1.0, 0, 0, 0, 1.0]))
    contacts = object_backend.contacts()
    assert contacts.force > 5.0 and not contacts.is_free()
    assert contacts.touching


def test_contact_pairs_are_read_from_where_mujoco_writes_them(object_backend):
    """``contacts`` reads the geom pairs through a view bound at reset (``data.contact`` costs ~20 us
    a step to build): it must see what MuJoCo's own accessor sees, also after a hard reset, which
    builds a new simulator."""
    for init in (0, None):
        object_backend.reset(init, seed=7)
        data = object_backend.raw.sim.data._data
        seen = set()
        for _ in range(40):
            object_backend.step(np.array([0, 0, -1.0, 0, 0, 0, 1.0]))
            np.testing.assert_array_equal(object_backend._contact_geoms[: data.ncon], data.contact.geom)
            seen.add(data.ncon)
        assert len(seen) > 1  # the number of contacts changed under it


def test_sampled_layout_puts_objects_on_fixtures_where_the_task_says():
    """libero_spatial 7 starts the bowl on the stove (table height ~1.01 m): a soft reset used to
    add the stove's offset twice and drop the bowl to the floor. Same seed, same layout."""
    backend = LiberoBackend(resolve_task("libero_spatial", 7))
    try:
        first = backend.reset(None, seed=1000)["object_poses"]["akita_black_bowl_1"][:3]
        assert abs(first[2] - 1.01) < 0.02 and np.linalg.norm(first[:2] - [-0.26, -0.13]) < 0.05
        other = backend.reset(None, seed=1001)["object_poses"]["akita_black_bowl_1"][:3]
        again = backend.reset(None, seed=1000)["object_poses"]["akita_black_bowl_1"][:3]
        np.testing.assert_array_equal(first, again)
        assert not np.array_equal(first, other)
    finally:
        backend.close()
