"""Where two columns disagree: wins and losses of B against A, split by whether B's first recovery came before the burst."""
import json, sys
from collections import Counter
def load(p): return {(r["task"], r["init"]): r for r in map(json.loads, open(p))}
a, b = load(sys.argv[1]), load(sys.argv[2])
c = Counter()
for key, rb in b.items():
    ra = a[key]
    rec = rb["recovery"]["recoveries"]; fired = rb["disturbance_info"].get("fired_at")
    early = bool(rec) and fired is not None and rec[0]["step"] < fired
    outcome = "win" if rb["success"] and not ra["success"] else "loss" if ra["success"] and not rb["success"] else "same"
    c[(outcome, "early" if early else "not early")] += 1
for k in sorted(c): print(k, c[k])
