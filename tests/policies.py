"""Policies that misbehave on purpose, loaded by name (``tests.policies:Class``) like a user's own."""

from __future__ import annotations

import numpy as np

from vla_wrappers.base import Policy, PolicyOutput


class CrashOnSecondEpisode(Policy):
    """Raises inside the second episode it plays (a policy bug mid-evaluation)."""

    def __init__(self, backend):
        self.episodes = 0

    def reset(self, instruction: str) -> None:
        self.episodes += 1

    def infer(self, obs) -> PolicyOutput:
        if self.episodes == 2:
            raise RuntimeError("policy exploded on purpose")
        return PolicyOutput(np.zeros((1, 7)))


class CrashMidEpisode(Policy):
    """Serves three chunks of five still actions, then raises (a policy server that dies mid-episode)."""

    def __init__(self, backend):
        self.calls = 0

    def reset(self, instruction: str) -> None:
        self.calls = 0

    def infer(self, obs) -> PolicyOutput:
        self.calls += 1
        if self.calls == 4:
            raise ConnectionError("policy server went away on purpose")
        return PolicyOutput(np.tile([0.0] * 6 + [-1.0], (5, 1)))


class NaNPolicy(Policy):
    def __init__(self, backend):
        pass

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs) -> PolicyOutput:
        return PolicyOutput(np.full((4, 7), np.nan))


class CountingSlowPolicy(Policy):
    """Answers call n with actions filled with n; the first call takes ``FIRST_DELAY_S`` (a slow GPU)."""

    FIRST_DELAY_S = 1.5

    def __init__(self, backend=None):
        self.calls = 0

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs) -> PolicyOutput:
        import time

        self.calls += 1
        if self.calls == 1:
            time.sleep(self.FIRST_DELAY_S)
        return PolicyOutput(np.full((3, 7), self.calls / 100.0))
