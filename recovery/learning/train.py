"""``recovery train-selector``: PPO (stable-baselines3) over parallel selector environments.

A run lives in one directory: ``warm_start.npz`` / ``warm_start.json`` (the rule selector's
decisions the actor is cloned from before PPO starts, and how well the clone agrees with it),
``checkpoint.zip`` (written atomically every few thousand decisions; rerunning the same command
resumes from it), ``selector.zip`` (the final model, what ``recovery eval --selector ppo
--selector-path`` reads), ``config.json``, TensorBoard logs under ``tb/``, ``curve.csv`` and
``learning_curve.png`` (success and mode frequencies against decisions), ``throughput.json``
(decisions per second, share of wall time in simulation vs the PPO update), and the evaluation
callback's ``evaluations.npz`` / ``best/``.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, EvalCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import FloatSchedule
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from recovery.core.errors import RecoveryError
from recovery.core.interrupts import stop_on_interrupt
from recovery.learning.curve import plot_learning_curve
from recovery.learning.env import SelectorEnv, SelectorEnvConfig
from recovery.learning.ray_envs import RayVecEnv
from recovery.learning.run_dir import append_curve_row, prepare_run, save_atomically, truncate_curve
from recovery.learning.warm_start import WarmStartConfig, warm_start
from recovery.ray_cluster import connect
from recovery.supervision.build import critic_path
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.observation import LEARNED_MODES, ObservationLayout
from recovery.supervision.ppo import check_advisor, check_meta, selector_meta
from vla_wrappers.base import resolve_device


@dataclass(frozen=True)
class PPOConfig:
    """The source's PPO settings (lr, gamma, clip, value and entropy coefficients); the rollout
    sizes are ours, sized for CPU machines."""

    learning_rate: float = 1e-4
    gamma: float = 0.99
    clip_range: float = 0.2
    vf_coef: float = 0.1
    ent_coef: float = 0.01
    gae_lambda: float = 0.95
    n_steps: int = 256  # decisions per environment between updates
    batch_size: int = 64
    n_epochs: int = 10
    target_kl: float | None = None  # stop an update's epochs once the policy moved this far (None: the source's)
    net_arch: tuple[int, ...] = (128, 128)

    def hyperparameters(self) -> dict:
        """What PPO takes besides its network: also set on a resumed checkpoint (one started from
        another run's, such as a shipped selector, would otherwise keep that run's)."""
        return {key: value for key, value in asdict(self).items() if key != "net_arch"}


BASELINES = ("value", "none")


class TrainSettingsError(RecoveryError, ValueError):
    """Settings that contradict one another."""


@dataclass(frozen=True)
class TrainSelectorConfig:
    env: SelectorEnvConfig = field(default_factory=SelectorEnvConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    decisions: int = 20_000  # total high-level decisions (PPO timesteps) over all environments
    value_warmup: int = 0  # decisions (the model's, a starting checkpoint's included) whose updates fit only V
    value_warmup_lr: float | None = None  # the learning rate of those updates (None: PPO's)
    baseline: str = "value"  # what the advantages subtract: "value" (PPO's value head) or "none" (see NoBaseline)
    envs: int = 2  # parallel environments (processes, or Ray actors with ray_address)
    seed: int = 0
    out: Path = Path("selectors/libero_object")
    checkpoint_every: int = 2_000  # decisions
    eval_every: int = 5_000  # decisions; 0: no evaluation callback
    eval_episodes: int = 10
    device: str = "auto"
    ray_address: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.value_warmup_lr is not None and not self.value_warmup:
            raise TrainSettingsError("--value-warmup-lr is the rate of the --value-warmup updates: name how many "
                                     "decisions they last (--value-warmup DECISIONS)")
        if self.baseline not in BASELINES:
            raise TrainSettingsError(f"baseline must be one of {BASELINES}, got {self.baseline!r}")
        if self.baseline == "none" and self.value_warmup:
            raise TrainSettingsError("--value-warmup fits the value head for the advantages, which --baseline none "
                                     "does not use: drop one of them")

    def identity(self) -> dict:
        """What must match for a rerun to resume the same run (the length may grow)."""
        data = json.loads(json.dumps(asdict(self), default=str))
        for key in ("decisions", "progress", "device", "ray_address", "eval_every", "eval_episodes",
                    "checkpoint_every"):
            data.pop(key)
        data["warm_start"].pop("teacher_data")  # once joined they are the run's own warm_start.npz
        return data


def make_env(config: SelectorEnvConfig) -> Monitor:
    """Top-level so that worker processes and Ray actors can build it from a pickle."""
    import torch

    torch.set_num_threads(1)  # one simulator per core; the policy nets are tiny
    return Monitor(SelectorEnv(config))


def make_vec_env(config: TrainSelectorConfig) -> VecEnv:
    env_fns = [functools.partial(make_env, config.env) for _ in range(config.envs)]
    if config.ray_address:
        return RayVecEnv(env_fns, config.ray_address)
    if config.envs == 1:
        return DummyVecEnv(env_fns)
    return SubprocVecEnv(env_fns, start_method="spawn")  # MuJoCo/EGL state must not be forked


class RunRecorder(BaseCallback):
    """Learning curve, throughput, periodic atomic checkpoints, progress bar."""

    def __init__(self, config: TrainSelectorConfig, out: Path, stop: threading.Event):
        super().__init__()
        self.config, self.out, self.stop = config, out, stop
        self._next_checkpoint = 0
        self._collect = self._update = 0.0
        self._rollout_started = self._rollout_ended = None

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        self._start_decisions = self.num_timesteps
        self._next_checkpoint = self.num_timesteps + self.config.checkpoint_every
        self._wall = time.perf_counter()
        self._bar = tqdm(total=self.config.decisions, initial=self.num_timesteps, unit="decision",
                         disable=not self.config.progress, desc="train-selector")
        self._reset_rollout_stats()

    def _reset_rollout_stats(self) -> None:
        self._modes: Counter[str] = Counter()
        self._successes: list[bool] = []
        self._returns: list[float] = []
        self._against_alone: Counter[str] = Counter()  # won / lost, where the counterfactual was played

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        if self._rollout_ended is not None:
            self._update += now - self._rollout_ended
        self._rollout_started = now

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            self._modes[info.get("mode", "EXECUTE")] += 1
            if "is_success" in info:
                self._successes.append(bool(info["is_success"]))
                self._returns.append(float(info["episode"]["r"]) if "episode" in info else float("nan"))
                if info.get("left_alone") is not None and info["left_alone"] != info["is_success"]:
                    self._against_alone["won" if info["is_success"] else "lost"] += 1
        self._bar.update(self.training_env.num_envs)
        if self.num_timesteps >= self._next_checkpoint:
            save_atomically(self.model, self.out / "checkpoint.zip")
            self._next_checkpoint += self.config.checkpoint_every
        return not self.stop.is_set()  # False ends learn() between two decisions

    def _on_rollout_end(self) -> None:
        now = time.perf_counter()
        self._collect += now - self._rollout_started
        self._rollout_ended = now
        total = sum(self._modes.values()) or 1
        row = {"decisions": self.num_timesteps, "episodes": len(self._successes),
               "success_rate": float(np.mean(self._successes)) if self._successes else "",
               "mean_return": float(np.mean(self._returns)) if self._returns else "",
               **{f"share_{m.name}": self._modes[m.name] / total for m in LEARNED_MODES},
               **({"recovery_won": self._against_alone["won"], "recovery_lost": self._against_alone["lost"]}
                  if self.config.env.reward.counterfactual else {})}
        append_curve_row(self.out / "curve.csv", row)
        self._reset_rollout_stats()

    def _on_training_end(self) -> None:
        if self._rollout_ended is not None:
            self._update += time.perf_counter() - self._rollout_ended
        self._bar.close()
        wall = time.perf_counter() - self._wall
        decisions = self.num_timesteps - self._start_decisions
        (self.out / "throughput.json").write_text(json.dumps({
            "envs": self.config.envs, "ray": bool(self.config.ray_address), "decisions": decisions,
            "wall_s": round(wall, 2), "decisions_per_s": round(decisions / wall, 3) if wall else None,
            "simulation_share": round(self._collect / wall, 4) if wall else None,
            "update_share": round(self._update / wall, 4) if wall else None,
            "note": "simulation = collecting rollouts (base policy, critics, rollback, evaluation episodes); "
                    "update = the PPO gradient steps",
        }, indent=2) + "\n")


class ValueWarmup(BaseCallback):
    """Freezes the actor in the updates until the model has made ``decisions`` decisions (its
    ``num_timesteps``, which a resumed checkpoint carries): a value head fitted to another reward (a
    clone's, or before ``--counterfactual``) first learns the new return, so that the advantages that then
    move the policy are not that return's raw noise. ``learning_rate``: those updates' own (PPO's small
    one moves a value head too slowly to catch up with a changed return)."""

    def __init__(self, decisions: int, learning_rate: float | None = None):
        super().__init__()
        self.decisions, self.learning_rate = decisions, learning_rate

    def _on_rollout_end(self) -> None:  # the update of this rollout follows
        frozen = self.num_timesteps <= self.decisions
        policy = self.model.policy
        for actor in (policy.mlp_extractor.policy_net, policy.action_net):
            actor.requires_grad_(not frozen)  # Adam leaves a parameter without a gradient as it is
        if self.learning_rate is not None:  # PPO's train() sets the optimizer's rate from this schedule
            self.model.lr_schedule = FloatSchedule(self.learning_rate if frozen else self.model.learning_rate)

    def _on_step(self) -> bool:
        return True


class NoBaseline(BaseCallback):
    """Advantages with nothing subtracted: each decision's own discounted (GAE-lambda) return, as in
    REINFORCE; neither the value head nor the batch's mean (``train_selector`` turns PPO's normalisation
    off). With gamma 0 and ``--counterfactual intervention`` a recovery's advantage is then its cost plus
    what it changed (-0.12 for one that changed nothing, +1.88 for one that won the episode; normalised, the
    two would weigh alike in a batch holding only one of them), an EXECUTE's the cost of a decision. For a
    return made of rare +-2 payments that the observation hardly predicts: the value heads we trained for it
    fitted it worse than a constant (explained variance below 0), so subtracting them only added noise. The
    value head still learns that return (its explained variance is still logged); it no longer moves the actor."""

    def _on_rollout_end(self) -> None:  # after PPO computed its advantages, before the update reads them
        import torch

        buffer = self.model.rollout_buffer
        values = buffer.values.copy()
        buffer.values[:] = 0.0
        buffer.compute_returns_and_advantage(torch.zeros(buffer.n_envs), self.locals["dones"])
        buffer.values = values  # returns = advantages: the return the value head is fitted to, unbootstrapped

    def _on_step(self) -> bool:
        return True


def train_selector(config: TrainSelectorConfig) -> Path:
    """Train (or resume) and return the final selector's path."""
    import torch

    torch.set_num_threads(1)
    if config.ray_address:
        connect(config.ray_address, num_cpus=config.envs)  # an unreachable cluster fails before anything is written
    out = Path(config.out)
    identity, defaults = config.identity(), TrainSelectorConfig().identity()
    resume_from = prepare_run(out, identity, defaults)
    layout = config.env.observation
    critic = critic_path(RecoveryOptions(critic=config.env.critic), config.env.suite)
    device = resolve_device(config.device)
    venv = make_vec_env(config)
    eval_env = None
    try:
        if resume_from:
            model = PPO.load(resume_from, env=venv, device=device, custom_objects=config.ppo.hyperparameters())
            model.tensorboard_log = str(out / "tb")  # a checkpoint copied from another run names that run's
            check_meta(getattr(model, "selector_meta", None), layout, resume_from, critic)
            check_advisor(model.selector_meta, layout, resume_from, config.env.rule)
            truncate_curve(out / "curve.csv", model.num_timesteps)
        else:
            model = PPO("MlpPolicy", venv, **config.ppo.hyperparameters(), seed=config.seed, device=device,
                        policy_kwargs={"net_arch": list(config.ppo.net_arch)}, tensorboard_log=str(out / "tb"))
            model.selector_meta = selector_meta(layout, critic, config.env.rule)  # saved with every checkpoint
            if config.warm_start.decisions or config.warm_start.teacher_data:
                warm_start(model, venv, config.warm_start, out, config.seed, identity, defaults)
        model.normalize_advantage = config.baseline == "value"  # a checkpoint keeps the run's it came from
        callbacks = [ValueWarmup(config.value_warmup, config.value_warmup_lr)] if config.value_warmup else []
        if config.baseline == "none":
            callbacks.append(NoBaseline())
        if config.eval_every:
            eval_env = DummyVecEnv([functools.partial(make_env, config.env)])
            eval_env.seed(config.seed + 1_000_003)
            callbacks.append(EvalCallback(eval_env, n_eval_episodes=config.eval_episodes,
                                          eval_freq=max(config.eval_every // config.envs, 1), log_path=str(out),
                                          best_model_save_path=str(out / "best"), verbose=0))
        remaining = config.decisions - model.num_timesteps
        if remaining > 0:
            with stop_on_interrupt("stopping after the current decision (Ctrl-C again to stop now)") as stop:
                model.learn(remaining, callback=CallbackList([RunRecorder(config, out, stop), *callbacks]),
                            reset_num_timesteps=resume_from is None, tb_log_name="ppo")
            save_atomically(model, out / "checkpoint.zip")
            if stop.is_set():
                raise KeyboardInterrupt
        final = out / "selector.zip"
        save_atomically(model, final)
    finally:
        venv.close()
        if eval_env is not None:
            eval_env.close()
    plot_learning_curve(out / "curve.csv", out / "learning_curve.png")
    return final
