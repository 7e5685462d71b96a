"""How the value critic's failure prediction grows with its training rollouts, on one fixed held-out set.

Reads a rollout store of ``recovery train-critic --episodes 40 --data DATA`` and splits it as
train-critic does (a quarter held out, the permutation of seed 2000); then trains V(s) as
train-critic does on the training rollouts of the first N sampled layouts per task and condition
(N = 10, 20, 30, 40), three training seeds each, and reports the held-out AUROC of the episode's
peak of 1 - V and of its peak in the 20 steps after the burst (the disturbed episodes).

Usage: python reports/critics/training_size.py SUITE DATA
"""

import sys
from pathlib import Path

import numpy as np
import torch

from critics.value import ValueCritic, discounted_outcome, fit_value_net
from recovery.core.features import FeatureLayout
from recovery.pipelines.train_critic import CriticTrainConfig, after_burst_peaks, auroc
from sim.tasks import resolve_tasks


def load(root: Path) -> list[dict]:
    episodes = []
    for path in sorted(root.glob("*.npz")):  # TASK_CONDITION_SEED.npz; nominal seeds 2000+, disturbed 12000+
        with np.load(path) as data:
            episodes.append({**{k: data[k] for k in data.files}, "layout": int(path.stem.split("_")[-1]) % 10_000 - 2000})
    return episodes


def main() -> None:
    suite, root = sys.argv[1], Path(sys.argv[2]) / sys.argv[1]
    torch.set_num_threads(1)
    config = CriticTrainConfig(suite=suite)
    episodes = load(root)
    names = tuple(sorted({n.decode() for e in episodes for n in e["object_names"]}))
    layout = FeatureLayout(names, tuple(t.instruction for t in resolve_tasks(suite, None)))
    features = [layout.featurize_many(e["state"], [dict(zip([n.decode() for n in e["object_names"]], p))
                                                   for p in e["object_poses"]], int(e["task"])) for e in episodes]
    order = np.random.default_rng(config.seed).permutation(len(episodes))
    n_hold = max(1, int(len(episodes) * config.holdout))
    held, train = order[:n_hold], order[n_hold:]
    labels = np.array([0 if episodes[i]["success"] else 1 for i in held])
    ends = [int(episodes[i]["burst_end"]) for i in held]
    bursts = np.array([0 <= end < len(episodes[i]["state"]) for i, end in zip(held, ends)])
    print(f"{suite}: held out {len(held)} ({labels.sum()} failures); after the burst {labels[bursts].sum()} "
          f"failures, {(1 - labels[bursts]).sum()} successes")
    for layouts in (10, 20, 30, 40):
        chosen = [i for i in train if episodes[i]["layout"] < layouts]
        x = np.concatenate([features[i] for i in chosen])
        y = np.concatenate([discounted_outcome(len(episodes[i]["state"]), bool(episodes[i]["success"])) for i in chosen])
        scores = []
        for seed in (2000, 2001, 2002):
            critic = ValueCritic(layout, fit_value_net(x, y, layout, epochs=config.epochs, seed=seed), None, {})
            signals = [1 - critic.values(features[i]) for i in held]
            scores.append((auroc(np.array([s.max() for s in signals]), labels),
                           auroc(after_burst_peaks(signals, ends, config.after_burst)[bursts], labels[bursts])))
        s = np.array(scores)
        print(f"{layouts} layouts a task and condition, {len(chosen)} training rollouts: AUROC {s[:, 0].mean():.3f} "
              f"({s[:, 0].min():.3f}-{s[:, 0].max():.3f}), after the burst {s[:, 1].mean():.3f} "
              f"({s[:, 1].min():.3f}-{s[:, 1].max():.3f})")


if __name__ == "__main__":
    main()
