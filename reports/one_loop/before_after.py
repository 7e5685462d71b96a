"""The one-loop refactor's check: the same episodes before (da9e309) and after, episode by episode.

Before, a record's ``steps`` counted policy steps only (rollback motion ran inside the supervisor and
was counted apart, as ``recovery_steps``); after, ``steps`` counts every executed control period. An
episode is the same when success, rollbacks and rollback steps agree and the step counts agree once
the rollback steps are added (a failure may stop earlier: the budget now ends a rollback too).
Usage: python reports/one_loop/before_after.py  (reads the JSONL files beside it, prints Markdown)
"""

import json
from pathlib import Path

HERE = Path(__file__).parent
COLUMNS = ("none_noise", "rule_noise", "oracle_noise", "none_nominal", "rule_nominal")


def load(path: Path) -> dict:
    return {(r["task"], r["init"]): r for r in map(json.loads, path.open())}


def same(before: dict, after: dict) -> bool:
    rb, ra = before["recovery"] or {}, after["recovery"] or {}
    steps = before["steps"] + rb.get("recovery_steps", 0)
    return (before["success"] == after["success"] and rb.get("rollbacks") == ra.get("rollbacks")
            and rb.get("recovery_steps") == ra.get("recovery_steps") and after["steps"] == steps)


def main() -> None:
    totals, differing = [], []
    for column in COLUMNS:
        before, after = load(HERE / f"before_{column}.jsonl"), load(HERE / f"after_{column}.jsonl")
        keys = sorted(set(before) & set(after))
        diff = [k for k in keys if not same(before[k], after[k])]
        totals.append((column, len(keys), sum(before[k]["success"] for k in keys),
                       sum(after[k]["success"] for k in keys), len(keys) - len(diff), len(diff)))
        differing += [(column, k, before[k], after[k]) for k in diff]
    print("| column | episodes | successes before | successes after | identical | differ |\n|---|---|---|---|---|---|")
    for row in totals:
        print("| " + " | ".join(map(str, row)) + " |")
    if differing:
        print("\n| column | task, init | success before / after | steps before (+ rollback) | steps after | "
              "rollbacks before / after |\n|---|---|---|---|---|---|")
    for column, (task, init), b, a in differing:
        rb, ra = b["recovery"] or {}, a["recovery"] or {}
        print(f"| {column} | {task}, {init} | {b['success']} / {a['success']} | {b['steps']} + "
              f"{rb.get('recovery_steps', 0)} | {a['steps']} | {rb.get('rollbacks')} / {ra.get('rollbacks')} |")


if __name__ == "__main__":
    main()
