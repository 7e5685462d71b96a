"""Success rates with 95% Wilson intervals, per task and per suite, as a Markdown table."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n == 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class RateRow:
    group: str  # "libero_object/3 task_name" or "libero_object (all)"
    policy: str
    n: int
    successes: int
    errors: int
    median_steps: float

    @property
    def rate(self) -> float:
        return self.successes / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.n)


def _row(group: str, policy: str, records: list[dict]) -> RateRow:
    steps = [r["steps"] for r in records if r.get("success")]
    median = statistics.median(steps) if steps else float("nan")
    return RateRow(
        group, policy, len(records), sum(bool(r.get("success")) for r in records),
        sum(r.get("error") is not None for r in records), median,
    )


def summarize(records: list[dict]) -> list[RateRow]:
    """One row per (suite, task, policy), then one per (suite, policy). Errors count as failures."""
    by_task: dict[tuple, list[dict]] = defaultdict(list)
    by_suite: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        by_task[(r["suite"], r["task"], r["policy"])].append(r)
        by_suite[(r["suite"], r["policy"])].append(r)
    rows = []
    for (suite, task, policy), recs in sorted(by_task.items()):
        rows.append(_row(f"{suite}/{task} {recs[0].get('task_name', '')}".rstrip(), policy, recs))
    for (suite, policy), recs in sorted(by_suite.items()):
        rows.append(_row(f"{suite} (all)", policy, recs))
    return rows


def format_table(rows: list[RateRow]) -> str:
    lines = [
        "| task | policy | success | rate | 95% CI | errors | median steps (successes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row.interval
        lines.append(
            f"| {row.group} | {row.policy} | {row.successes}/{row.n} | {row.rate:.1%} | "
            f"[{lo:.1%}, {hi:.1%}] | {row.errors} | {row.median_steps:.0f} |"
        )
    return "\n".join(lines)
