"""How far the untouched closed fingers open past their opening at the last touch: in flickers (a new touch
within 5 steps) and, for the other runs, after how many steps they pass 1 mm: `python opening.py gap_*.jsonl`."""
import json, sys
for fn in sys.argv[1:]:
    pos = []; lostfirst = []
    for line in open(fn):
        e = json.loads(line); L, g = e["log"], e["gap"]
        n = min(len(L), len(g)); last=None; i=0
        while i < n:
            c,t,_ = L[i]
            if not c: last=None; i+=1; continue
            if t: last=i; i+=1; continue
            if last is None: i+=1; continue
            j=i
            while j<n and L[j][0] and not L[j][1]: j+=1
            retouch = j<n and L[j][0] and L[j][1] and j-i<=5
            devs = [1000*(g[k]-g[last]) for k in range(i, min(j, i+6))]
            if retouch: pos.append((max(devs), e["task"], e["init"], i))
            else:
                first = next((k+1 for k, d in enumerate(devs) if d > 1.0), None)
                lostfirst.append(first)
            last = last if retouch else None; i=j
    pos.sort(reverse=True)
    print(fn, "flicker max +dev mm:", [(round(p,2), t, ii, s) for p, t, ii, s in pos[:5]], "lost: let-go after", lostfirst)
