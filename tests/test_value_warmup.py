"""``--value-warmup``: the first updates of a run move the value head and leave the actor as it was
(real stable-baselines3 PPO on Gymnasium's CartPole, so that it runs in the fast tier)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from stable_baselines3 import PPO

from recovery.learning.train import TrainSelectorConfig, TrainSettingsError, ValueWarmup


def _actor_and_critic(model: PPO) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    policy = model.policy
    actor = [*policy.mlp_extractor.policy_net.parameters(), *policy.action_net.parameters()]
    critic = [*policy.mlp_extractor.value_net.parameters(), *policy.value_net.parameters()]
    return [p.detach().clone() for p in actor], [p.detach().clone() for p in critic]


def _moved(before: list[torch.Tensor], after: list[torch.Tensor]) -> bool:
    return any(not torch.equal(b, a) for b, a in zip(before, after))


def test_the_warmup_updates_fit_the_value_head_and_leave_the_actor_alone():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, n_epochs=2, learning_rate=1e-3,
                seed=0, device="cpu")
    actor, critic = _actor_and_critic(model)
    model.learn(128, callback=ValueWarmup(decisions=128))  # two updates, both in the warm-up
    warmed_actor, warmed_critic = _actor_and_critic(model)
    assert not _moved(actor, warmed_actor) and _moved(critic, warmed_critic)
    model.learn(64, callback=ValueWarmup(decisions=128), reset_num_timesteps=False)  # a resumed run: past it
    assert _moved(warmed_actor, _actor_and_critic(model)[0])


def test_the_warmup_updates_run_at_their_own_learning_rate_and_then_at_ppos():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, n_epochs=1, learning_rate=1e-4,
                seed=0, device="cpu")
    warmup = ValueWarmup(decisions=64, learning_rate=1e-2)
    model.learn(64, callback=warmup)
    assert model.policy.optimizer.param_groups[0]["lr"] == 1e-2
    model.learn(64, callback=warmup, reset_num_timesteps=False)
    assert model.policy.optimizer.param_groups[0]["lr"] == 1e-4


def test_a_warmup_rate_without_a_warmup_is_refused():
    with pytest.raises(TrainSettingsError, match="--value-warmup DECISIONS"):
        TrainSelectorConfig(value_warmup_lr=1e-3)
    assert TrainSelectorConfig(value_warmup=64, value_warmup_lr=1e-3).value_warmup_lr == 1e-3
