"""Demonstrations -> behaviour cloning -> the embedded policy, on the real simulator."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from critics.value import ValueCritic
from recovery.core.features import FeatureLayout, axis_angle_rot6d, quat_xyzw_to_matrix
from recovery.core.files import file_digest
from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.pipelines.collect_demos import DemoConfig, collect_demos
from recovery.pipelines.train_policy import TrainConfig, chunk_targets, train
from recovery.supervision.build import CriticPolicyError, check_critic_policy
from recovery.supervision.config import SHIPPED_CRITICS
from sim.demos import load_demos
from sim.tasks import resolve_task
from vla_wrappers.base import PolicyConfigError
from vla_wrappers.embedded.model import Checkpoint, ChunkMLP, NetConfig
from vla_wrappers.embedded.policy import SHIPPED, EmbeddedConfig, EmbeddedPolicy
from vla_wrappers.registry import make_policy


def axis_angle_to_matrix(aa: np.ndarray) -> np.ndarray:
    """The reference: Rodrigues with numpy's matrix product, I + sin(a) K + (1 - cos(a)) K K."""
    angle = float(np.linalg.norm(aa))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = aa / angle
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_rotation_features_agree_between_representations():
    aa = np.array([0.3, -1.2, 2.5])
    matrix = axis_angle_to_matrix(aa)
    np.testing.assert_allclose(matrix @ matrix.T, np.eye(3), atol=1e-12)
    w = np.cos(np.linalg.norm(aa) / 2)
    xyz = np.sin(np.linalg.norm(aa) / 2) * aa / np.linalg.norm(aa)
    np.testing.assert_allclose(quat_xyzw_to_matrix(np.r_[xyz, w]), matrix, atol=1e-12)
    np.testing.assert_allclose(quat_xyzw_to_matrix(-np.r_[xyz, w]), matrix, atol=1e-12)  # sign-free


def test_object_slots_hold_the_pose_relative_position_and_rotation_columns_exactly():
    rng = np.random.default_rng(0)
    layout = FeatureLayout(("a",), ("task",))
    for _ in range(200):
        state, pose = rng.normal(size=8), rng.normal(size=7) * rng.uniform(0.1, 3)  # quaternion not normalised
        slot = layout.featurize(state, {"a": pose}, task_id=0)[11:24]
        rotation = quat_xyzw_to_matrix(pose[3:])
        expected = np.r_[pose[:3], pose[:3] - state[:3], rotation[:, 0], rotation[:, 1], 1.0].astype(np.float32)
        assert slot.tobytes() == expected.tobytes()  # the per-step fast path computes what the matrices say


def test_the_state_rotation_features_are_the_matrix_columns_to_the_bit():
    """Zeros of both signs, tiny and half-turn angles: the plain-float Rodrigues must give the bits
    the matrix product gives (a changed bit is a changed feature, and a changed episode)."""
    values = [0.0, -0.0, 1e-13, -1e-7, 0.5, -0.5, np.pi, -np.pi, 3.0]
    states = np.zeros((len(values) ** 3, 8))
    states[:, 3:6] = [[x, y, z] for x in values for y in values for z in values]
    vectors = states[:, 3:6]  # where features read them: numpy's norm sums in an order that follows alignment
    expected = np.array([np.r_[m[:, 0], m[:, 1]] for m in map(axis_angle_to_matrix, vectors)])
    assert np.array(axis_angle_rot6d(vectors)).tobytes() == expected.tobytes()


def test_the_state_rotation_features_do_not_depend_on_where_the_vector_lies_in_memory():
    """numpy's dot product sums a 3-vector's squares in an order that depends on its alignment; the
    features must not: the same rotation, 8 bytes off a 16-byte boundary or on one, gives one set of bits."""
    rng = np.random.default_rng(2)
    rotations = rng.normal(size=(2000, 3)) * 10.0 ** rng.integers(-4, 1, size=(2000, 1))
    states = np.zeros((len(rotations), 8))
    states[:, 3:6] = rotations
    aligned = np.array(rotations)  # rows of 24 bytes: every other one on a 16-byte boundary
    assert np.array(axis_angle_rot6d(states[:, 3:6])).tobytes() == np.array(axis_angle_rot6d(aligned)).tobytes()


def test_features_of_many_states_at_once_are_those_of_each_alone():
    rng = np.random.default_rng(1)
    layout = FeatureLayout(("a", "b", "c"), ("one", "two"))
    states = rng.normal(size=(40, 8)) * rng.uniform(0.01, 3, size=(40, 1))
    poses = [{name: rng.normal(size=7) for name in "abc" if rng.random() < 0.7} for _ in states]
    together = layout.featurize_many(states, poses, task_id=1)
    assert together.tobytes() == np.stack([layout.featurize(s, p, task_id=1) for s, p in zip(states, poses)]).tobytes()


def test_chunk_targets_repeat_the_last_action():
    actions = np.arange(3)[:, None] * np.ones((3, 7))
    chunks = chunk_targets(actions, 4)
    assert chunks.shape == (3, 4, 7) and chunks[1, :, 0].tolist() == [1, 2, 2, 2]


def test_layout_slots_absent_objects_as_zeros():
    layout = FeatureLayout(("a", "b"), ("task one", "task two"))
    features = layout.featurize(np.zeros(8), {"b": np.r_[1.0, 2.0, 3.0, 0, 0, 0, 1]}, task_id=1)
    assert features.shape == (layout.size,)
    assert layout.task_id("task two") == 1 and layout.task_id("nope") is None
    slot_a = features[11:24]
    assert not slot_a.any()


def test_a_task_sees_only_its_objects_of_interest_and_the_checkpoint_keeps_them(tmp_path):
    interest = resolve_task("libero_10", 0).objects_of_interest()
    assert interest == ("alphabet_soup_1", "tomato_sauce_1", "basket_1")  # from the task's BDDL file
    layout = FeatureLayout(("alphabet_soup_1", "butter_1"), ("task one", "task two"), (interest, ("butter_1",)))
    poses = {name: np.r_[1.0, 2.0, 3.0, 0, 0, 0, 1] for name in ("alphabet_soup_1", "butter_1")}
    everything = FeatureLayout(layout.object_names, layout.instructions).featurize(np.zeros(8), poses, task_id=0)
    seen = layout.featurize(np.zeros(8), poses, task_id=0)
    assert seen[11:24].tolist() == everything[11:24].tolist() and everything[24:37].any()
    assert not seen[24:37].any()  # butter: not this task's, an empty slot as for an absent object
    assert layout.featurize(np.zeros(8), poses, task_id=1)[24:37].tolist() == everything[24:37].tolist()
    Checkpoint(layout, ChunkMLP(layout.size, NetConfig(hidden=8)), "libero_10", {}).save(tmp_path / "c.pt")
    assert Checkpoint.load(tmp_path / "c.pt").layout == layout


@pytest.mark.sim
@pytest.mark.slow
def test_collect_train_and_run(tmp_path):
    counts = collect_demos(DemoConfig(suite="libero_object", tasks=(0,), demos_per_task=2, out_dir=tmp_path,
                                      progress=False))
    assert counts == {"pick_up_the_alphabet_soup_and_place_it_in_the_basket": 2}
    (path,) = (tmp_path / "libero_object").glob("*.hdf5")
    with h5py.File(path) as f:
        demo = f["data/demo_0"]
        assert demo.attrs["init"] == -1 and demo.attrs["seed"] == 1000  # a sampled layout, not an init state
        assert demo["actions"].shape[0] == demo["obs/state"].shape[0] == demo["states"].shape[0]
    demos = load_demos(tmp_path, "libero_object")
    assert len(demos) == 2 and np.abs(demos[0].actions).max() <= 1.0
    out = tmp_path / "ckpt.pt"
    checkpoint = train(TrainConfig(suite="libero_object", demos_dir=tmp_path, out=out, epochs=2,
                                   net=NetConfig(hidden=32), progress=False))
    assert checkpoint.training["train_demos"] + checkpoint.training["val_demos"] == 2
    (record,) = evaluate(EvalConfig(suite="libero_object", tasks=(0,), episodes=1, policy="embedded",
                                    policy_options={"checkpoint": str(out), "device": "cpu"}, max_steps=10,
                                    out=tmp_path / "r.jsonl", progress=False))
    assert record["error"] is None and record["steps"] == 10 and record["inferences"] == 2
    assert record["policy_weights"] == file_digest(out)  # what a critic trained on these rollouts is bound to


def test_checkpoint_of_another_format_is_refused(tmp_path):
    bad = tmp_path / "other.pt"
    torch.save({"format": "someone-else", "version": 7}, bad)
    policy = EmbeddedPolicy(None, EmbeddedConfig(checkpoint=str(bad), device="cpu"))
    with pytest.raises(PolicyConfigError, match="checkpoint format 'someone-else' v7"):
        policy.reset("pick up the alphabet soup and place it in the basket")


def test_unknown_instruction_is_refused():
    policy = EmbeddedPolicy(None, EmbeddedConfig(device="cpu"))
    with pytest.raises(PolicyConfigError, match="no shipped embedded policy checkpoint|was not trained on"):
        policy.reset("juggle three oranges")


def test_a_critic_of_other_policy_weights_is_refused_and_one_that_records_none_warned_about():
    object_policy = EmbeddedPolicy(None, EmbeddedConfig(checkpoint=str(SHIPPED / "libero_object.pt")))
    spatial_policy = EmbeddedPolicy(None, EmbeddedConfig(checkpoint=str(SHIPPED / "libero_spatial.pt")))
    path = SHIPPED_CRITICS / "libero_object.pt"
    critic = ValueCritic.load(path)
    critic.training["policy_weights"] = object_policy.weights_digest()
    check_critic_policy(critic, path, object_policy)  # its own policy's weights: passes
    with pytest.raises(CriticPolicyError, match=f"trained on rollouts of policy weights {critic.training['policy_weights']}"
                                                f"; this run's policy runs {spatial_policy.weights_digest()}"):
        check_critic_policy(critic, path, spatial_policy)
    del critic.training["policy_weights"]
    with pytest.warns(UserWarning, match="does not record the policy weights"):
        check_critic_policy(critic, path, spatial_policy)
    check_critic_policy(critic, path, make_policy("zero", None))  # no weights of ours to compare: nothing to say


@pytest.mark.sim
@pytest.mark.parametrize("suite, task", [("libero_object", 0), ("libero_goal", 7)])
def test_shipped_policy_succeeds_on_unseen_init_states(tmp_path, suite, task):
    assert (SHIPPED / f"{suite}.pt").exists()
    records = evaluate(EvalConfig(suite=suite, tasks=(task,), episodes=3, policy="embedded",
                                  out=tmp_path / "r.jsonl", progress=False))
    assert sum(r["success"] for r in records) >= 2, records
