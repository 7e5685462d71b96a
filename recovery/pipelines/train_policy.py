"""``recovery train-policy``: behaviour cloning of action chunks from the expert's demonstrations
(``fit_chunk_net`` also clones the repair policy, ``recovery.pipelines.train_repair``)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from recovery.core.features import PROPRIO_SIZE, SLOT_SIZE, FeatureLayout
from sim.demos import Demo, load_demos
from sim.tasks import resolve_tasks
from vla_wrappers.base import resolve_device
from vla_wrappers.embedded.model import EMBEDDED, Checkpoint, ChunkMLP, NetConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    suite: str
    demos_dir: Path = Path("demos")
    out: Path = Path("checkpoints/embedded.pt")
    epochs: int = 60
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    input_noise: float = 0.1  # std of Gaussian noise on normalised state features (robustness)
    task_objects: bool = False  # each task sees only its objects of interest (``FeatureLayout``)
    val_fraction: float = 0.1  # whole demonstrations held out
    seed: int = 0
    device: str = "auto"
    net: NetConfig = field(default_factory=NetConfig)
    progress: bool = True


def chunk_targets(actions: np.ndarray, horizon: int) -> np.ndarray:
    """(T, 7) -> (T, horizon, 7): the next ``horizon`` actions, the last one repeated at the end."""
    idx = np.minimum(np.arange(len(actions))[:, None] + np.arange(horizon)[None], len(actions) - 1)
    return actions[idx]


Featurize = Callable[[FeatureLayout, Any, int, int], np.ndarray]  # (layout, demo, task id, step) -> features


def _base_features(layout: FeatureLayout, demo: Demo, task_id: int, t: int) -> np.ndarray:
    return layout.featurize(demo.state[t], dict(zip(demo.object_names, demo.object_poses[t])), task_id)


def build_dataset(demos: list, layout: FeatureLayout, horizon: int,
                  featurize: Featurize = _base_features) -> tuple[np.ndarray, np.ndarray]:
    """``demos``: anything with ``instruction``, ``actions``, ``state``, ``object_names`` and
    ``object_poses`` (a demonstration, a repair demonstration)."""
    features, targets = [], []
    for demo in demos:
        task_id = layout.task_id(demo.instruction)
        features += [featurize(layout, demo, task_id, t) for t in range(len(demo.actions))]
        targets.append(chunk_targets(demo.actions, horizon))
    return np.stack(features), np.concatenate(targets).astype(np.float32)


def train(config: TrainConfig) -> Checkpoint:
    """The embedded policy from the expert's demonstrations."""
    return fit_chunk_net(config, load_demos(config.demos_dir, config.suite), EMBEDDED, _base_features)


def fit_chunk_net(config: TrainConfig, demos: list, kind: str, featurize: Featurize) -> Checkpoint:
    """Behaviour cloning of action chunks: whole demonstrations held out for validation, Gaussian
    noise on the state features (proprio and object slots), AdamW with a cosine schedule."""
    from tqdm import tqdm

    start = time.perf_counter()
    torch.set_num_threads(1)  # on these 2-core machines more threads are many times slower
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    device = resolve_device(config.device)
    tasks = resolve_tasks(config.suite, None)
    layout = FeatureLayout(tuple(sorted({n for d in demos for n in d.object_names})),
                           tuple(t.instruction for t in tasks),
                           tuple(t.objects_of_interest() for t in tasks) if config.task_objects else ())

    order = rng.permutation(len(demos))
    n_val = max(1, int(len(demos) * config.val_fraction)) if len(demos) > 1 else 0
    val_demos, train_demos = [demos[i] for i in order[:n_val]], [demos[i] for i in order[n_val:]]
    x_train, y_train = build_dataset(train_demos, layout, config.net.horizon, featurize)
    size = x_train.shape[1]
    net = ChunkMLP(size, config.net)
    net.feat_mean.copy_(torch.from_numpy(x_train.mean(0)))
    net.feat_std.copy_(torch.from_numpy(np.maximum(x_train.std(0), 1e-3)))
    net.to(device)
    noise_mask = torch.zeros(size, device=device)
    noise_mask[: PROPRIO_SIZE + SLOT_SIZE * layout.slots] = 1.0

    x_t, y_t = torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).to(device)
    optimiser = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = max(1, len(x_t) // config.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, config.epochs * steps_per_epoch)
    val = build_dataset(val_demos, layout, config.net.horizon, featurize) if val_demos else None
    history = []
    for epoch in tqdm(range(config.epochs), desc=f"train {config.suite} {kind}", disable=not config.progress):
        net.train()
        perm = torch.randperm(len(x_t), device=device)
        total = 0.0
        for b in range(steps_per_epoch):
            idx = perm[b * config.batch_size:(b + 1) * config.batch_size]
            x = x_t[idx] + config.input_noise * net.feat_std * noise_mask * torch.randn_like(x_t[idx])
            loss = torch.mean((net(x) - y_t[idx]) ** 2)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += loss.item()
        history.append({"epoch": epoch, "train_mse": total / steps_per_epoch, "val_mse": _val_mse(net, val, device)})
    minutes = (time.perf_counter() - start) / 60
    training = {
        "demos_dir": str(config.demos_dir), "train_demos": len(train_demos), "val_demos": len(val_demos),
        "samples": len(x_train), "epochs": config.epochs, "seed": config.seed, "device": device,
        "minutes": round(minutes, 2), "final": history[-1], "config": {k: str(v) for k, v in asdict(config).items()},
    }
    checkpoint = Checkpoint(layout, net.cpu().eval(), config.suite, training, kind)
    checkpoint.save(config.out)
    return checkpoint


@torch.no_grad()
def _val_mse(net: ChunkMLP, val: tuple[np.ndarray, np.ndarray] | None, device: str) -> float | None:
    if val is None:
        return None
    net.eval()
    x, y = (torch.from_numpy(a).to(device) for a in val)
    return float(torch.mean((net(x) - y) ** 2))
