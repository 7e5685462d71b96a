"""``recovery train-critic``: value critic + risk head from base-policy rollouts, with a report.

Rollouts run on sampled layouts (never the evaluation init states), half of them under the
action-noise disturbance so that failures are well represented. Held-out episodes measure how
well each signal predicts failure: AUROC of an episode-level score (and of its peak in the steps
right after the burst: does the critic tell a burst the policy shrugs off from one it will not
survive?), and how many steps before the end of a failed episode the signal first fires.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from critics.risk import RiskConfig, RiskHead, fit_risk_head, history_windows, rule_flags
from critics.value import ValueCritic, discounted_outcome, fit_value_net
from recovery.core.errors import RecoveryError
from recovery.core.features import FeatureLayout
from recovery.evaluation.runner import EvalConfig, evaluate
from sim.tasks import resolve_tasks


@dataclass(frozen=True)
class CriticTrainConfig:
    suite: str
    policy: str = "embedded"
    episodes_per_task: int = 40  # per condition (nominal, disturbed): failure prediction right after a
    # burst still grows at 40 (reports/critics.md, "More rollouts")
    disturbance: str = "action_noise"
    seed: int = 2000
    workers: int = 1
    data_dir: Path = Path("critic_data")
    out: Path = Path("checkpoints/critics/critic.pt")
    holdout: float = 0.25
    after_burst: int = 20  # policy steps after the burst ends in which a signal must tell the outcome
    epochs: int = 30
    hidden: int = 64  # width of V(s)'s two hidden layers; it runs every step, so it is kept small
    task_objects: bool = True  # each task sees only its BDDL objects of interest, in slots by role (the
    # object it picks up, where it goes): failure prediction after a burst 0.66 -> 0.72 on fresh libero_spatial
    # rollouts, 0.89 -> 0.93 on libero_object (reports/critics.md, "Only the task's objects")
    progress: bool = True


class CriticDataError(RecoveryError, ValueError):
    """A rollout store that mixes rollouts of different policy weights."""


def collect_condition(config: CriticTrainConfig, disturbance: str, seed: int, root: Path) -> list[dict]:
    """``config.episodes_per_task`` rollouts a task under ``disturbance`` on the sampled layouts of
    ``seed``, one npz per episode in ``root`` (resumable like an evaluation); their results records."""
    def save(record: dict) -> None:
        if record["error"] is None:
            traj = record["trajectory"]
            np.savez_compressed(root / f"{record['task']:02d}_{disturbance}_{record['seed']}.npz",
                                state=traj["state"], actions=traj["actions"], object_poses=traj["object_poses"],
                                object_names=traj["object_names"], success=record["success"], task=record["task"],
                                burst_end=burst_end(record.get("disturbance_info")))

    root.mkdir(parents=True, exist_ok=True)
    return evaluate(EvalConfig(suite=config.suite, episodes=config.episodes_per_task, sampled_layouts=True,
                               policy=config.policy, seed=seed, workers=config.workers, disturbance=disturbance,
                               out=root / f"rollouts_{disturbance}.jsonl", record_trajectories=True,
                               progress=config.progress), on_record=save)


def collect_rollouts(config: CriticTrainConfig) -> tuple[list[dict], str | None]:
    """Rollouts with outcomes, nominal and disturbed, under data_dir, and the digest of the policy
    weights that made them (None where the policy has no weights file)."""
    root = Path(config.data_dir) / config.suite
    weights: set[str | None] = set()
    for disturbance, seed in (("none", config.seed), (config.disturbance, config.seed + 10_000)):
        records = collect_condition(config, disturbance, seed, root)
        weights |= {r.get("policy_weights") for r in records}  # those of earlier sessions too
    if len(weights) > 1:
        raise CriticDataError(f"the rollouts in {root} come from different weights of {config.policy} "
                              f"({', '.join(sorted(map(str, weights)))}): move them aside and collect again")
    return load_rollouts(root), next(iter(weights), None)


def load_rollouts(root: Path) -> list[dict]:
    """Every rollout stored in ``root``, in file-name order (task, condition, seed)."""
    episodes = []
    for path in sorted(root.glob("*.npz")):
        with np.load(path) as data:
            episodes.append({k: data[k] for k in data.files})
    return episodes


def burst_end(info: dict | None) -> int:
    """The policy step (an index into the episode's states) right after the disturbance's last
    disturbed action; -1 when none fired."""
    if not info or info.get("fired_at") is None:
        return -1
    return int(info["fired_at"]) + int(info["duration"])


def after_burst_peaks(signals: list[np.ndarray], ends: list[int], window: int) -> np.ndarray:
    """Each signal's peak over the ``window`` steps from its episode's burst end; NaN where no burst
    fired or the episode was over by its end."""
    return np.array([s[end:end + window].max() if 0 <= end < len(s) else np.nan for s, end in zip(signals, ends)])


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()
    return float(greater / (len(pos) * len(neg)))


def _lead_time(fired: np.ndarray) -> int | None:
    """Steps between the first firing and the end of the episode."""
    hits = np.flatnonzero(fired)
    return int(len(fired) - hits[0]) if len(hits) else None


def rollout_layout(episodes: list[dict], suite: str, task_objects: bool = False) -> FeatureLayout:
    """The critic's feature layout: every instruction of the suite, and every object the rollouts saw
    or, with ``task_objects``, each task's objects of interest in slots the tasks share."""
    names = tuple(sorted({n.decode() for e in episodes for n in e["object_names"]}))
    tasks = resolve_tasks(suite, None)
    return FeatureLayout(names, tuple(t.instruction for t in tasks),
                         tuple(t.objects_of_interest() for t in tasks) if task_objects else (), task_slots=task_objects)


def rollout_features(layout: FeatureLayout, episode: dict) -> np.ndarray:
    obj_names = [n.decode() for n in episode["object_names"]]
    return layout.featurize_many(episode["state"], [dict(zip(obj_names, p)) for p in episode["object_poses"]],
                                 int(episode["task"]))


def holdout_split(episodes: list[dict], config: CriticTrainConfig) -> tuple[list[dict], list[dict]]:
    """(held out, training): a seeded permutation, ``config.holdout`` of the rollouts held out."""
    order = np.random.default_rng(config.seed).permutation(len(episodes))
    n_hold = max(1, int(len(episodes) * config.holdout))
    return [episodes[i] for i in order[:n_hold]], [episodes[i] for i in order[n_hold:]]


def failure_labels(held: list[dict]) -> tuple[np.ndarray, list[int], np.ndarray]:
    """Per held-out rollout: 1 for a failure, where its burst ended, and whether a burst ended inside it."""
    labels = np.array([0 if e["success"] else 1 for e in held])
    ends = [int(e["burst_end"]) if "burst_end" in e else -1 for e in held]  # rollouts stored before it: none
    bursts = np.array([0 <= end < len(e["state"]) for e, end in zip(held, ends)], dtype=bool)
    return labels, ends, bursts


def train_critic(config: CriticTrainConfig) -> tuple[ValueCritic, dict]:
    episodes, weights = collect_rollouts(config)
    layout = rollout_layout(episodes, config.suite, config.task_objects)
    held, train = holdout_split(episodes, config)
    feats = {id(e): rollout_features(layout, e) for e in episodes}
    x = np.concatenate([feats[id(e)] for e in train])
    y = np.concatenate([discounted_outcome(len(e["state"]), bool(e["success"])) for e in train])
    net = fit_value_net(x, y, epochs=config.epochs, seed=config.seed, hidden=config.hidden)
    critic = ValueCritic(layout, net, None, {})
    traces = {id(e): critic.values(feats[id(e)]) for e in episodes}
    risk_config = RiskConfig()
    critic.risk_head = fit_risk_head([traces[id(e)] for e in train], risk_config, seed=config.seed)
    report = _report(held, train, traces, critic.risk_head, risk_config, after_burst=config.after_burst)
    critic.training = {"suite": config.suite, "policy": config.policy, "policy_weights": weights,
                       "episodes": len(episodes),
                       "train_episodes": len(train), "heldout_episodes": len(held), "seed": config.seed,
                       "hidden": config.hidden, "task_objects": config.task_objects,
                       "failure_prediction": report}
    critic.save(config.out)
    config.out.with_suffix(".report.json").write_text(json.dumps(critic.training, indent=2) + "\n")
    return critic, report


def _signals(episodes: list[dict], traces: dict, head: RiskHead, risk_config: RiskConfig) -> dict[str, list]:
    """Per episode and step: 1 - V, the learned TVR risk, and whether any rule fires."""
    import torch

    signals: dict[str, list[np.ndarray]] = {"value (1 - V)": [], "risk head (TVR)": [], "rules (any flag)": []}
    for e in episodes:
        v = traces[id(e)]
        with torch.no_grad():
            hist = history_windows(v, risk_config.k)
            tvr = head(torch.from_numpy(hist)).numpy()
        flags = np.array([any(rule_flags(v[: t + 1], risk_config).values()) for t in range(len(v))], dtype=float)
        signals["value (1 - V)"].append(1 - v)
        signals["risk head (TVR)"].append(tvr)
        signals["rules (any flag)"].append(flags)
    return signals


def _report(held: list[dict], train: list[dict], traces: dict, head: RiskHead, risk_config: RiskConfig,
            false_alarm_budget: float = 0.1, early_steps: int = 100, after_burst: int = 20) -> dict:
    """Per signal, on held-out episodes: AUROC of the episode's peak (whole episode, and the first
    ``early_steps`` steps, before most successes end: a failing episode is longer, which alone would
    lift a peak), and over the disturbed episodes of its peak in the ``after_burst`` steps after the
    burst; then, at a threshold set on training successes to fire on at most
    ``false_alarm_budget`` of them, how many failures it catches and how many steps before the end."""
    labels, ends, bursts = failure_labels(held)
    held_signals = _signals(held, traces, head, risk_config)
    train_signals = _signals([e for e in train if e["success"]], traces, head, risk_config)
    report = {"heldout_failures": int(labels.sum()), "heldout_successes": int(len(labels) - labels.sum()),
              "false_alarm_budget": false_alarm_budget, "early_steps": early_steps, "after_burst_steps": after_burst,
              "after_burst_episodes": f"{int(labels[bursts].sum())} failures, {int((1 - labels[bursts]).sum())} "
                                      "successes"}
    for name, per_episode in held_signals.items():
        peaks = after_burst_peaks(per_episode, ends, after_burst)
        threshold = float(np.quantile([s.max() for s in train_signals[name]], 1 - false_alarm_budget))
        fired = [s > threshold for s in per_episode]
        leads = [_lead_time(f) for f, label in zip(fired, labels) if label == 1]
        caught = [lead for lead in leads if lead is not None]
        report[name] = {
            "auroc": round(auroc(np.array([s.max() for s in per_episode]), labels), 3),
            "auroc_early": round(auroc(np.array([s[:early_steps].max() for s in per_episode]), labels), 3),
            "auroc_after_burst": round(auroc(peaks[bursts], labels[bursts]), 3),
            "threshold": round(threshold, 4),
            "fires_on_failures": f"{len(caught)}/{len(leads)}",
            "median_steps_before_end": float(np.median(caught)) if caught else None,
            "fires_on_successes": f"{sum(bool(f.any()) for f, label in zip(fired, labels) if label == 0)}"
                                  f"/{int(len(labels) - labels.sum())}",
        }
    return report
