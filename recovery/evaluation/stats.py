"""Success rates with 95% Wilson intervals, per task and per suite, as Markdown tables; and where two
variants ran the same episodes, paired wins and losses with an exact McNemar test."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from recovery.evaluation.results import ResultsFile

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
    """policy, selector (+ rollback kind, + the repair policy where one ran) and disturbance: what a
    comparison column is."""
    selector = record.get("selector", "off")
    recovery = "no supervisor" if selector == "off" else f"{selector}/{record.get('rollback', 'physical')}"
    if record.get("repair", "rollback") == "policy":
        policy = (record.get("selector_settings") or {}).get("repair_policy", "repair")
        recovery += "+repair" if policy == "repair" else f"+{policy.rsplit(':', 1)[-1]}"
    label = f"{record['policy']} · {recovery} · {record.get('disturbance', 'none')}"
    return f"{label} ({record['results_file']})" if "results_file" in record else label


def load_variants(paths: list) -> list[dict]:
    """The records of several results files. Where two files hold the same variant (two versions of
    the code, two machines), each file's records are told apart by the file's place in ``paths`` and
    its path as given (``results_file``, shown in the variant's label: "1: old/rule.jsonl"), so they
    become two columns in the order given, instead of one overwriting the other."""
    loaded = [(Path(path), ResultsFile(path).load()) for path in paths]
    files_of: dict[str, set[Path]] = defaultdict(set)
    for path, records in loaded:
        for r in records:
            files_of[variant_label(r)].add(path)
    return [{**r, "results_file": f"{place}: {path}"} if len(files_of[variant_label(r)]) > 1 else r
            for place, (path, records) in enumerate(loaded, 1) for r in records]


def episode_key(record: dict) -> tuple:
    """(suite, task, init, seed): what makes two variants' episodes the same experiment."""
    return record["suite"], record["task"], record["init"], record["seed"]


def records_by_variant(records: list[dict]) -> dict[str, dict[tuple, dict]]:
    """variant label -> episode key -> record, labels in column order."""
    by_variant: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for r in records:
        by_variant[variant_label(r)][episode_key(r)] = r
    return dict(sorted(by_variant.items()))


def _rollbacks(record: dict) -> int:
    return (record.get("recovery") or {}).get("rollbacks", 0)


def comparison_table(records: list[dict]) -> str:
    """Rows: tasks then suites; columns: variants; cells: successes/n, rate and 95% interval.
    Only episodes present in every variant are compared (same init states, same seeds)."""
    by_variant = records_by_variant(records)
    variants = list(by_variant)
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
            rollbacks = sum(_rollbacks(r) for r in recs)
            extra = f", {rollbacks} rb" if rollbacks else ""
            cells.append(f"{k}/{len(recs)} = {k / len(recs):.0%} [{lo:.0%}, {hi:.0%}]{extra}")
        lines.append(f"| {group} | {len(keys)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mcnemar_exact_p(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value. If A and B were equally good, each discordant episode would be
    a fair coin toss, so p is a binomial tail; exact rather than chi-squared because the counts are small."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True)
class PairedOutcomes:
    """B against A on the episodes both ran. Ties are kept apart: both ok and both fail say different
    things about the tasks, though neither says which variant is better."""

    wins: int  # B succeeded, A failed
    losses: int  # A succeeded, B failed
    both_ok: int
    both_fail: int

    @property
    def n(self) -> int:
        return self.wins + self.losses + self.both_ok + self.both_fail

    @property
    def p_value(self) -> float:
        return mcnemar_exact_p(self.wins, self.losses)


def _succeeded(record: dict) -> bool:
    return bool(record.get("success"))  # an error is a failure


def paired_outcomes(a: dict[tuple, dict], b: dict[tuple, dict]) -> PairedOutcomes:
    """Counts over the episode keys in both ``a`` and ``b`` (key -> record); an episode only one ran
    has no twin to be compared with and is left out."""
    pairs = [(_succeeded(a[k]), _succeeded(b[k])) for k in a.keys() & b.keys()]
    return PairedOutcomes(
        wins=pairs.count((False, True)), losses=pairs.count((True, False)),
        both_ok=pairs.count((True, True)), both_fail=pairs.count((False, False)),
    )


def paired_variants(by_variant: dict[str, dict[tuple, dict]]) -> list[tuple[str, str]]:
    """Each (A, B) pair of variants that share a disturbance and at least one episode, A the earlier
    column (the baseline 'no supervisor' sorts first). Under another disturbance an episode is another
    experiment, so variants of different disturbances are not paired."""
    def disturbance(variant: str) -> str:
        return next(iter(by_variant[variant].values())).get("disturbance", "none")

    return [(a, b) for a, b in combinations(by_variant, 2)
            if disturbance(a) == disturbance(b) and by_variant[a].keys() & by_variant[b].keys()]


def _of_suite(episodes: dict[tuple, dict], suite: str) -> dict[tuple, dict]:
    return {k: r for k, r in episodes.items() if k[0] == suite}


PAIRED_EXPLAINED = (
    "Paired: A and B ran the same episodes (suite, task, init state, seed) under the same disturbance. "
    "B wins: B succeeded where A failed; B losses: the reverse. McNemar p: exact two-sided binomial test of "
    "wins against losses, the chance of a split at least this uneven if A and B were equally good."
)


def paired_table(records: list[dict]) -> str:
    """One row per pair of variants and suite; "" when no two variants share an episode."""
    by_variant = records_by_variant(records)
    lines = []
    for a, b in paired_variants(by_variant):
        for suite in sorted({k[0] for k in by_variant[a].keys() & by_variant[b].keys()}):
            o = paired_outcomes(_of_suite(by_variant[a], suite), _of_suite(by_variant[b], suite))
            lines.append(f"| {suite} | {a} | {b} | {o.n} | {o.wins} | {o.losses} | {o.both_ok} | "
                         f"{o.both_fail} | {o.p_value:.3g} |")
    if not lines:
        return ""
    return "\n".join([PAIRED_EXPLAINED, "",
                      "| suite | A | B | n | B wins | B losses | both ok | both fail | McNemar p |",
                      "|---|---|---|---|---|---|---|---|---|", *lines])


def differing_episodes(records: list[dict]) -> str:
    """Per pair of variants, the episodes one solved and the other did not: the ones worth replaying."""
    by_variant = records_by_variant(records)
    sections = []
    for a, b in paired_variants(by_variant):
        common = by_variant[a].keys() & by_variant[b].keys()
        keys = sorted(k for k in common if _succeeded(by_variant[a][k]) != _succeeded(by_variant[b][k]))
        if not keys:
            continue
        lines = [f"Episodes that differ, A = {a}, B = {b}:", "",
                 "| task | init | seed | succeeded | steps A / B | rollbacks A / B |", "|---|---|---|---|---|---|"]
        for key in keys:
            ra, rb = by_variant[a][key], by_variant[b][key]
            suite, task, init, seed = key
            lines.append(f"| {suite}/{task} | {init} | {seed} | {'A' if _succeeded(ra) else 'B'} | "
                         f"{ra.get('steps')} / {rb.get('steps')} | {_rollbacks(ra)} / {_rollbacks(rb)} |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)
