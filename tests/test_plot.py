import pytest

from recovery.evaluation.plot import plot_episode


def _record(trace):
    return {"suite": "libero_object", "task": 0, "init": 3, "success": False, "steps": 4,
            "recovery": {"rollbacks": 1, "trace": trace,
                         "recoveries": [{"step": 2, "mode": "RETRY", "target_step": 0, "reached": True, "steps": 9}]},
            "disturbance_info": {"name": "action_noise", "fired_at": 1, "duration": 5}}


def test_plot_writes_a_png(tmp_path):
    trace = {"quality": [1, 0.8, 0.4, 0.7], "value": [0.9, 0.8, 0.3, 0.6], "risk": [0, 0.01, 0.05, 0.0]}
    out = plot_episode(_record(trace), tmp_path / "trace.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    with_tracking = plot_episode(_record({**trace, "tracking": [0.004, 0.05, 0.06, 0.005]}), tmp_path / "t.png")
    assert with_tracking.stat().st_size > out.stat().st_size  # a second axis and its curve


def test_plot_needs_a_trace(tmp_path):
    with pytest.raises(ValueError, match="keep_trace"):
        plot_episode(_record(None), tmp_path / "trace.png")
