"""What the supervisor knows about the arm: the latest input samples and their age, and how the
joint names it receives map onto the configured ones.

Thread-safe: ROS callbacks write, the control loop reads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.core.errors import RecoveryError


class StaleStateError(RecoveryError, RuntimeError):
    """An input older than the allowed age (or never received): hold, never act on it."""


class InputError(RecoveryError, ValueError):
    """An input message that cannot be used: joint names or counts that do not match the
    configuration, values that are not finite."""


def check_finite(value: Any) -> Any:
    """``value`` (an array, a number, or a tuple of them) if every number in it is finite; else InputError."""
    parts = value if isinstance(value, tuple) else (value,)
    if not all(np.all(np.isfinite(np.asarray(part, dtype=np.float64))) for part in parts):
        raise InputError(f"values are not finite (NaN or Inf): {[np.asarray(p).tolist() for p in parts]}")
    return value


@dataclass(frozen=True)
class JointMapper:
    """Picks the configured arm and finger joints, in configured order, out of a JointState.
    The message must name exactly the configured joints (any order) with one position each."""

    names: tuple[str, ...]
    finger_names: tuple[str, ...] = ()

    def split(self, names: list[str], positions, velocities=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(arm positions, arm velocities, finger positions); raises InputError."""
        expected = self.names + self.finger_names
        if len(names) != len(positions) or (len(velocities) and len(velocities) != len(names)):
            raise InputError(f"JointState has {len(names)} names but {len(positions)} positions and "
                                  f"{len(velocities)} velocities")
        if sorted(names) != sorted(expected):
            raise InputError(f"JointState names {list(names)} do not match the configured {list(expected)}")
        index = {n: i for i, n in enumerate(names)}
        arm = [index[n] for n in self.names]
        fingers = [index[n] for n in self.finger_names]
        pos = np.asarray(positions, dtype=np.float64)
        vel = np.asarray(velocities, dtype=np.float64) if len(velocities) else np.zeros(len(names))
        return pos[arm], vel[arm], pos[fingers]


@dataclass(frozen=True)
class Sample:
    value: Any
    stamp: float  # seconds, from the message header (the time it describes)


class ArmStateCache:
    """Latest sample per input, plus the latest message rejected for it. A rejected message makes
    its input unusable for the allowed age, even while good messages keep coming: two sources that
    disagree (a misconfigured second publisher beside the driver) leave the arm's state in doubt,
    so the supervisor holds and reports why until only good messages have come for that long."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, Sample] = {}
        self._rejected: dict[str, Sample] = {}  # the reason, and when

    def put(self, key: str, value: Any, stamp: float) -> None:
        with self._lock:
            self._samples[key] = Sample(value, stamp)

    def reject(self, key: str, reason: str, now: float) -> None:
        with self._lock:
            self._rejected[key] = Sample(reason, now)

    def latest(self, key: str) -> Any:
        with self._lock:
            sample = self._samples.get(key)
        return None if sample is None else sample.value

    def oldest(self, keys: tuple[str, ...]) -> float:
        """The stamp of the oldest of ``keys``' latest samples (-inf if one has none)."""
        with self._lock:
            return min((s.stamp if (s := self._samples.get(k)) else float("-inf")) for k in keys)

    def fresh(self, keys: tuple[str, ...], now: float, max_age: float) -> dict[str, Any]:
        """The values of ``keys``, each no older than ``max_age`` s; else StaleStateError."""
        with self._lock:
            samples = {k: self._samples.get(k) for k in keys}
            rejected = dict(self._rejected)
        for key, sample in samples.items():
            rejection = rejected.get(key)
            if rejection is not None and now - rejection.stamp <= max_age:
                raise StaleStateError(f"{key} rejected: {rejection.value} ({now - rejection.stamp:.3f} s ago)")
            if sample is None:
                raise StaleStateError(f"no {key} received yet")
            age = now - sample.stamp
            if age > max_age:
                raise StaleStateError(f"{key} is {age:.3f} s old (allowed {max_age} s)")
        return {k: s.value for k, s in samples.items()}
