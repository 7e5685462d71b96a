"""``recovery improve-selector``: one step of policy improvement over a selector, from outcomes
played out in simulation.

PPO from the clone learned little (``reports/counterfactual.md``): a recovery changes an episode's
outcome in about one training episode in five, and PPO hears of it only at the 2-3% of decisions
where the selector already asks. The simulation is deterministic and restorable, so every decision
after a burst can be labelled with what a RETRY there would change: the outcome of the base policy
left alone from there, against the one after a RETRY and then left alone
(``SelectorEnv.label_decision``), both played out and undone. The selector runs the episodes as it
would (greedy); its actor is then fitted to ask where the RETRY won the episode and not where it lost
it, and to keep its own choice everywhere else (where the RETRY changed nothing the label says
nothing). Whether the selector's observation separates those states at all is measured out of fold
(each episode judged by a fit that did not see it): the AUROC of the probability of RETRY for the
decisions where a RETRY wins.

A run lives in one directory: ``labels.npz`` (grows; rerunning with more ``--episodes`` collects
the rest), ``report.json``, ``selector.zip`` (what ``recovery eval --selector ppo --selector-path``
reads).
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import SubprocVecEnv

from recovery.core.files import load_arrays, save_arrays
from recovery.core.interrupts import stop_on_interrupt
from recovery.core.modes import Mode
from recovery.learning.env import SelectorEnvConfig
from recovery.learning.run_dir import prepare_run, save_atomically
from recovery.learning.train import make_env
from recovery.learning.warm_start import fit_minibatches
from recovery.pipelines.train_critic import auroc
from recovery.supervision.build import critic_path
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.observation import LEARNED_MODES
from recovery.supervision.ppo import check_advisor, check_meta, shipped_selector

RETRY, EXECUTE = LEARNED_MODES.index(Mode.RETRY), LEARNED_MODES.index(Mode.EXECUTE)
SAVE_EVERY = 40  # episodes labelled between two saves of labels.npz (each batch starts its own environments)


# a decision's row as collected, and each column's type; unlabelled decisions: since -1, the rest False / NaN
ROW = ("observations", "actions", "labelled", "since", "alone", "after", "ran", "displaced", "tilted", "holding")
COLUMN_TYPES = {"observations": np.float32, "actions": np.int64, "labelled": bool, "since": np.int64, "alone": bool,
                "after": bool, "ran": bool, "displaced": np.float64, "tilted": np.float64, "holding": np.float64,
                "episode": np.int64}
UNLABELLED = {"since": -1, "alone": False, "after": False, "ran": False, "displaced": np.nan, "tilted": np.nan,
              "holding": np.nan}


@dataclass(frozen=True)
class ImproveConfig:
    env: SelectorEnvConfig = field(default_factory=lambda: SelectorEnvConfig(disturbed_share=1.0))
    selector: Path | None = None  # None: the suite's shipped selector
    episodes: int = 200  # labelled episodes over all environments
    window: int = 30  # steps after the burst ended whose decisions are labelled (the RETRY horizon's reach)
    envs: int = 2
    seed: int = 0
    epochs: int = 30
    learning_rate: float = 3e-4
    batch_size: int = 256
    decisive_weight: float = 10.0  # of a decision whose RETRY changed the outcome, against one the selector keeps
    folds: int = 5  # of episodes, for the out-of-fold report
    out: Path | None = None  # None: selectors/SUITE_improved
    device: str = "cpu"

    @property
    def run_dir(self) -> Path:
        return Path(self.out or Path("selectors") / f"{self.env.suite}_improved")

    def identity(self) -> dict:
        """What the labels depend on: a rerun with other settings must not add to them."""
        data = json.loads(json.dumps(asdict(self), default=str))
        return {"env": data["env"], "selector": data["selector"], "window": self.window, "seed": self.seed}


@dataclass
class Labels:
    """Every decision of the labelled episodes: the selector's observation and greedy action; where
    labelled, steps since the burst ended and the outcomes left alone and after a RETRY (False elsewhere)."""

    observations: np.ndarray
    actions: np.ndarray
    labelled: np.ndarray
    since: np.ndarray
    alone: np.ndarray
    after: np.ndarray
    ran: np.ndarray  # the supervisor ran the RETRY (it refuses one past its budget or without a target)
    episode: np.ndarray
    successes: np.ndarray  # one per episode: the selector's own outcome
    # where labelled, what the observation does not show (``SelectorEnv.label_decision``; NaN elsewhere,
    # and in labels collected before they were recorded): the named objects' largest displacement (m)
    # and tilt (rad) since the start, and whether the hand held something
    displaced: np.ndarray
    tilted: np.ndarray
    holding: np.ndarray

    @property
    def won(self) -> np.ndarray:
        return self.labelled & self.ran & ~self.alone & self.after

    @property
    def lost(self) -> np.ndarray:
        return self.labelled & self.ran & self.alone & ~self.after

    def save(self, path: Path) -> None:
        save_arrays(path, vars(self))

    @classmethod
    def load(cls, path: Path) -> Labels:
        columns = load_arrays(path)
        unrecorded = np.full(len(columns["actions"]), np.nan)
        return cls(**{"displaced": unrecorded, "tilted": unrecorded, "holding": unrecorded, **columns})

    @classmethod
    def of(cls, episodes: list[tuple[list[tuple], bool]], start: int = 0) -> Labels:
        """``episodes``: each one's decisions (``ROW``) and its outcome."""
        rows = [(*row, start + index) for index, (decisions, _) in enumerate(episodes) for row in decisions]
        columns = dict(zip((*ROW, "episode"), map(np.array, zip(*rows)))) if rows else {}
        return cls(**{key: columns.get(key, np.zeros(0)).astype(dtype) for key, dtype in COLUMN_TYPES.items()},
                   successes=np.array([success for _, success in episodes], dtype=bool))

    @staticmethod
    def join(first: Labels, second: Labels) -> Labels:
        return Labels(**{key: np.concatenate([getattr(first, key), getattr(second, key)]) for key in vars(first)})


def collect_labels(model: PPO, config: ImproveConfig, episodes: int, seed: int) -> list[tuple[list[tuple], bool]]:
    """Run ``episodes`` episodes with the selector deciding, labelling every decision within the
    window (``SelectorEnv.label_decision``). Ctrl-C returns the episodes finished so far."""
    venv = SubprocVecEnv([functools.partial(make_env, config.env) for _ in range(config.envs)], start_method="spawn")
    venv.seed(seed)
    running: list[list[tuple]] = [[] for _ in range(config.envs)]
    finished: list[tuple[list[tuple], bool]] = []
    try:
        with stop_on_interrupt("stopping after the current decision (Ctrl-C again to stop now)") as stop:
            obs = venv.reset()
            while len(finished) < episodes and not stop.is_set():
                labels = venv.env_method("label_decision", config.window)
                actions, _ = model.predict(obs, deterministic=True)
                next_obs, _, dones, infos = venv.step(actions)
                for i, label in enumerate(labels):
                    label = {"observations": obs[i], "actions": int(actions[i]), "labelled": label is not None,
                             **(label or UNLABELLED)}
                    running[i].append(tuple(label[key] for key in ROW))
                    if dones[i]:
                        finished.append((running[i], bool(infos[i]["is_success"])))
                        running[i] = []
                obs = next_obs
    finally:
        venv.close()
    return finished[:episodes]


def fit(policy, labels: Labels, config: ImproveConfig) -> dict:
    """Fit the actor (cross-entropy; the value head is left as it is) to RETRY where a RETRY won,
    EXECUTE where it lost, and the selector's own action elsewhere. Reported: the selector before,
    and out of fold (each episode's decisions judged by a fit on the other folds' episodes)."""
    targets = labels.actions.copy()
    targets[labels.won], targets[labels.lost] = RETRY, EXECUTE
    weights = np.where(labels.won | labels.lost, config.decisive_weight, 1.0).astype(np.float32)
    episodes = np.random.default_rng(config.seed).permutation(np.unique(labels.episode))
    p_retry, asks = np.zeros(len(targets)), np.zeros(len(targets), dtype=bool)
    for fold in np.array_split(episodes, min(config.folds, len(episodes))) if len(episodes) > 1 else ():
        held = np.isin(labels.episode, fold)
        trial = copy.deepcopy(policy)
        _train(trial, labels.observations[~held], targets[~held], weights[~held], config)
        p_retry[held], asks[held] = _predict(trial, labels.observations[held])
    before = _predict(policy, labels.observations)
    _train(policy, labels.observations, targets, weights, config)
    return {"episodes": int(len(episodes)), "folds": min(config.folds, len(episodes)) if len(episodes) > 1 else 0,
            "selector_success_rate": float(labels.successes.mean()), "decisions": int(len(labels.actions)),
            "labelled": int(labels.labelled.sum()), "retry_ran": int((labels.labelled & labels.ran).sum()),
            "retry_won": int(labels.won.sum()), "retry_lost": int(labels.lost.sum()),
            "episodes_with_a_win": int(len(np.unique(labels.episode[labels.won]))),
            "episodes_with_a_loss": int(len(np.unique(labels.episode[labels.lost]))),
            "failed_episodes_with_a_win": int(len(np.setdiff1d(np.unique(labels.episode[labels.won]),
                                                                 np.flatnonzero(labels.successes)))),
            "selector": _summary(labels, *before),
            "out_of_fold": _summary(labels, p_retry, asks) if len(episodes) > 1 else None,
            "unobserved": _unobserved(labels)}


def _train(policy, observations: np.ndarray, targets: np.ndarray, weights: np.ndarray, config: ImproveConfig) -> None:
    import torch

    obs, actions, weight = (torch.as_tensor(array, device=policy.device) for array in (observations, targets, weights))

    def loss(batch):
        _, log_prob, _ = policy.evaluate_actions(obs[batch], actions[batch])
        return -(weight[batch] * log_prob).sum() / weight[batch].sum()

    fit_minibatches(policy, len(obs), loss, config.epochs, config.batch_size, config.learning_rate, config.seed)


def _predict(policy, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The probability of RETRY and whether the greedy selector asks for a recovery."""
    import torch

    with torch.no_grad():
        dist = policy.get_distribution(torch.as_tensor(observations, device=policy.device))
        return dist.distribution.probs[:, RETRY].cpu().numpy(), dist.mode().cpu().numpy() != EXECUTE


def _summary(labels: Labels, p_retry: np.ndarray, asks: np.ndarray) -> dict:
    """How often the selector asks for a recovery where a RETRY won, where it lost, and elsewhere;
    how well its probability of RETRY ranks the wins (and the losses) among the labelled decisions
    (AUROC; 0.5: the observation does not tell them apart)."""
    won, lost, labelled = labels.won, labels.lost, labels.labelled

    def share(mask):
        return {"decisions": int(mask.sum()), "asks": round(float(asks[mask].mean()), 4) if mask.any() else None}

    return {"where_retry_won": share(won), "where_retry_lost": share(lost),
            "labelled_elsewhere": share(labelled & ~won & ~lost), "unlabelled": share(~labelled),
            "auroc_won": _finite(auroc(p_retry[labelled], won[labelled].astype(int))),
            "auroc_lost": _finite(auroc(p_retry[labelled], lost[labelled].astype(int)))}


def _unobserved(labels: Labels) -> dict:
    """How well what the observation does not show (the named objects' displacement and tilt since
    the start, a full hand) ranks the labelled decisions where a RETRY won, and where it lost (AUROC;
    far from 0.5 in either direction: the world tells them apart)."""
    recorded = labels.labelled & np.isfinite(labels.displaced)
    return {"decisions": int(recorded.sum()),
            **{f"auroc_{outcome}_by_{feature}": _finite(auroc(getattr(labels, feature)[recorded],
                                                               getattr(labels, outcome)[recorded].astype(int)))
               for outcome in ("won", "lost") for feature in ("displaced", "tilted", "holding")}}


def _finite(value: float) -> float | None:
    return None if np.isnan(value) else round(value, 4)


def improve_selector(config: ImproveConfig) -> Path:
    """Collect the labels still missing (resuming ``out/labels.npz``), fit, write the report and the
    improved selector; returns its path."""
    out = config.run_dir
    prepare_run(out, config.identity())  # refuses a directory whose labels were collected with other settings
    path = out / "labels.npz"
    selector = config.selector or shipped_selector(config.env.suite)
    model = PPO.load(selector, device=config.device)
    critic = critic_path(RecoveryOptions(critic=config.env.critic), config.env.suite)
    check_meta(getattr(model, "selector_meta", None), config.env.observation, selector, critic)
    check_advisor(model.selector_meta, config.env.observation, selector, config.env.rule)
    labels = Labels.load(path) if path.exists() else None
    while (done := len(labels.successes) if labels is not None else 0) < config.episodes:
        wanted = min(SAVE_EVERY, config.episodes - done)
        new = Labels.of(collect_labels(model, config, wanted, config.seed + 7919 * done), start=done)
        labels = new if labels is None else Labels.join(labels, new)
        labels.save(path)
        if len(new.successes) < wanted:
            raise KeyboardInterrupt
    report = {"selector": str(selector), "window": config.window, **fit(model.policy, labels, config)}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    final = out / "selector.zip"
    save_atomically(model, final)
    return final
