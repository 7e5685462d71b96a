"""How the value critic's failure prediction grows with its training rollouts, on one fixed held-out set.

Reads a rollout store of ``recovery train-critic --episodes 40 --data DATA`` and splits it as
train-critic does; then trains V(s) as train-critic does on the training rollouts of the first N
sampled layouts per task and condition (N = 10, 20, 30, 40), three training seeds each, and reports
the held-out AUROC of the episode's peak of 1 - V and of its peak in the 20 steps after the burst
(the disturbed episodes).

Usage: python reports/critics/training_size.py SUITE DATA
"""

import sys
from pathlib import Path

import numpy as np
import torch

from critics.value import ValueCritic, discounted_outcome, fit_value_net
from recovery.pipelines.train_critic import (CriticTrainConfig, after_burst_peaks, auroc, failure_labels,
                                             holdout_split, load_rollouts, rollout_features, rollout_layout)


def load(root: Path) -> list[dict]:
    """The store's rollouts, each with the index of its sampled layout (files TASK_CONDITION_SEED.npz;
    nominal seeds 2000+, disturbed 12000+)."""
    paths = sorted(root.glob("*.npz"))  # load_rollouts' order
    return [{**e, "layout": int(path.stem.split("_")[-1]) % 10_000 - 2000} for e, path in zip(load_rollouts(root), paths)]


def main() -> None:
    suite, root = sys.argv[1], Path(sys.argv[2]) / sys.argv[1]
    torch.set_num_threads(1)
    config = CriticTrainConfig(suite=suite)
    episodes = load(root)
    layout = rollout_layout(episodes, suite)
    features = {id(e): rollout_features(layout, e) for e in episodes}
    held, train = holdout_split(episodes, config)
    labels, ends, bursts = failure_labels(held)
    print(f"{suite}: held out {len(held)} ({labels.sum()} failures); after the burst {labels[bursts].sum()} "
          f"failures, {(1 - labels[bursts]).sum()} successes")
    for layouts in (10, 20, 30, 40):
        chosen = [e for e in train if e["layout"] < layouts]
        x = np.concatenate([features[id(e)] for e in chosen])
        y = np.concatenate([discounted_outcome(len(e["state"]), bool(e["success"])) for e in chosen])
        scores = []
        for seed in (2000, 2001, 2002):
            critic = ValueCritic(layout, fit_value_net(x, y, epochs=config.epochs, seed=seed), None, {})
            signals = [1 - critic.values(features[id(e)]) for e in held]
            scores.append((auroc(np.array([s.max() for s in signals]), labels),
                           auroc(after_burst_peaks(signals, ends, config.after_burst)[bursts], labels[bursts])))
        s = np.array(scores)
        print(f"{layouts} layouts a task and condition, {len(chosen)} training rollouts: AUROC {s[:, 0].mean():.3f} "
              f"({s[:, 0].min():.3f}-{s[:, 0].max():.3f}), after the burst {s[:, 1].mean():.3f} "
              f"({s[:, 1].min():.3f}-{s[:, 1].max():.3f})")


if __name__ == "__main__":
    main()
