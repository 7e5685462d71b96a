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
    variant: str  # policy · selector/rollback · disturbance
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


def _row(group: str, variant: str, records: list[dict]) -> RateRow:
    steps = [r["steps"] for r in records if r.get("success")]
    median = statistics.median(steps) if steps else float("nan")
    return RateRow(
        group, variant, len(records), sum(bool(r.get("success")) for r in records),
        sum(r.get("error") is not None for r in records), median,
    )


def summarize(records: list[dict]) -> list[RateRow]:
    """One row per (suite, task, variant), then one per (suite, variant). Errors count as failures."""
    by_task: dict[tuple, list[dict]] = defaultdict(list)
    by_suite: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        by_task[(r["suite"], r["task"], variant_label(r))].append(r)
        by_suite[(r["suite"], variant_label(r))].append(r)
    rows = []
    for (suite, task, variant), recs in sorted(by_task.items()):
        rows.append(_row(f"{suite}/{task} {recs[0].get('task_name', '')}".rstrip(), variant, recs))
    for (suite, variant), recs in sorted(by_suite.items()):
        rows.append(_row(f"{suite} (all)", variant, recs))
    return rows


def format_table(rows: list[RateRow]) -> str:
    lines = [
        "| task | variant | success | rate | 95% CI | errors | median steps (successes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row.interval
        lines.append(
            f"| {row.group} | {row.variant} | {row.successes}/{row.n} | {row.rate:.1%} | "
            f"[{lo:.1%}, {hi:.1%}] | {row.errors} | {row.median_steps:.0f} |"
        )
    return "\n".join(lines)


def variant_label(record: dict) -> str:
    """policy, selector (+ rollback kind) and disturbance: what a comparison column is."""
    selector = record.get("selector", "off")
    recovery = "no supervisor" if selector == "off" else f"{selector}/{record.get('rollback', 'physical')}"
    return f"{record['policy']} · {recovery} · {record.get('disturbance', 'none')}"


def comparison_table(records: list[dict]) -> str:
    """Rows: tasks then suites; columns: variants; cells: successes/n, rate and 95% interval.
    Only episodes present in every variant are compared (same init states, same seeds)."""
    by_variant: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for r in records:
        by_variant[variant_label(r)][(r["suite"], r["task"], r["init"], r["seed"])] = r
    variants = sorted(by_variant)
    common = set.intersection(*(set(v) for v in by_variant.values())) if by_variant else set()
    groups: dict[str, list[tuple]] = defaultdict(list)
    for key in sorted(common):
        suite, task = key[0], key[1]
        groups[f"{suite}/{task}"].append(key)
        groups[f"{suite} (all)"].append(key)
    lines = ["| task | n | " + " | ".join(variants) + " |", "|---|---|" + "---|" * len(variants)]
    for group, keys in sorted(groups.items(), key=lambda kv: (kv[0].endswith("(all)"), kv[0])):
        cells = []
        for variant in variants:
            recs = [by_variant[variant][k] for k in keys]
            k = sum(bool(r["success"]) for r in recs)
            lo, hi = wilson_interval(k, len(recs))
            rollbacks = sum((r.get("recovery") or {}).get("rollbacks", 0) for r in recs)
            extra = f", {rollbacks} rb" if rollbacks else ""
            cells.append(f"{k}/{len(recs)} = {k / len(recs):.0%} [{lo:.0%}, {hi:.0%}]{extra}")
        lines.append(f"| {group} | {len(keys)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
