"""Out-of-fold AUROC (5 folds by episode) of a small MLP (64 hidden, weight decay 1e-3, 60 epochs)
reading the selector's observation, and the observation with what it does not show (the named
objects' displacement and tilt since the start, a full hand, steps since the burst; only labels that
recorded them), for: left alone fails; a RETRY wins where left alone fails; a RETRY wins; a RETRY
loses where left alone succeeds. Usage: separability.py labels.npz (``recovery improve-selector``)."""
import sys

import numpy as np
import torch

from recovery.pipelines.improve_selector import Labels
from recovery.pipelines.train_critic import auroc


def out_of_fold(features: np.ndarray, target: np.ndarray, episodes: np.ndarray, epochs: int = 60) -> float:
    torch.manual_seed(0)
    features = (features - features.mean(0)) / (features.std(0) + 1e-6)
    scores = np.zeros(len(target))
    for fold in np.array_split(np.random.default_rng(0).permutation(np.unique(episodes)), 5):
        held = np.isin(episodes, fold)
        net = torch.nn.Sequential(torch.nn.Linear(features.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-3)
        x = torch.tensor(features[~held], dtype=torch.float32)
        y = torch.tensor(target[~held], dtype=torch.float32)
        for _ in range(epochs):
            for batch in torch.randperm(len(x)).split(128):
                loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x[batch]).squeeze(1), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            scores[held] = net(torch.tensor(features[held], dtype=torch.float32)).squeeze(1).numpy()
    return auroc(scores, target.astype(int))


labels = Labels.load(sys.argv[1])
ran = labels.labelled & labels.ran
recorded = np.isfinite(labels.displaced)
world = np.c_[labels.displaced, labels.tilted, labels.holding, labels.since]
for name, mask, target in (("left alone fails", ran, ~labels.alone),
                           ("a RETRY wins where left alone fails", ran & ~labels.alone, labels.after),
                           ("a RETRY wins", ran, labels.won),
                           ("a RETRY loses where left alone succeeds", ran & labels.alone, ~labels.after)):
    both = mask & recorded
    print(f"{name}: {mask.sum()} decisions, {target[mask].sum()} positive; observation "
          f"{out_of_fold(labels.observations[mask], target[mask], labels.episode[mask]):.3f} | where the world was "
          f"recorded ({both.sum()}): observation "
          f"{out_of_fold(labels.observations[both], target[both], labels.episode[both]):.3f}, with the world "
          f"{out_of_fold(np.hstack([labels.observations[both], world[both]]), target[both], labels.episode[both]):.3f}")
