import subprocess
import sys
from pathlib import Path

import pytest

from recovery.evaluation.results import ResultsFile
from recovery.evaluation.stats import (
    comparison_table, format_table, load_variants, mcnemar_exact_p, paired_outcomes, paired_table, paired_variants,
    records_by_variant, summarize, wilson_interval,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("k, n, lo, hi", [
    (45, 50, 0.7864, 0.9565),  # reference values of the Wilson score interval, z = 1.96
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (5, 10, 0.2366, 0.7634),
])
def test_wilson_interval_matches_reference_values(k, n, lo, hi):
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_summary_rows_per_task_and_suite():
    records = [
        {"suite": "s", "task": t, "init": i, "seed": 7, "policy": "p", "task_name": f"t{t}",
         "success": i < 3, "steps": 10 + i, "error": "boom" if i == 4 else None}
        for t in (0, 1) for i in range(5)
    ]
    rows = summarize(records)
    assert [r.group for r in rows] == ["s/0 t0", "s/1 t1", "s (all)"]
    assert (rows[0].successes, rows[0].n, rows[0].errors, rows[0].median_steps) == (3, 5, 1, 11)
    assert (rows[2].successes, rows[2].n) == (6, 10)
    assert "| s (all) | p · no supervisor · none | 6/10 | 60.0% |" in format_table(rows)


def test_comparison_keeps_only_common_episodes():
    base = {"suite": "s", "task": 0, "seed": 7, "policy": "p"}
    records = [{**base, "init": i, "success": i < 2, "selector": "off"} for i in range(4)]
    records += [{**base, "init": i, "success": True, "selector": "rule", "recovery": {"rollbacks": 1}}
                for i in range(3)]
    table = comparison_table(records)
    assert "p · no supervisor · none" in table and "p · rule/physical · none" in table
    assert "| s/0 | 3 | 2/3 = 67%" in table  # init 3 has no rule twin: left out
    assert "3/3 = 100% [44%, 100%], 3 rb" in table


@pytest.mark.parametrize("wins, losses, p", [
    (10, 2, 2 * 79 / 4096),  # 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 0.0386
    (2, 10, 2 * 79 / 4096),  # two-sided: symmetric
    (5, 0, 0.0625),
    (4, 4, 1.0),  # the tail sum exceeds one half: capped at 1
    (0, 0, 1.0),  # nothing differs, nothing to test
])
def test_mcnemar_exact_p_matches_binomial_tail(wins, losses, p):
    assert mcnemar_exact_p(wins, losses) == pytest.approx(p)


def _episode(init: int, success: bool, selector: str = "off", disturbance: str = "none", **extra) -> dict:
    return {"suite": "s", "task": 0, "init": init, "seed": 7, "policy": "p", "selector": selector,
            "disturbance": disturbance, "success": success, "steps": 100 + init, "error": None, **extra}


# init:            0     1      2      3      4      5 (only A)  6 (only B)
BASELINE = [True, False, False, True, False, True]
RULE = [True, True, False, False, True, None, True]


def _paired_records() -> list[dict]:
    records = [_episode(i, ok) for i, ok in enumerate(BASELINE)]
    records += [_episode(i, ok, selector="rule", recovery={"rollbacks": i}) for i, ok in enumerate(RULE)
                if ok is not None]
    records += [_episode(i, False, disturbance="push") for i in range(5)]  # same episodes, another experiment
    return records


def test_paired_outcomes_count_common_episodes_only():
    by_variant = records_by_variant(_paired_records())
    baseline, rule = by_variant["p · no supervisor · none"], by_variant["p · rule/physical · none"]
    outcomes = paired_outcomes(baseline, rule)
    assert (outcomes.wins, outcomes.losses, outcomes.both_ok, outcomes.both_fail) == (2, 1, 1, 1)
    assert outcomes.n == 5  # init 5 and 6 have no twin
    assert outcomes.p_value == pytest.approx(1.0)


def test_variants_of_different_disturbances_are_not_paired():
    pairs = paired_variants(records_by_variant(_paired_records()))
    assert pairs == [("p · no supervisor · none", "p · rule/physical · none")]


def test_paired_table_row_and_none_without_shared_episodes():
    assert "| s | p · no supervisor · none | p · rule/physical · none | 5 | 2 | 1 | 1 | 1 | 1 |" in paired_table(
        _paired_records())
    assert paired_table([_episode(0, True), _episode(1, True, selector="rule")]) == ""


def _write(path: Path, records: list[dict]) -> Path:
    results = ResultsFile(path)
    for record in records:
        results.append(record)
    return path


def test_compare_cli_prints_paired_row_and_differing_episodes(tmp_path):
    records = _paired_records()
    a = _write(tmp_path / "a.jsonl", [r for r in records if r["selector"] == "off"])
    b = _write(tmp_path / "b.jsonl", [r for r in records if r["selector"] == "rule"])
    out = tmp_path / "report.md"
    done = subprocess.run([sys.executable, "-m", "recovery", "compare", str(a), str(b), "--list-differing",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| s | p · no supervisor · none | p · rule/physical · none | 5 | 2 | 1 | 1 | 1 | 1 |" in done.stdout
    assert "Episodes that differ, A = p · no supervisor · none, B = p · rule/physical · none:" in done.stdout
    assert "| s/0 | 1 | 7 | B | 101 / 101 | 0 / 1 |" in done.stdout
    assert "| s/0 | 3 | 7 | A | 103 / 103 | 0 / 3 |" in done.stdout
    assert "| s/0 | 4 | 7 | B | 104 / 104 | 0 / 4 |" in done.stdout
    assert "| s/0 | 0 |" not in done.stdout  # both succeeded: not listed
    assert out.read_text() == done.stdout


def test_the_same_variant_in_two_files_is_two_columns_named_after_them(tmp_path):
    """Two versions of the code run the same variant: compared, not one overwriting the other."""
    records = _paired_records()
    before = _write(tmp_path / "before.jsonl", [r for r in records if r["selector"] == "rule"])
    after = _write(tmp_path / "after.jsonl", [{**r, "success": True} for r in records if r["selector"] == "rule"])
    plain = _write(tmp_path / "plain.jsonl", [r for r in records if r["selector"] == "off"])
    loaded = load_variants([plain, before, after])
    assert list(records_by_variant(loaded)) == [
        "p · no supervisor · none", "p · no supervisor · push", f"p · rule/physical · none (2: {before})",
        f"p · rule/physical · none (3: {after})"]
    assert f"| s | p · rule/physical · none (2: {before}) | p · rule/physical · none (3: {after}) | 6 | 2 | 0 |" \
        in paired_table(loaded)
