"""Summarise nudge.py's output: how many post-burst states give the same outcome in all play-outs
(as is and nudged), and the AUROC a predictor that knew each state's success probability exactly
could reach (leave one out: each play-out's outcome scored by the success share of the state's other
play-outs; an upper bound for any predictor reading the state at this precision).
Usage: nudge_summary.py nudge.jsonl..."""
import json
import sys

import numpy as np

from recovery.pipelines.train_critic import auroc

for path in sys.argv[1:]:
    rows = [json.loads(line) for line in open(path)]
    runs = np.array([[row["alone"], *row["nudged"]] for row in rows], dtype=float)
    mixed = (runs.min(1) != runs.max(1)).sum()
    others = (runs.sum(1, keepdims=True) - runs) / (runs.shape[1] - 1)
    flipped = sum(row["alone"] != nudged for row in rows for nudged in row["nudged"])
    print(f"{path}: {len(rows)} states, {runs.shape[1]} play-outs each; success share {runs.mean():.3f}; "
          f"states whose outcome differs between play-outs {mixed} ({mixed / len(rows):.2f}); nudged play-outs "
          f"that differ from the one as is {flipped} / {len(rows) * (runs.shape[1] - 1)}; ceiling AUROC "
          f"{auroc(others.ravel(), runs.ravel().astype(int)):.3f}")
