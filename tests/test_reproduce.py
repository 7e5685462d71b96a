"""Checking live episodes against published ones, episode by episode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from recovery.evaluation.reproduce import reproduce, reproduction_report
from recovery.evaluation.results import ResultsFile

REPO = Path(__file__).resolve().parents[1]


def _record(init: int, success: bool = True, steps: int = 120, rollbacks: int = 1, selector: str = "rule") -> dict:
    return {"suite": "libero_spatial", "task": 3, "init": init, "seed": 7, "policy": "embedded",
            "selector": selector, "disturbance": "action_noise", "rollback": "physical", "success": success,
            "steps": steps, "error": None, "recovery": {"rollbacks": rollbacks, "recovery_steps": 9 * rollbacks}}


def test_episodes_match_differ_or_are_not_published():
    published = [_record(0), _record(1), _record(2, success=False, steps=220)]
    live = [_record(0), _record(1, steps=121), _record(2, success=False, steps=220), _record(5),
            _record(0, selector="none")]  # another selector: another episode
    result = reproduce(live, published)
    assert (result.matched, len(result.differing), result.unpublished) == (2, 1, 2) and not result.ok
    report = reproduction_report(result)
    assert report.startswith("DOES NOT REPRODUCE: 1 of 3") and "_i01_" in report
    assert reproduce(live[:1], published).ok
    assert "match the published run" in reproduction_report(reproduce(live[:1], published))
    assert "NOT CHECKED" in reproduction_report(reproduce(live[3:], published))


def test_the_command_exits_1_where_an_episode_differs(tmp_path):
    published, live = ResultsFile(tmp_path / "published.jsonl"), ResultsFile(tmp_path / "live.jsonl")
    for record in (_record(0), _record(1)):
        published.append(record)
    live.append(_record(0))
    run = [sys.executable, "-m", "recovery", "reproduce", str(live.path), str(published.path)]
    same = subprocess.run(run, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert same.returncode == 0 and "All 1 live episodes match" in same.stdout
    live.append(_record(1, steps=99))
    differ = subprocess.run(run, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert differ.returncode == 1 and "DOES NOT REPRODUCE" in differ.stdout
