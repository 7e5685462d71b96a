"""Warm start: clone a teacher selector into the PPO actor (and its value head) before PPO explores.

From a random actor, PPO spends its first thousands of decisions intervening at random, and with a
sparse end-of-episode reward it settled on "always EXECUTE" in the budgets a CPU machine affords.
The rule already raises success under disturbance; starting from its clone, PPO improves on a
working selector instead of rediscovering it. The teacher's decisions are collected in the same
selector environments PPO trains in, so the clone sees exactly the observations PPO will.

The teacher is the rule, or the simulation-only disturbance oracle (``sim.oracle``: told when the
burst ended, it rolls back right after it): a privileged teacher whose decisions the clone must
infer from what the selector sees, so the clone can detect better than the rule does. Where the rule
decides better than the oracle under some disturbance (libero_spatial's ``gripper_open``: 282 of 500
episodes against 254, ``reports/selector_oracle.md``), the oracle can hand those episodes to the rule
from the disturbance's onset on (``rule_teaches``).

Collections from several runs (other seeds: other sampled layouts; other disturbance mixes) can be
joined and cloned at once (``teacher_data``), as long as their observations and returns mean the
same: the shipped libero_object selector is a clone of three such collections.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from recovery.core.errors import RecoveryError
from recovery.core.files import load_arrays, save_arrays
from recovery.learning.run_dir import differing, saved_settings
from recovery.supervision.observation import LEARNED_MODES
from sim.disturbances import DisturbanceConfig


TEACHERS = ("rule", "oracle")
# the environment settings two joined collections may differ in: which episodes they drew, not what a decision sees
JOINABLE_ENV_SETTINGS = ("tasks", "disturbances", "disturbed_share", "task_repeats")


class TeacherDataError(RecoveryError, ValueError):
    """Teacher decisions to join are missing or were collected with other settings."""


@dataclass(frozen=True)
class WarmStartConfig:
    """``rule``: the rule selector whose advice the observation holds; ``oracle``: the disturbance
    oracle (``SelectorEnv.teacher_advice``)."""

    teacher: str = "rule"
    rule_teaches: tuple[str, ...] = ()  # with the oracle: disturbances whose episodes the rule teaches from their onset
    decisions: int = 2_000  # teacher decisions collected over all environments; 0: no warm start
    epochs: int = 200
    batch_size: int = 256
    learning_rate: float = 1e-3
    held_out: float = 0.2  # share of episodes kept out of fitting, to report agreement with the teacher
    teacher_data: tuple[str, ...] = ()  # run directories whose collections are joined and cloned instead of collecting

    def __post_init__(self) -> None:
        if self.teacher not in TEACHERS:
            raise ValueError(f"unknown warm-start teacher {self.teacher!r}; valid: {', '.join(TEACHERS)}")
        if self.rule_teaches and self.teacher != "oracle":
            raise ValueError("rule_teaches hands the oracle's episodes under some disturbances to the rule: it needs "
                             f"the oracle as the teacher, not {self.teacher!r}")
        for name in self.rule_teaches:
            if DisturbanceConfig(name).name == "none":  # an unknown name fails there
                raise ValueError("rule_teaches names disturbances; nominal episodes are the oracle's (it says EXECUTE)")


def teachers_by_disturbance(settings: dict) -> dict[str, str]:
    """Who taught the episodes of each kind a run's saved settings collected ("none": the nominal ones)."""
    teacher, ruled = settings["warm_start"]["teacher"], settings["warm_start"].get("rule_teaches", ())
    return {name: "rule" if name in ruled else teacher for name in ("none", *settings["env"]["disturbances"])}


@dataclass
class TeacherDecisions:
    """Observations, the teacher's actions and discounted returns, grouped by episode."""

    observations: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episode: np.ndarray  # index of the episode each decision belongs to
    successes: np.ndarray  # one flag per episode

    def save(self, path: Path) -> None:
        save_arrays(path, vars(self))

    @classmethod
    def load(cls, path: Path) -> TeacherDecisions:
        return cls(**load_arrays(path))


def collect(venv: VecEnv, config: WarmStartConfig, gamma: float) -> TeacherDecisions:
    """Let the teacher decide in every environment until ``config.decisions`` decisions of finished
    episodes are in hand (an episode cut short by the count is dropped: its return is unknown)."""
    obs = venv.reset()
    running: list[list[tuple[np.ndarray, int, float]]] = [[] for _ in range(venv.num_envs)]
    episodes: list[list[tuple[np.ndarray, int, float]]] = []
    successes: list[bool] = []
    finished = 0
    while finished < config.decisions:
        advice = venv.env_method("teacher_advice", config.teacher, config.rule_teaches)
        actions = np.array([LEARNED_MODES.index(mode) for mode in advice])
        next_obs, rewards, dones, infos = venv.step(actions)
        for i in range(venv.num_envs):
            running[i].append((obs[i], int(actions[i]), float(rewards[i])))
            if dones[i]:
                episodes.append(running[i])
                successes.append(bool(infos[i].get("is_success")))
                finished += len(running[i])
                running[i] = []
        obs = next_obs
    rows = []
    for index, episode in enumerate(episodes):
        returns, ret = [], 0.0
        for _, _, reward in reversed(episode):
            ret = reward + gamma * ret
            returns.append(ret)
        rows += [(o, a, g, index) for (o, a, _), g in zip(episode, reversed(returns))]
    return TeacherDecisions(
        observations=np.stack([r[0] for r in rows]).astype(np.float32), actions=np.array([r[1] for r in rows]),
        returns=np.array([r[2] for r in rows], dtype=np.float32), episode=np.array([r[3] for r in rows]),
        successes=np.array(successes))


def join(parts: list[TeacherDecisions]) -> TeacherDecisions:
    """One collection of several; episode indices stay distinct."""
    offsets = np.cumsum([0] + [len(part.successes) for part in parts[:-1]])
    return TeacherDecisions(
        observations=np.concatenate([part.observations for part in parts]),
        actions=np.concatenate([part.actions for part in parts]),
        returns=np.concatenate([part.returns for part in parts]),
        episode=np.concatenate([part.episode + offset for part, offset in zip(parts, offsets)]),
        successes=np.concatenate([part.successes for part in parts]))


def load_collections(run_dirs: tuple[str, ...], identity: dict, defaults: dict | None = None) -> TeacherDecisions:
    """Join the ``warm_start.npz`` of earlier ``train-selector`` runs, refusing one whose observation,
    teacher or returns differ from this run's ``identity`` (``TrainSelectorConfig.identity``); a
    teacher differs where the two name another one for a kind of episode both drew (a burst-only
    collection joins one whose ``gripper_open`` episodes the rule taught);
    ``defaults``: a default run's identity, for the settings an older run's file lacks."""
    parts = []
    for run in map(Path, run_dirs):
        data, saved = run / "warm_start.npz", run / "config.json"
        if not (data.exists() and saved.exists()):
            raise TeacherDataError(f"{run} holds no collected teacher decisions (warm_start.npz and config.json of a "
                                   "train-selector run with --warm-start)")
        source = saved_settings(saved, defaults)
        differ = differing(source["env"], identity["env"], ignore=JOINABLE_ENV_SETTINGS)
        taught, teaches = teachers_by_disturbance(source), teachers_by_disturbance(identity)
        if any(taught[name] != teaches[name] for name in taught.keys() & teaches.keys()):
            differ.append("teacher")
        if source["ppo"]["gamma"] != identity["ppo"]["gamma"]:
            differ.append("gamma")
        if differ:
            raise TeacherDataError(f"{run} collected its decisions with other settings ({', '.join(differ)} differ): "
                                   "its observations, teacher or returns would mean something else here")
        parts.append(TeacherDecisions.load(data))
    return join(parts)


def held_out(data: TeacherDecisions, share: float, seed: int) -> np.ndarray:
    """Which decisions belong to the ``share`` of episodes kept out of fitting (drawn with ``seed``)."""
    episodes = np.unique(data.episode)
    held = np.random.default_rng(seed).choice(episodes, size=int(round(len(episodes) * share)), replace=False)
    return np.isin(data.episode, held)


def clone(policy, data: TeacherDecisions, config: WarmStartConfig, seed: int = 0) -> dict:
    """Fit ``policy`` (an SB3 ActorCriticPolicy) to the teacher: cross-entropy on its actions, squared
    error of the value head on the discounted returns. Returns the agreement on held-out episodes."""
    import torch

    test = held_out(data, config.held_out, seed)
    train = ~test

    def tensors(mask):
        return (torch.as_tensor(data.observations[mask], device=policy.device),
                torch.as_tensor(data.actions[mask], device=policy.device),
                torch.as_tensor(data.returns[mask], device=policy.device))

    obs, actions, returns = tensors(train)

    def loss(batch):
        values, log_prob, _ = policy.evaluate_actions(obs[batch], actions[batch])
        return -log_prob.mean() + torch.nn.functional.mse_loss(values.flatten(), returns[batch])

    fit_minibatches(policy, len(obs), loss, config.epochs, config.batch_size, config.learning_rate, seed)
    held_obs, held_actions, _ = tensors(test)
    return {"teacher_decisions": int(len(data.actions)), "teacher_episodes": int(len(np.unique(data.episode))),
            "teacher_success_rate": float(data.successes.mean()),
            "teacher_intervention_share": float((data.actions != 0).mean()),
            "train": agreement(policy, obs, actions), "held_out": agreement(policy, held_obs, held_actions)}


def fit_minibatches(policy, rows: int, loss: Callable, epochs: int, batch_size: int, learning_rate: float,
                    seed: int, weight_decay: float = 0.0) -> None:
    """Adam over ``policy``'s parameters (AdamW's decoupled ``weight_decay``; at 0 the very steps of
    Adam), ``epochs`` passes over ``rows`` rows in shuffled minibatches (seeded), in training mode;
    ``loss(batch)``: the loss of the rows indexed by ``batch``."""
    import torch

    optimizer = torch.optim.AdamW(policy.parameters(), lr=learning_rate, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    policy.set_training_mode(True)
    for _ in range(epochs):
        for batch in torch.randperm(rows, generator=generator).split(batch_size):
            optimizer.zero_grad()
            loss(batch).backward()
            optimizer.step()
    policy.set_training_mode(False)


def agreement(policy, obs, actions) -> dict:
    """How often the greedy clone picks the teacher's mode, overall and where the teacher intervened."""
    import torch

    with torch.no_grad():
        predicted = policy.get_distribution(obs).mode()
    intervened = actions != 0
    return {"decisions": int(len(actions)), "agreement": float((predicted == actions).float().mean()),
            "teacher_interventions": int(intervened.sum()),
            "caught": float((predicted[intervened] != 0).float().mean()) if intervened.any() else None,
            "false_interventions": int(((predicted != 0) & ~intervened).sum())}


def warm_start(model, venv: VecEnv, config: WarmStartConfig, out: Path, seed: int, identity: dict,
               defaults: dict | None = None) -> dict:
    """Collect (or join ``config.teacher_data``, or reuse ``out/warm_start.npz`` of an interrupted run),
    clone, write the report."""
    cached = out / "warm_start.npz"
    if cached.exists():
        data = TeacherDecisions.load(cached)
    else:
        data = (load_collections(config.teacher_data, identity, defaults) if config.teacher_data
                else collect(venv, config, model.gamma))
        data.save(cached)
    report = {"teacher": config.teacher, "rule_teaches": list(config.rule_teaches),
              "joined_from": list(config.teacher_data),
              **clone(model.policy, data, config, seed)}
    (out / "warm_start.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
