"""Selector environments as Ray actors: a stable-baselines3 VecEnv whose environments live
anywhere on a Ray cluster. Each actor resets its environment itself when an episode ends, as
SB3's own vectorised environments do, and hands back the terminal observation in ``info``."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from recovery.ray_cluster import connect


class _EnvHost:
    """Runs inside a Ray actor."""

    def __init__(self, env_fn: Callable[[], gym.Env]):
        self.env = env_fn()

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.env.observation_space, self.env.action_space

    def reset(self, seed: int | None, options: dict | None) -> tuple[np.ndarray, dict]:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated or truncated
        if done:
            info["terminal_observation"] = obs
            info["TimeLimit.truncated"] = truncated and not terminated
            obs, info["reset_info"] = self.env.reset()
        return obs, reward, done, info

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        attr = getattr(self.env, name)
        return attr(*args, **kwargs) if callable(attr) else attr

    def set(self, name: str, value: Any) -> None:
        setattr(self.env, name, value)

    def is_wrapped(self, wrapper_class: type) -> bool:
        env = self.env
        while isinstance(env, gym.Wrapper):
            if isinstance(env, wrapper_class):
                return True
            env = env.env
        return False

    def close(self) -> None:
        self.env.close()


class RayVecEnv(VecEnv):
    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], address: str):
        self._ray = ray = connect(address, num_cpus=len(env_fns))
        host = ray.remote(num_cpus=1)(_EnvHost)
        self._actors = [host.remote(fn) for fn in env_fns]
        observation_space, action_space = ray.get(self._actors[0].spaces.remote())
        super().__init__(len(env_fns), observation_space, action_space)
        self._pending: list = []

    def reset(self):
        replies = self._ray.get([a.reset.remote(self._seeds[i], self._options[i]) for i, a in enumerate(self._actors)])
        self.reset_infos = [info for _, info in replies]
        self._reset_seeds()
        self._reset_options()
        return np.stack([obs for obs, _ in replies])

    def step_async(self, actions: np.ndarray) -> None:
        self._pending = [a.step.remote(action) for a, action in zip(self._actors, actions)]

    def step_wait(self):
        obs, rewards, dones, infos = zip(*self._ray.get(self._pending))
        return np.stack(obs), np.array(rewards, dtype=np.float32), np.array(dones), list(infos)

    def close(self) -> None:
        if self._actors:
            self._ray.get([a.close.remote() for a in self._actors])
            for actor in self._actors:
                self._ray.kill(actor)
            self._actors = []

    def _targets(self, indices) -> list:
        return [self._actors[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return self._ray.get([a.call.remote(attr_name, (), {}) for a in self._targets(indices)])

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        self._ray.get([a.set.remote(attr_name, value) for a in self._targets(indices)])

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        return self._ray.get([a.call.remote(method_name, method_args, method_kwargs) for a in self._targets(indices)])

    def env_is_wrapped(self, wrapper_class: type, indices=None) -> list[bool]:
        return self._ray.get([a.is_wrapped.remote(wrapper_class) for a in self._targets(indices)])
