"""Quality metrics and value-risk rules on constructed trajectories (no simulator)."""

from __future__ import annotations

import functools
import math
import operator
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import critics
from critics._nearest import mean_nearest
from critics.quality import GlobalQuality, LocalQuality, QualityConfig, QualityMonitor, ReferenceSet
from critics.references import MissingReferencesError, load_references, reference_path, save_references
from critics.risk import (RiskHead, RiskMonitor, fit_risk_head, history_features, history_windows, rule_flags,
                          tvr_targets)
from critics.tracking import TrackingConfig, TrackingMonitor
from critics.value import ValueCritic, ValueNet, discounted_outcome
from recovery.core.features import PROPRIO_SIZE, SLOT_SIZE, FeatureLayout
from recovery.pipelines.train_critic import after_burst_peaks, auroc, burst_end
from recovery.supervision.build import MissingCriticError, build_supervisor
from recovery.supervision.config import RecoveryOptions, SupervisorConfig
from recovery.supervision.selectors import NoneSelector

CFG = QualityConfig()


def _run_local(positions, actions) -> float:
    local = LocalQuality(CFG)
    for p, a in zip(positions, actions):
        local.update(p, a[:3])
    return local.value


def test_local_quality_high_for_effective_smooth_motion():
    steps = 30
    positions = [np.array([0.01 * t, 0, 0]) for t in range(steps)]  # 1 cm per step, as commanded
    actions = [np.array([0.8, 0, 0, 0, 0, 0, -1])] * steps
    assert _run_local(positions, actions) > 0.8


def test_local_quality_drops_when_the_arm_does_not_follow():
    steps = 30
    stuck = [np.zeros(3)] * steps  # full actions, no motion: a stalled approach
    actions = [np.array([1.0, 0, 0, 0, 0, 0, -1])] * steps
    assert _run_local(stuck, actions) < 0.3


def test_local_quality_drops_for_jerky_motion():
    rng = np.random.default_rng(0)
    jerky = np.cumsum(rng.normal(0, 0.02, size=(30, 3)) * rng.integers(0, 2, size=(30, 1)), axis=0)
    actions = [np.array([1.0, 0, 0, 0, 0, 0, -1])] * 30
    smooth = [np.array([0.01 * t, 0, 0]) for t in range(30)]
    assert _run_local(jerky, actions) < _run_local(smooth, actions) - 0.2



def test_local_quality_matches_its_formula_over_the_window():
    rng = np.random.default_rng(3)
    positions, actions = np.cumsum(rng.normal(0, 0.01, (40, 3)), axis=0), rng.normal(0, 0.5, (40, 7))
    local, expected = LocalQuality(CFG), 1.0
    for t in range(40):
        got = local.update(positions[t], actions[t, :3])
        window = slice(max(0, t - CFG.window + 1), t + 1)
        pos, norms = positions[window], np.linalg.norm(actions[window, :3], axis=1)
        if len(pos) >= 3:
            e = np.linalg.norm(pos[-1] - pos[0]) / (norms.mean() + CFG.eps)
            speeds = np.linalg.norm(np.diff(pos, axis=0), axis=1)
            s = 1 / (1 + speeds.var() / (speeds.mean() ** 2 + CFG.eps))
            x = CFG.k * (CFG.w1 * e / (e + CFG.c) + CFG.w2 * s - CFG.b)
            expected = CFG.beta * expected + (1 - CFG.beta) / (1 + np.exp(-x))
        assert got == pytest.approx(expected, abs=1e-12)

def _references(n=6, length=50):
    rng = np.random.default_rng(1)
    line = np.linspace([0, 0, 0, 0.04, -0.04], [0.3, 0, 0.1, 0.0, 0.0], length)
    return ReferenceSet(tuple(line + rng.normal(0, 0.002, line.shape) for _ in range(n)))


def test_global_quality_near_references_stays_high_and_drops_off_them():
    refs = _references()
    on_track, off_track = GlobalQuality(refs, CFG), GlobalQuality(refs, CFG)
    line = np.linspace([0, 0, 0, 0.04, -0.04], [0.3, 0, 0.1, 0.0, 0.0], 50)
    on_track.update(range(50), line)
    off_track.update(range(50), line + np.array([0, 0.15, 0, 0, 0]))  # 15 cm to the side
    assert on_track.distance < 0.02 and on_track.value > 0.8
    assert off_track.distance > 0.14 and off_track.value < 0.35


def test_global_quality_compares_within_the_same_progress_bin():
    refs = _references()
    late = GlobalQuality(refs, CFG)
    late.update(range(5), np.tile([0.3, 0, 0.1, 0, 0], (5, 1)))  # at the goal already at the start: unusual
    assert late.distance > 0.2


def test_mix_of_local_and_global():
    monitor = QualityMonitor(_references(), QualityConfig(mix=0.25))
    monitor.local.value, monitor.global_.value = 1.0, 0.0
    assert monitor.value == pytest.approx(0.25)
    assert QualityMonitor(None).value == 1.0  # local only without references


def test_references_round_trip_and_missing_message(tmp_path):
    save_references(tmp_path / "s" / "t.npz", list(_references(3).trajectories))
    assert len(load_references(tmp_path, "s", "t").trajectories) == 3
    with pytest.raises(MissingReferencesError, match="recovery build-references --suite s"):
        load_references(tmp_path, "s", "other")


def test_targets_ranked_by_value_without_a_critic_name_the_command_that_trains_one(tmp_path):
    save_references(reference_path(tmp_path, "my_suite", "my_task"), [np.zeros((10, 5))])
    options = RecoveryOptions(references=tmp_path, supervisor=SupervisorConfig(target_score="value"))
    with pytest.raises(MissingCriticError, match="recovery train-critic --suite my_suite"):
        build_supervisor(None, None, "my_suite", "my_task", NoneSelector(), options)
    with pytest.raises(ValueError, match="unknown target score 'values'"):
        SupervisorConfig(target_score="values")


def test_rule_flags():
    assert rule_flags(np.linspace(0.9, 0.5, 8))["decline"]
    assert not rule_flags(np.linspace(0.5, 0.9, 8))["decline"]
    assert rule_flags(np.full(8, 0.6) + np.random.default_rng(0).normal(0, 0.005, 8))["plateau"]
    drop = np.array([0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.6, 0.6])
    assert rule_flags(drop)["abrupt_drop"]
    recovered = np.array([0.9, 0.9, 0.9, 0.9, 0.9, 0.6, 0.85, 0.88])
    assert not rule_flags(recovered)["abrupt_drop"]
    assert not any(rule_flags(np.linspace(0.2, 0.9, 5)).values())  # too short to judge


def test_tvr_target_positive_on_decline_negative_on_rise():
    falling, rising = np.linspace(0.8, 0.2, 20), np.linspace(0.2, 0.8, 20)
    assert tvr_targets(falling)[:10].min() > 0
    assert tvr_targets(rising)[:10].max() < 0
    assert history_features(np.array([0.5]), 8).shape == (17,)


def test_history_features_pad_the_start_and_slide_over_every_prefix():
    trace = np.random.default_rng(0).random(12)
    first = history_features(trace[:1], 8)
    assert first[:9].tolist() == [np.float32(trace[0])] * 9 and not first[9:].any()
    windows = history_windows(trace, 8)  # what the risk monitor feeds its head, a run of steps at once
    assert windows.tobytes() == np.stack([history_features(trace[: t + 1], 8) for t in range(12)]).tobytes()
    assert history_windows(trace, 8, last=5).tobytes() == windows[-5:].tobytes()  # a decision's new steps
    np.testing.assert_allclose(history_features(trace, 8)[9:], np.diff(trace[-9:]), atol=1e-6)


def test_risk_head_learns_to_separate_decline_from_rise():
    rng = np.random.default_rng(0)
    traces = [np.clip(np.linspace(0.8, 0.1, 40) + rng.normal(0, 0.01, 40), 0, 1) for _ in range(10)]
    traces += [np.clip(np.linspace(0.3, 0.95, 40) + rng.normal(0, 0.01, 40), 0, 1) for _ in range(10)]
    head = fit_risk_head(traces, epochs=30)
    monitor = RiskMonitor(head)
    falling = monitor.update(np.linspace(0.8, 0.3, 15).tolist())[-1]
    monitor.reset()
    rising = monitor.update(np.linspace(0.3, 0.8, 15).tolist())[-1]
    assert falling > rising + 0.05


def test_discounted_outcome_and_auroc():
    assert discounted_outcome(3, False).tolist() == [0, 0, 0]
    np.testing.assert_allclose(discounted_outcome(3, True, 0.5), [0.25, 0.5, 1.0])
    assert auroc(np.array([0.9, 0.8, 0.1, 0.2]), np.array([1, 1, 0, 0])) == 1.0
    assert auroc(np.array([0.5, 0.5]), np.array([1, 0])) == 0.5


def test_the_after_burst_score_is_the_peak_in_the_window_after_the_burst():
    """The burst's last disturbed action is at fired_at + duration - 1; the window starts at the state it led to."""
    assert burst_end({"fired_at": 40, "duration": 5}) == 45
    assert burst_end({"fired_at": None, "duration": 5}) == burst_end(None) == -1  # none fired; no disturbance
    signal = np.zeros(100)
    signal[44], signal[50], signal[80] = 9.0, 0.5, 7.0  # before the window, inside it, after it
    peaks = after_burst_peaks([signal, signal, signal[:40]], [45, -1, 45], window=20)
    assert peaks[0] == 0.5 and np.isnan(peaks[1]) and np.isnan(peaks[2])  # no burst; over before its end


def test_numpy_inference_matches_the_torch_nets():
    torch.manual_seed(0)
    layout = FeatureLayout(("a", "b"), ("task one", "task two"))
    net = ValueNet(layout.size, hidden=32)
    net.feat_mean.normal_()
    critic = ValueCritic(layout, net.eval(), RiskHead(8).eval(), {})
    x = np.random.default_rng(0).normal(0, 3, (64, layout.size)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
        risk = critic.risk_head(torch.from_numpy(history_features(np.linspace(0.9, 0.4, 12), 8))[None])
    np.testing.assert_allclose(critic.values(x), expected, atol=1e-6)
    assert critic.values(x[0]) == pytest.approx(expected[0], abs=1e-6)  # one state, as per step
    monitor = RiskMonitor(critic.risk_head)
    one_by_one = [monitor.update([v])[0] for v in np.linspace(0.9, 0.4, 12)]
    assert monitor.risk == pytest.approx(float(risk[0]), abs=1e-6)
    monitor.reset()
    together = monitor.update(np.linspace(0.9, 0.4, 12).tolist())  # a run of steps scored at once
    assert together == pytest.approx(one_by_one, abs=1e-6) and monitor.risk == together[-1]


def test_tracking_error_small_when_the_arm_follows_and_large_when_pushed():
    config = TrackingConfig()
    monitor = TrackingMonitor(config)
    position, command = np.zeros(3), np.array([1.0, 0.0, 0.0, 0, 0, 0, -1.0])
    errors = []
    for step in range(20):
        if step:  # the command fed `lag` steps ago moves the arm `gain` metres per unit
            position = position + config.gain * command[:3]
        if 10 <= step < 13:
            position = position + np.array([0.0, 0.02, 0.0])  # shoved sideways, 2 cm a step
        errors.append(monitor.update(position, command[:3]))
    assert max(errors[:10]) < 1e-9  # following its commands exactly
    assert max(errors[10:14]) > 0.05  # 6 cm off within the window
    assert errors[-1] < 1e-9  # the window has moved past the push
    monitor.reset()
    assert monitor.value == 0.0 and monitor.update(np.ones(3), command[:3]) == 0.0  # no window yet


def _numpy_search(points_by_dim: np.ndarray, starts: np.ndarray, features: np.ndarray, k: int) -> list[float]:
    """The search as numpy did it before it moved to C (critics/_nearest.c), operation for operation:
    the bits every published episode was made with."""
    squares = [(column - features[:, dim:dim + 1]) ** 2 for dim, column in enumerate(points_by_dim)]
    even, odd = squares[0], squares[1]
    for dim in range(2, len(squares)):
        if dim % 2:
            odd = odd + squares[dim]
        else:
            even = even + squares[dim]
    per_reference = np.minimum.reduceat(even + odd, starts, axis=1)
    # summed in order, as Python 3.11's sum did (3.12's compensates)
    return [functools.reduce(operator.add, map(math.sqrt, sorted(row)[:k])) / k for row in per_reference.tolist()]


def test_the_compiled_search_gives_the_bits_numpy_gave():
    rng = np.random.default_rng(5)
    shipped = load_references(Path(critics.__file__).parent / "references", "libero_object",
                              "pick_up_the_alphabet_soup_and_place_it_in_the_basket")
    cases = [(shipped, 0.05)] + [
        (ReferenceSet(tuple(rng.normal(0, 0.1, (int(rng.integers(12, 200)), dims)) for _ in range(refs))), 0.1)
        for dims, refs in ((2, 1), (3, 7), (5, 50), (8, 30))]
    for references, spread in cases:
        dims = references.trajectories[0].shape[1]
        for points, starts in references.bin_points(10):
            features = points[rng.integers(0, len(points), 6)] + rng.normal(0, spread, (6, dims))
            k = min(5, len(starts))
            expected = _numpy_search(np.ascontiguousarray(points.T), starts, features, k)
            assert mean_nearest(np.ascontiguousarray(points.T), np.asarray(starts, dtype=np.int64), features,
                                dims, k) == expected


def test_the_compiled_search_refuses_what_it_cannot_read():
    points, starts = np.zeros((5, 10)), np.array([0, 4], dtype=np.int64)
    with pytest.raises(TypeError, match="features: expected a C-contiguous float64 array"):
        mean_nearest(points, starts, np.zeros((2, 5), dtype=np.float32), 5, 2)
    with pytest.raises(ValueError, match="5-dimensional rows"):
        mean_nearest(points, starts, np.zeros((2, 4)), 5, 2)
    with pytest.raises(ValueError, match="k=3 and 2 references"):
        mean_nearest(points, starts, np.zeros((2, 5)), 5, 3)


def test_an_unbuilt_search_says_how_to_build_it():
    """A checkout pulled into an install made before the C search existed has no critics._nearest:
    importing the metrics must say what to run, not only that a module is missing."""
    hide = ("import importlib.abc, sys\n"
            "class Unbuilt(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'critics._nearest':\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Unbuilt())\n"
            "import critics.quality\n")
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "is not built: run `make install`" in result.stderr


def test_global_quality_of_a_run_of_states_equals_feeding_them_one_by_one():
    """The supervisor scores the states between two decisions together: it must not change a bit."""
    refs, rng = _references(), np.random.default_rng(3)
    line = np.linspace([0, 0, 0, 0.04, -0.04], [0.3, 0, 0.1, 0.0, 0.0], 50) + rng.normal(0, 0.01, (50, 5))
    together, one_by_one = GlobalQuality(refs, CFG), GlobalQuality(refs, CFG)
    runs = [together.update(range(t, t + 5), line[t:t + 5]) for t in range(0, 50, 5)]  # runs cross bin borders
    assert [v for run in runs for v in run] == [one_by_one.update([t], line[t:t + 1])[0] for t in range(50)]


def test_a_critic_of_the_tasks_objects_keeps_them_across_a_save_and_ignores_the_distractors(tmp_path):
    torch.manual_seed(0)
    layout = FeatureLayout(("bowl", "plate", "ramekin"), ("task one", "task two"), (("bowl", "plate"), ("ramekin",)),
                           task_slots=True)
    ValueCritic(layout, ValueNet(layout.size, hidden=32).eval(), None, {}).save(tmp_path / "critic.pt")
    critic = ValueCritic.load(tmp_path / "critic.pt")
    assert critic.layout == layout and layout.slots == 2
    pose = np.array([0.1, 0.2, 0.9, 0.0, 0.0, 0.0, 1.0])
    obs = {"state": np.zeros(8), "object_poses": {"bowl": pose, "plate": pose + 0.1, "ramekin": pose - 0.1}}
    value = critic.value_fn("task one")
    moved = {**obs["object_poses"], "ramekin": pose + 0.3}
    assert value([{**obs, "object_poses": moved}]) == value([obs])  # a distractor moved: nothing to see
    moved = {**obs["object_poses"], "bowl": pose + 0.3}
    assert value([{**obs, "object_poses": moved}]) != value([obs])


def test_task_slots_put_each_tasks_objects_of_interest_in_the_same_slots():
    layout = FeatureLayout(("bowl", "plate", "ramekin"), ("task one", "task two"), (("bowl", "plate"), ("ramekin",)),
                           task_slots=True)
    pose = np.array([0.1, 0.2, 0.9, 0.0, 0.0, 0.0, 1.0])
    first = layout.featurize(np.zeros(8), {"bowl": pose, "plate": pose + 0.1, "ramekin": pose - 0.1}, 0)
    second = layout.featurize(np.zeros(8), {"bowl": pose - 0.2, "plate": pose + 0.1, "ramekin": pose}, 1)
    slot, next_slot = slice(PROPRIO_SIZE, PROPRIO_SIZE + SLOT_SIZE), slice(PROPRIO_SIZE + SLOT_SIZE, -2)
    np.testing.assert_array_equal(first[slot], second[slot])  # the bowl of task one, the ramekin of task two
    assert first[next_slot][-1] == 1 and not second[next_slot].any()  # the plate present; task two has none
    assert len(first) == PROPRIO_SIZE + 2 * SLOT_SIZE + 2
