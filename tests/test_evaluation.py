"""`recovery eval` end to end on the real simulator: records, resume, errors, video, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import cv2
import pytest

from recovery.evaluation.results import EpisodeSpec, ResultsFile
from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.supervision.selectors import RuleConfig, RuleSelector

pytestmark = pytest.mark.sim

RECOVERY = [sys.executable, "-m", "recovery"]
REPO = Path(__file__).resolve().parents[1]


def _eval(tmp_path: Path, **overrides) -> list[dict]:
    config = EvalConfig(**{"suite": "libero_object", "tasks": (0,), "episodes": 2, "policy": "zero",
                           "max_steps": 5, "out": tmp_path / "r.jsonl", "progress": False, **overrides})
    return evaluate(config)


def test_records_hold_the_protocol_fields(tmp_path):
    records = _eval(tmp_path)
    assert [r["init"] for r in sorted(records, key=lambda r: r["init"])] == [0, 1]
    first = records[0]
    assert first["suite"] == "libero_object" and first["task"] == 0 and first["seed"] == 7
    assert first["policy"] == "zero" and first["steps"] == 5 and first["success"] is False
    assert first["error"] is None and first["wall_time"] > 0
    assert first["task_name"] == "pick_up_the_alphabet_soup_and_place_it_in_the_basket"


def test_crash_in_one_episode_is_recorded_and_evaluation_goes_on(tmp_path):
    records = sorted(_eval(tmp_path, episodes=3, policy="tests.policies:CrashOnSecondEpisode"),
                     key=lambda r: r["init"])
    assert [r["error"] is None for r in records] == [True, False, True]
    assert "policy exploded on purpose" in records[1]["error"] and "Traceback" in records[1]["error"]


def test_an_episode_that_crashes_midway_keeps_its_counts(tmp_path):
    (record,) = _eval(tmp_path, episodes=1, max_steps=40, policy="tests.policies:CrashMidEpisode")
    assert "went away on purpose" in record["error"] and "Traceback" in record["error"]
    assert (record["steps"], record["inferences"]) == (15, 3)  # what ran before the crash


def test_nan_policy_never_reaches_the_simulator(tmp_path):
    (record,) = _eval(tmp_path, episodes=1, policy="tests.policies:NaNPolicy")
    assert "NaN" in record["error"] and record["steps"] == 0


def test_video_per_episode(tmp_path):
    _eval(tmp_path, episodes=1, video_dir=tmp_path / "video", camera_size=64)
    (video,) = (tmp_path / "video").glob("*.mp4")
    assert video.name == "libero_object_t00_i00_s7_zero_fail.mp4"
    capture = cv2.VideoCapture(str(video))
    frames = 0
    while capture.read()[0]:
        frames += 1
    assert frames == 6  # start frame + 5 steps


def test_record_world_is_kept_in_the_results_file(tmp_path):
    _eval(tmp_path, episodes=1, max_steps=20, record_world=True)
    (record,) = ResultsFile(tmp_path / "r.jsonl").load()  # as written: JSON all through
    assert record["world"] == {"rollbacks": [], "end_vs_start": {}, "end_vs_target": None}  # a still arm moves nothing


def test_two_workers_run_every_episode_once(tmp_path):
    records = _eval(tmp_path, episodes=3, workers=2)
    assert sorted(r["init"] for r in records) == [0, 1, 2]


def test_resume_after_interrupt_runs_only_missing_episodes(tmp_path):
    out = tmp_path / "r.jsonl"
    # 12 short episodes: the interrupt after the first lands mid-run, however fast the simulator is
    cmd = [*RECOVERY, "eval", "--suite", "libero_object", "--tasks", "0", "--episodes", "12", "--policy", "zero",
           "--max-steps", "60", "--out", str(out), "--no-progress"]
    # as from a terminal: a shell's background job (CI scripts, nohup) would hand SIGINT down ignored
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while len(ResultsFile(out).load()) < 1 and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "resume" in stderr
    first = ResultsFile(out).load()
    assert 1 <= len(first) < 12
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    records = ResultsFile(out).load()
    assert sorted(r["init"] for r in records) == list(range(12))  # nothing ran twice
    assert records[: len(first)] == first  # and nothing written earlier changed
    assert "libero_object (all)" in done.stdout


def test_workers_of_a_killed_evaluation_stop_too(tmp_path):
    out = tmp_path / "r.jsonl"
    proc = subprocess.Popen([*RECOVERY, "eval", "--suite", "libero_object", "--tasks", "0", "--episodes", "12",
                             "--policy", "zero", "--max-steps", "60", "--workers", "2", "--out", str(out),
                             "--no-progress"], cwd=REPO, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(ResultsFile(out).load()) < 1 and time.time() < deadline:
        time.sleep(0.2)
    workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "spawn_main"],
                                              capture_output=True, text=True).stdout.split()]
    assert len(workers) == 2
    proc.kill()  # SIGKILL: nothing in the evaluation can clean up
    proc.wait()
    time.sleep(3)
    assert not [w for w in workers if _alive(w)], "workers outlived their evaluation"


def _alive(pid: int) -> bool:
    """Running, not a zombie (an orphan that exited stays one until its new parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_second_evaluation_on_the_same_file_is_refused_and_changes_nothing(tmp_path):
    out = tmp_path / "r.jsonl"
    _eval(tmp_path, episodes=1)
    before = out.read_text()
    with ResultsFile(out).exclusive():  # as a first evaluation still running holds it
        busy = subprocess.run([*RECOVERY, "eval", "--suite", "libero_object", "--tasks", "0", "--episodes", "2",
                               "--policy", "zero", "--max-steps", "5", "--out", str(out), "--no-progress"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    assert busy.returncode == 2 and "another evaluation is writing" in busy.stderr
    assert out.read_text() == before
    assert len(_eval(tmp_path, episodes=2)) == 2  # free again: the run resumes


def test_resuming_with_other_rule_thresholds_is_refused_and_keeps_the_file(tmp_path):
    from recovery.evaluation.results import ResultsMismatchError
    from recovery.supervision.config import RecoveryOptions

    rule_file = tmp_path / "rule.json"
    rule_file.write_text(json.dumps({"rule": {**asdict(RuleConfig()), "quality_min": 0.3}}))
    first = _eval(tmp_path, episodes=1, recovery=RecoveryOptions(selector="rule"))
    assert first[0]["selector_settings"] == json.loads(json.dumps(RuleSelector(RuleConfig()).settings()))
    before = (tmp_path / "r.jsonl").read_text()
    with pytest.raises(ResultsMismatchError, match=r"1 rule episodes run with other settings \(quality_min differ"):
        _eval(tmp_path, episodes=2, recovery=RecoveryOptions(selector="rule", rule_config=rule_file))
    assert (tmp_path / "r.jsonl").read_text() == before
    assert len(_eval(tmp_path, episodes=2, recovery=RecoveryOptions(selector="rule"))) == 2  # same settings resume
    assert len(_eval(tmp_path, episodes=1)) == 1  # the policy alone has its own settings in the same file


def test_torn_last_line_is_skipped_and_repaired(tmp_path):
    store = ResultsFile(tmp_path / "r.jsonl")
    record = {**EpisodeSpec("libero_object", 0, 0, 7, "zero").__dict__, "success": True}
    store.append(record)
    with store.path.open("a") as f:
        f.write('{"suite": "libero_obj')  # killed mid-write
    assert store.load() == [record]
    store.append({**record, "init": 1})
    assert [r["init"] for r in store.load()] == [0, 1]
    assert json.loads(store.path.read_text().splitlines()[-1])["init"] == 1


@pytest.mark.parametrize("args, message", [
    (["--suite", "libero_objects"], "did you mean 'libero_object'"),
    (["--suite", "libero_object", "--tasks", "pick_up_the_moon"], "valid tasks"),
    (["--suite", "libero_object", "--tasks", "0", "--episodes", "51"], "has 50 init states"),
    (["--suite", "libero_object", "--selector", "oracle"], "it needs --disturbance"),
    (["--suite", "libero_object", "--disturbance", "wind"], "invalid choice: 'wind'"),
])
def test_bad_input_gets_a_clear_error(tmp_path, args, message):
    result = subprocess.run([*RECOVERY, "eval", *args, "--out", str(tmp_path / "x.jsonl")], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_unknown_policy_lists_registered_ones():
    from vla_wrappers.registry import policy_class

    with pytest.raises(ValueError, match="embedded, expert, openpi, openvla, repair, zero"):
        policy_class("pi0")
