import pytest

from recovery.evaluation.stats import comparison_table, format_table, summarize, wilson_interval


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
