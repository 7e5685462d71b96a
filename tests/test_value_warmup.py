"""What the value head does for the advantages: ``--value-warmup`` (the first updates of a run move the
value head and leave the actor as it was) and ``--baseline none`` (the advantages do without it). Real
stable-baselines3 PPO on Gymnasium's CartPole, so that it runs in the fast tier."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from recovery.learning.train import NoBaseline, TrainSelectorConfig, TrainSettingsError, ValueWarmup


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


@pytest.mark.parametrize("gamma", [0.0, 0.9])
def test_without_a_baseline_the_advantages_are_the_discounted_rewards(gamma):
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, n_epochs=1, gamma=gamma,
                gae_lambda=0.95, seed=0, device="cpu")
    model.learn(64, callback=NoBaseline())
    buffer = model.rollout_buffer  # after the update: flattened, one environment
    rewards, starts = buffer.rewards[:, 0], buffer.episode_starts[:, 0]
    expected, ahead = np.zeros_like(rewards), 0.0
    for step in reversed(range(len(rewards))):  # each step's return to its episode's end or the rollout's
        ends_here = step + 1 == len(rewards) or starts[step + 1]
        ahead = rewards[step] + (0.0 if ends_here else gamma * 0.95 * ahead)
        expected[step] = ahead
    np.testing.assert_allclose(buffer.advantages.ravel(), expected, rtol=1e-6)
    np.testing.assert_allclose(buffer.returns.ravel(), expected, rtol=1e-6)
    assert np.any(buffer.values != 0)  # the value head's predictions stay, for its explained variance


def test_no_baseline_leaves_nothing_for_a_value_warmup_to_do():
    with pytest.raises(TrainSettingsError, match="--baseline none"):
        TrainSelectorConfig(baseline="none", value_warmup=64)
    with pytest.raises(TrainSettingsError, match="baseline must be one of"):
        TrainSelectorConfig(baseline="mean")
