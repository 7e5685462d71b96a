"""The learned repair policy: its checkpoints, its input, and collect-repairs -> train-repair -> eval."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from recovery.core.features import FeatureLayout
from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.pipelines.collect_repairs import RepairCollectConfig, collect_repairs
from recovery.pipelines.train_policy import TrainConfig
from recovery.pipelines.train_repair import train_repair
from recovery.supervision.config import RecoveryOptions
from sim.repair_demos import load_repairs
from vla_wrappers.base import PolicyConfigError
from vla_wrappers.embedded.model import EMBEDDED, REPAIR, Checkpoint, ChunkMLP, NetConfig
from vla_wrappers.embedded.policy import EmbeddedConfig, EmbeddedPolicy
from vla_wrappers.repair.layout import RepairLayout
from vla_wrappers.repair.policy import RepairPolicy

TASK = "pick up the alphabet soup and place it in the basket"
LAYOUT = FeatureLayout(("alphabet_soup_1", "basket_1"), (TASK,))
POSES = {"alphabet_soup_1": np.r_[0.1, 0.0, 0.05, 0, 0, 0, 1.0], "basket_1": np.r_[0.0, 0.2, 0.03, 0, 0, 0, 1.0]}
GOAL = {"eef_pos": np.array([0.0, 0.0, 0.3]), "eef_rot": np.diag([1.0, -1.0, -1.0]), "state": np.r_[0, 0, 0.3, 0, 0, 0,
        0.04, -0.04], "object_poses": {**POSES, "alphabet_soup_1": np.r_[0.2, 0.0, 0.05, 0, 0, 0, 1.0]},
        "holding": 0.0, "focus": "alphabet_soup_1", "focus_held": 0.0, "focus_tipped": 0.0}
OBS = {"state": np.r_[0.1, 0.0, 0.3, 3.14, 0, 0, 0.04, -0.04], "object_poses": POSES, "repair_target": GOAL}


def _checkpoint(tmp_path, kind: str, size: int):
    path = tmp_path / f"{kind}.pt"
    Checkpoint(LAYOUT, ChunkMLP(size, NetConfig(hidden=16)), "libero_object", {}, kind).save(path)
    return str(path)


def test_the_repair_input_carries_the_goal_and_the_focus():
    layout = RepairLayout(LAYOUT)
    features = layout.featurize_obs(OBS, 0)
    assert features.shape == (layout.size,) and features.dtype == np.float32
    assert features[-2:].tolist() == [1.0, 0.0]  # the focus: the soup, not the basket
    no_focus = layout.featurize_obs({**OBS, "repair_target": {**GOAL, "focus": ""}}, 0)
    assert no_focus[-2:].tolist() == [0.0, 0.0] and not np.array_equal(features, no_focus)
    with pytest.raises(KeyError, match="repair_target"):
        layout.featurize_obs({k: v for k, v in OBS.items() if k != "repair_target"}, 0)


def test_a_repair_checkpoint_runs_as_a_repair_policy_and_nowhere_else(tmp_path):
    repair = RepairPolicy(None, EmbeddedConfig(checkpoint=_checkpoint(tmp_path, REPAIR, RepairLayout(LAYOUT).size),
                                               device="cpu"))
    repair.reset(TASK)
    assert repair.infer(OBS).actions.shape == (NetConfig.horizon, 7)
    base = EmbeddedPolicy(None, EmbeddedConfig(checkpoint=_checkpoint(tmp_path, REPAIR, 10), device="cpu"))
    with pytest.raises(PolicyConfigError, match="repair-policy"):
        base.reset(TASK)
    wrong = RepairPolicy(None, EmbeddedConfig(checkpoint=_checkpoint(tmp_path, EMBEDDED, LAYOUT.size), device="cpu"))
    with pytest.raises(PolicyConfigError, match="embedded-policy"):
        wrong.reset(TASK)


@pytest.mark.sim
@pytest.mark.slow
def test_collect_train_and_repair(tmp_path):
    counts = collect_repairs(RepairCollectConfig(suite="libero_object", tasks=(0,), episodes=3,
                                                 disturbances=("object_shift",), out_dir=tmp_path, progress=False))
    (count,) = counts.values()
    assert count >= 1
    (path,) = (tmp_path / "libero_object").glob("*.hdf5")
    with h5py.File(path) as f:
        repair = f["data"][sorted(f["data"])[0]]
        seed = int(repair.attrs["seed"])
        assert repair.attrs["disturbance"] == "object_shift" and repair.attrs["seed"] >= 2000  # sampled layouts
        assert repair.attrs["focus"] == "alphabet_soup_1" or repair.attrs["focus"] == "basket_1"  # what it named
        assert repair["actions"].shape[0] == repair["obs/state"].shape[0] == repair.attrs["num_steps"]
    demos = load_repairs(tmp_path, "libero_object")
    assert len(demos) == count and np.abs(demos[0].actions).max() <= 1.0
    out = tmp_path / "repair.pt"
    train_repair(TrainConfig(suite="libero_object", demos_dir=tmp_path, out=out, epochs=2, net=NetConfig(hidden=32),
                             progress=False))
    (record,) = evaluate(EvalConfig(
        suite="libero_object", tasks=(0,), episodes=1, sampled_layouts=True, seed=seed, policy="embedded",
        disturbance="object_shift", max_steps=120,  # the layout and shift of a repaired episode
        out=tmp_path / "r.jsonl", progress=False,
        recovery=RecoveryOptions(selector="oracle_repair", repair="policy",
                                 repair_policy_options={"checkpoint": str(out), "device": "cpu"})))
    assert record["error"] is None and record["repair"] == "policy"
    (recovery,) = record["recovery"]["recoveries"]
    assert recovery["mode"] == "REPAIR" and recovery["repair"] in ("alphabet_soup_1", "basket_1") and recovery["steps"] > 0
