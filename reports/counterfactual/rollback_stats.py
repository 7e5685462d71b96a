"""Per column: episodes whose first recovery came before the burst, episodes without one, recoveries per episode."""
import json, sys
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path)]
    early = none = 0; total = 0; after = []
    for r in rows:
        rec = r["recovery"]["recoveries"]; total += len(rec)
        fired = r["disturbance_info"].get("fired_at")
        if not rec: none += 1; continue
        if fired is not None and rec[0]["step"] < fired: early += 1
        elif fired is not None: after.append(rec[0]["step"] - fired)
    after.sort()
    print(f"{path}: success {sum(r['success'] for r in rows)}/{len(rows)}, recoveries {total}, "
          f"episodes without {none}, first before the burst {early}, median lag after onset "
          f"{after[len(after)//2] if after else None}")
