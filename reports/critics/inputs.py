"""Does anything the critic could read, or more disturbed rollouts, lift its post-burst failure prediction?

An experiment, not a tool. Reads a rollout store of ``recovery train-critic --data DATA`` (rollouts
that carry their actions) and splits it as train-critic does; trains V(s) as train-critic does
(``fit_value_net``, two seeds) on other inputs or targets, and reports the held-out AUROC of the
episode's peak of 1 - V and of its peak in the 20 steps after the burst. Inputs:

- ``state``: the critic's features (what ``recovery train-critic`` ships; discounted targets);
- ``outcome``: the same, with the episode's outcome as the target at every step (gamma 1);
- ``+tracking``: the tracking error the rule reads (``critics.tracking``), its peak over the last
  20 steps and over the episode so far;
- ``+motion``: how the arm and every object moved over the last 5 steps;
- ``+time``: the step / 220;
- ``+chunk``: the base policy's action chunk at this state (its 8 planned actions);
- ``policy net``: the base policy's last hidden layer (512 wide) instead of the features;
- ``+all``: tracking, motion and chunk.

With EXTRA (``more_disturbed.py``), it then adds the first N extra disturbed rollouts of each task
to the training rollouts (the held-out set stays the store's).

Usage: python reports/critics/inputs.py SUITE DATA [EXTRA]
"""

import sys
from pathlib import Path

import recovery  # noqa: F401  (pins the float paths before numpy is used)
import numpy as np
import torch

from critics.tracking import TrackingMonitor
from critics.value import discounted_outcome, fit_value_net
from recovery.pipelines.train_critic import (CriticTrainConfig, after_burst_peaks, auroc, failure_labels,
                                             holdout_split, load_rollouts, rollout_features, rollout_layout)
from sim.tasks import resolve_tasks
from vla_wrappers.embedded.model import Checkpoint
from vla_wrappers.embedded.policy import shipped_checkpoints

VARIANTS = {  # name: (feature groups, gamma)
    "state": (("state",), 0.99),
    "outcome": (("state",), 1.0),
    "+tracking": (("state", "tracking"), 0.99),
    "+motion": (("state", "motion"), 0.99),
    "+time": (("state", "time"), 0.99),
    "+chunk": (("state", "chunk"), 0.99),
    "policy net": (("policy_hidden",), 0.99),
    "+all": (("state", "tracking", "motion", "chunk"), 0.99),
}


def policy_outputs(checkpoint: Checkpoint, episode: dict, instruction: str) -> tuple[np.ndarray, np.ndarray]:
    """The base policy's last hidden layer and its action chunk at every state of the episode."""
    names = [n.decode() for n in episode["object_names"]]
    x = checkpoint.layout.featurize_many(episode["state"], [dict(zip(names, p)) for p in episode["object_poses"]],
                                         checkpoint.layout.task_id(instruction))
    net = checkpoint.net
    with torch.no_grad():
        hidden = net.body[:-1]((torch.from_numpy(x) - net.feat_mean) / net.feat_std)
        chunk = torch.tanh(net.body[-1](hidden))
    return hidden.numpy(), chunk.numpy()


def tracking_inputs(episode: dict, window: int = 20) -> np.ndarray:
    """Tracking error as the supervisor computes it, its peak over the last ``window`` steps and so far."""
    monitor = TrackingMonitor()
    error = np.array([monitor.update(p.tolist(), a[:3].tolist())
                      for p, a in zip(episode["state"][:, :3], episode["actions"])])
    recent = np.array([error[max(0, t - window):t + 1].max() for t in range(len(error))])
    return np.stack([error, recent, np.maximum.accumulate(error)], axis=1)


def motion(features: np.ndarray, n_tasks: int, lag: int = 5) -> np.ndarray:
    """How the proprio and object slots changed over the last ``lag`` steps."""
    moving = features[:, :-n_tasks]
    return moving - np.concatenate([np.repeat(moving[:1], lag, axis=0), moving[:-lag]])


def feature_groups(episodes: list[dict], suite: str) -> dict[int, dict[str, np.ndarray]]:
    layout = rollout_layout(episodes, suite)
    instructions = [t.instruction for t in resolve_tasks(suite, None)]
    checkpoint = Checkpoint.load(shipped_checkpoints()[suite])
    groups = {}
    for e in episodes:
        state = rollout_features(layout, e)
        hidden, chunk = policy_outputs(checkpoint, e, instructions[int(e["task"])])
        groups[id(e)] = {"state": state, "tracking": tracking_inputs(e), "motion": motion(state, len(instructions)),
                         "time": (np.arange(len(state)) / 220.0)[:, None], "chunk": chunk.reshape(len(state), -1),
                         "policy_hidden": hidden}
    return groups


def fit_nets(train: list[dict], groups: dict, names: tuple[str, ...], gamma: float, hidden: int = 64,
             seeds: tuple[int, ...] = (2000, 2001)) -> list:
    """V on the ``names`` inputs of the training rollouts, one net per training seed."""
    x = np.concatenate([inputs_of(groups, e, names) for e in train])
    y = np.concatenate([discounted_outcome(len(e["state"]), bool(e["success"]), gamma) for e in train])
    return [fit_value_net(x, y, seed=seed, hidden=hidden) for seed in seeds]


def held_out_rows(nets: list, held: list[dict], groups: dict, names: tuple[str, ...], after_burst: int) -> np.ndarray:
    """Per net: held-out AUROC of the episode's peak of 1 - V, and of its post-burst peak."""
    labels, ends, bursts = failure_labels(held)
    rows = []
    for net in nets:
        with torch.no_grad():
            signals = [1 - net(torch.from_numpy(inputs_of(groups, e, names))).numpy() for e in held]
        rows.append((auroc(np.array([s.max() for s in signals]), labels),
                     auroc(after_burst_peaks(signals, ends, after_burst)[bursts], labels[bursts])))
    return np.array(rows)


def inputs_of(groups: dict, episode: dict, names: tuple[str, ...]) -> np.ndarray:
    return np.concatenate([groups[id(episode)][n] for n in names], axis=1).astype(np.float32)


def score(train: list[dict], held: list[dict], groups: dict, names: tuple[str, ...], gamma: float,
          after_burst: int, hidden: int = 64) -> np.ndarray:
    """Per training seed: held-out AUROC of the episode's peak of 1 - V, and of its post-burst peak."""
    return held_out_rows(fit_nets(train, groups, names, gamma, hidden), held, groups, names, after_burst)


def report(name: str, train: list[dict], rows: np.ndarray) -> None:
    print(f"| {name} | {len(train)} | {rows[:, 0].mean():.3f} | {rows[:, 1].mean():.3f} "
          f"({rows[:, 1].min():.3f}-{rows[:, 1].max():.3f}) |", flush=True)


def open_store(argv: list[str], first_column: str) -> tuple[CriticTrainConfig, list[dict], list[dict], list[dict]]:
    """The experiments' common start, from ``SUITE DATA [EXTRA]``: the store split as train-critic
    splits it, and the extra rollouts; prints the held-out counts and the table's header.
    Returns (config, held out, training, extra)."""
    suite, data = argv[1], Path(argv[2]) / argv[1]
    extra = load_rollouts(Path(argv[3]) / suite) if len(argv) > 3 else []
    torch.set_num_threads(1)
    config = CriticTrainConfig(suite=suite)
    held, train = holdout_split(load_rollouts(data), config)
    labels, _, bursts = failure_labels(held)
    print(f"{suite}: held out {len(held)} ({labels.sum()} failures); after the burst {labels[bursts].sum()} failures, "
          f"{(1 - labels[bursts]).sum()} successes\n\n| {first_column} | training rollouts | AUROC | after the burst |\n"
          "|---|---|---|---|", flush=True)
    return config, held, train, extra


def main() -> None:
    config, held, train, extra = open_store(sys.argv, "input")
    groups = feature_groups(held + train + extra, config.suite)
    for name, (names, gamma) in VARIANTS.items():
        report(name, train, score(train, held, groups, names, gamma, config.after_burst))
    by_task: dict[int, list[dict]] = {}
    for e in extra:
        by_task.setdefault(int(e["task"]), []).append(e)
    for per_task in (40, 80, 120) if extra else ():
        more = train + [e for rollouts in by_task.values() for e in rollouts[:per_task]]
        for name in ("state", "+chunk"):
            report(f"{name}, +{per_task} disturbed a task", more,
                   score(more, held, groups, *VARIANTS[name], config.after_burst))


if __name__ == "__main__":
    main()
