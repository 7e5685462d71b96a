"""What happened to the objects around a rollback (WorldWatch) and the taxonomy that reads it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from critics.quality import QualityMonitor
from recovery.core.actions import WAIT_ACTION
from recovery.core.modes import Mode
from recovery.evaluation.taxonomy import MissingWorldError, classify, taxonomy_report
from recovery.evaluation.world import WorldWatch, object_changes
from recovery.supervision.config import SupervisorConfig
from recovery.supervision.repair import pose_change
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from tests.episodes import play
from tests.test_supervisor import ScriptedSelector
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy

UPRIGHT = np.array([0.0, 0.0, 0.0, 1.0])  # xyzw
ON_ITS_SIDE = np.array([math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4)])  # 90 degrees about x


def test_object_changes_gives_displacement_tilt_and_height_and_leaves_still_objects_out():
    before = {"can": np.r_[0.0, 0.0, 0.1, UPRIGHT], "box": np.r_[1.0, 0.0, 0.1, UPRIGHT]}
    after = {"can": np.r_[0.03, 0.04, 0.05, ON_ITS_SIDE], "box": np.r_[1.001, 0.0, 0.1, UPRIGHT]}
    ((name, (moved, tilt, rise)),) = object_changes(before, after).items()
    assert name == "can" and moved == pytest.approx(math.sqrt(0.03**2 + 0.04**2 + 0.05**2), abs=1e-4)
    assert tilt == pytest.approx(math.pi / 2, abs=1e-4) and rise == pytest.approx(-0.05)


@pytest.mark.sim
def test_a_physical_rollback_after_a_push_leaves_the_pushed_object_displaced(object_backend):
    """The push at policy step 20 shoves an object (hard: it topples); a RESET at 30 returns the arm
    to the start, and the record shows the object still where the push left it."""
    push = DisturbanceConfig("object_push", onset_min=20, onset_max=20, push_speed=1.5)
    backend = DisturbedBackend(object_backend, push, 0)
    broker = ChunkBroker(make_policy("expert", backend), replan_every=5)
    supervisor = Supervisor(backend, broker, ScriptedSelector({30: Mode.RESET}), QualityMonitor(None),
                            config=SupervisorConfig(max_rollbacks=1))
    watch = WorldWatch()
    outcome = play(backend, supervisor, 0, 7, 60, (watch,))
    assert outcome.error is None and outcome.extras["rollbacks"] == 1
    (rollback,) = watch.summary["rollbacks"]
    assert (rollback["decision_step"], rollback["target_step"]) == (30, 0)
    assert rollback["reached"] and rollback["periods"] > 0 and len(rollback["fingers"]) == 2
    moved = {name: change[0] for name, change in rollback["after"].items() if change[0] > 0.02}
    assert moved and {name: rollback["at_decision"][name] for name in moved} == {
        name: rollback["after"][name] for name in moved}  # pushed before the decision, left there by the rollback

    physical = {"suite": "libero_object", "task": 0, "init": 0, "seed": 7, "success": False, "steps": 60,
                "world": watch.summary}
    snapshot = {**physical, "success": True, "steps": 150, "world": None}
    lost = classify(physical, snapshot)
    assert lost.cause in ("displaced", "tipped") and lost.detail.split()[0] in moved
    report = taxonomy_report([physical], [snapshot])
    assert report.startswith("1 of 1 paired episodes") and f"| {lost.cause} | 1 | 0 |" in report
    with pytest.raises(MissingWorldError, match="--record-world"):
        classify({**physical, "world": None}, snapshot)


@pytest.mark.sim
def test_object_tip_lays_the_picked_up_object_on_its_side_and_records_which(object_backend):
    backend = DisturbedBackend(object_backend, DisturbanceConfig("object_tip", onset_min=5, onset_max=5), 0)
    obs = backend.reset(0, 7)
    name = object_backend.raw.obj_of_interest[0]
    before = obs["object_poses"][name]
    for _ in range(30):  # the 10 wait steps, the onset, and time to fall
        obs = backend.step(WAIT_ACTION).observation
    _, tilt = pose_change(before, obs["object_poses"][name])
    assert backend.record()["moved"] == name and tilt > 1.0


def test_classify_tells_a_refused_rollback_from_time_running_out():
    world = {"rollbacks": [], "end_vs_start": {}, "end_vs_target": None}
    physical = {"suite": "libero_spatial", "task": 1, "init": 2, "seed": 7, "success": False, "steps": 220,
                "world": world}
    assert classify(physical, {**physical, "success": True, "steps": 100}).cause == "no rollback"
    restored = {"target_step": 40, "decision_step": 50, "rose": {}, "fingers": [0.08, 0.08], "at_decision": {},
                "after": {}, "reached": True, "periods": 30}
    world = {"rollbacks": [restored], "end_vs_start": {}, "end_vs_target": {}}
    physical = {**physical, "world": world}
    assert classify(physical, {**physical, "success": True, "steps": 200}).cause == "out of time"
    assert classify(physical, {**physical, "success": True, "steps": 120}).cause == "world restored"
    reopened = {**restored, "fingers": [0.05, 0.08]}
    assert classify({**physical, "world": {**world, "rollbacks": [reopened]}},
                    {**physical, "success": True, "steps": 120}).cause == "gripper reopened"


def test_the_taxonomy_counts_the_episodes_that_go_the_other_way():
    """An episode the physical rollback wins and the snapshot loses is classified from the same world,
    in its own column: a snapshot that failed used the whole budget, which is not "out of time"."""
    restored = {"target_step": 40, "decision_step": 50, "rose": {}, "fingers": [0.08, 0.08], "at_decision": {},
                "after": {}, "reached": True, "periods": 30}
    world = {"rollbacks": [restored], "end_vs_start": {}, "end_vs_target": {}}
    episode = {"suite": "libero_spatial", "task": 1, "seed": 7, "world": world}
    physical = [{**episode, "init": 0, "success": False, "steps": 220},
                {**episode, "init": 1, "success": True, "steps": 150},
                {**episode, "init": 2, "success": True, "steps": 160}]
    snapshot = [{**episode, "init": 0, "success": True, "steps": 120},
                {**episode, "init": 1, "success": False, "steps": 220},
                {**episode, "init": 2, "success": False, "steps": 220}]
    report = taxonomy_report(physical, snapshot)
    assert report.startswith("1 of 3 paired episodes succeed with the snapshot rollback and fail with the physical "
                             "one; 2 go the other way (McNemar p = 1)")
    assert "| world restored | 1 | 2 |" in report and "out of time" not in report
