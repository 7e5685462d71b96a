"""How persistent is a RETRY's effect along an episode? Over the labelled decisions of a labels.npz
(``recovery improve-selector``), for consecutive labelled decisions (5 steps apart) with the same
outcome left alone (no recovery between them): how often a RETRY at both has the same outcome, and
how often a RETRY that wins is followed by one that wins too. Then, where leaving alone fails, how
often a RETRY wins, and where it succeeds, how often a RETRY keeps the success."""
import sys

import numpy as np

from recovery.pipelines.improve_selector import Labels

labels = Labels.load(sys.argv[1])
ran = labels.labelled & labels.ran
same = total = 0
win_then = []
for episode in np.unique(labels.episode):
    rows = np.flatnonzero((labels.episode == episode) & ran)
    for a, b in zip(rows[:-1], rows[1:]):
        if labels.alone[a] != labels.alone[b]:  # a recovery between them: another baseline
            continue
        total += 1
        same += labels.after[a] == labels.after[b]
        if labels.won[a]:
            win_then.append(labels.won[b])
print(f"consecutive labelled decisions with the same RETRY outcome: {same} / {total} ({same / total:.3f})")
print(f"P(a RETRY wins at the next decision | it wins here): {np.mean(win_then):.3f} (n {len(win_then)}); "
      f"P(a RETRY wins): {labels.won[ran].mean():.3f}")
fails, keeps = ran & ~labels.alone, ran & labels.alone
print(f"left alone fails at {fails.sum()}: a RETRY wins {labels.after[fails].mean():.3f}; "
      f"left alone succeeds at {keeps.sum()}: a RETRY keeps it {labels.after[keeps].mean():.3f}")
