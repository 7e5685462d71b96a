"""Where two columns disagree: wins and losses of B against A, split by whether B's first recovery came before
the burst and by how many recoveries each column made; then the episodes where A made none and B some."""
import json, sys
from collections import Counter
def load(p): return {(r["task"], r["init"]): r for r in map(json.loads, open(p))}
def recoveries(r): return len(r["recovery"]["recoveries"])
a, b = load(sys.argv[1]), load(sys.argv[2])
c, counts = Counter(), Counter()
for key, rb in b.items():
    ra = a[key]
    rec = rb["recovery"]["recoveries"]; fired = rb["disturbance_info"].get("fired_at")
    early = bool(rec) and fired is not None and rec[0]["step"] < fired
    outcome = "win" if rb["success"] and not ra["success"] else "loss" if ra["success"] and not rb["success"] else "same"
    c[(outcome, "early" if early else "not early")] += 1
    if outcome != "same":
        counts[(outcome, f"recoveries A {recoveries(ra)}, B {recoveries(rb)}")] += 1
for k in sorted(c): print(k, c[k])
for k in sorted(counts): print(k, counts[k])
only_b = [k for k in b if not recoveries(a[k]) and recoveries(b[k])]
print(f"A made no recovery, B some: {len(only_b)} episodes; successes A {sum(a[k]['success'] for k in only_b)}, "
      f"B {sum(b[k]['success'] for k in only_b)}")
