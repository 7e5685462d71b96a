"""Does averaging critics, or training one on the post-burst steps alone, lift post-burst failure prediction?

An experiment, not a tool (the sequel of ``inputs.py``). Reads the rollout store of ``recovery
train-critic --data DATA`` and splits it as train-critic does; reports the held-out AUROC of each
episode's peak of 1 - V, and of its peak over the 20 steps after the burst ends, for:

- ``state``: V as train-critic trains it (``fit_value_net``), five seeds, each alone and averaged;
- ``after the burst only``: V trained on the 20 steps after each training rollout's burst, with the
  episode's outcome as the target (the question the post-burst AUROC asks, and nothing else), 60
  epochs (the rows are few), three seeds averaged, at two weight decays; with EXTRA
  (``more_disturbed.py``) also on its rollouts.

Usage: python reports/critics/post_burst_training.py SUITE DATA [EXTRA]
"""

import sys

import recovery  # noqa: F401  (pins the float paths before numpy is used)
import numpy as np
import torch

from critics.value import ValueNet, discounted_outcome, fit_value_net
from inputs import open_store  # this folder's experiment scripts share their start
from recovery.pipelines.train_critic import after_burst_peaks, auroc, failure_labels, rollout_features, rollout_layout

SEEDS = (2000, 2001, 2002, 2003, 2004)


def averaged(nets: list[ValueNet]):
    def value(features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return np.mean([net(torch.from_numpy(features)).numpy() for net in nets], axis=0)
    return value


def after_burst_rows(episodes: list[dict], feats: dict, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``window`` steps from each rollout's burst end, labelled with its outcome."""
    xs, ys = [], []
    for e in episodes:
        end = int(e.get("burst_end", -1))
        if 0 <= end < len(e["state"]):
            xs.append(feats[id(e)][end:end + window])
            ys.append(np.full(len(xs[-1]), float(e["success"]), dtype=np.float32))
    return np.concatenate(xs), np.concatenate(ys)


def main() -> None:
    config, held, train, extra = open_store(sys.argv, "critic")
    episodes = held + train
    layout = rollout_layout(episodes, config.suite)
    feats = {id(e): rollout_features(layout, e) for e in episodes + extra}
    labels, ends, bursts = failure_labels(held)

    def row(name: str, value, rollouts: int) -> None:
        signals = [1 - value(feats[id(e)]) for e in held]
        print(f"| {name} | {rollouts} | {auroc(np.array([s.max() for s in signals]), labels):.3f} | "
              f"{auroc(after_burst_peaks(signals, ends, config.after_burst)[bursts], labels[bursts]):.3f} |", flush=True)

    x = np.concatenate([feats[id(e)] for e in train])
    y = np.concatenate([discounted_outcome(len(e["state"]), bool(e["success"])) for e in train])
    nets = [fit_value_net(x, y, seed=seed) for seed in SEEDS]
    for seed, net in zip(SEEDS, nets):
        row(f"state, seed {seed}", averaged([net]), len(train))
    row("state, 5 seeds averaged", averaged(nets), len(train))
    for rollouts in (train, train + extra) if extra else (train,):
        x, y = after_burst_rows(rollouts, feats, config.after_burst)
        for decay in (1e-4, 1e-2):
            row(f"after the burst only ({len(x) // config.after_burst} bursts), weight decay {decay:g}, 3 seeds averaged",
                averaged([fit_value_net(x, y, 60, seed, weight_decay=decay) for seed in SEEDS[:3]]), len(rollouts))


if __name__ == "__main__":
    main()
