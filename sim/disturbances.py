"""Disturbances, each reproducible from the episode's seed and recorded in its results.

- ``action_noise``: the robust-execution paper's setting: one burst of Gaussian action noise per
  episode, 5 steps, magnitude 3.0 (then clipped to the action range), random onset.
- ``object_push``: the task's first object of interest is shoved sideways at the onset.
- ``object_shift``: at the onset, one of the task's objects of interest the hand does not hold is
  slid to a free spot ``shift_min``-``shift_max`` away, upright (someone moved it);
- ``object_tip``: at the onset, the first of them (what the task picks up) is laid on its side where it
  stands (knocked over).
  Both make the worlds a repair must put back (``recovery collect-repairs``).
- ``gripper_open``: once the policy has held the gripper closed for a while, it is forced open.
  (Its command is, for ``duration`` steps; the Panda's command moves a quarter of its range a step,
  so the grip slackens for a few steps: the fingers on libero_object's soup can opened 0.3 mm. What
  falls is what slips then.)
- ``obs_noise``: a burst of Gaussian noise on the observed positions (the policy sees it; physics not).
- ``action_jitter``: small Gaussian noise on every arm action, all episode long. Collecting
  demonstrations under it (DART) shows the expert correcting from states just off its path, while
  the recorded labels stay the expert's clean actions: imitation becomes far less brittle.

``DisturbedBackend`` wraps a LiberoBackend; recovery motion (``RECOVERY_MOTION``) is never disturbed
and does not run the disturbance's clock, which counts policy steps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from recovery.core.actions import GRIPPER_OPEN, validate_action
from recovery.core.errors import RecoveryError
from recovery.core.robot import RECOVERY_MOTION, Command, Observation, RobotBackend, StepResult

DISTURBANCES = ("none", "action_noise", "object_push", "gripper_open", "obs_noise", "action_jitter", "object_shift",
                "object_tip")
MOVES = ("object_shift", "object_tip")  # the disturbances that move an object by hand, once


class UnknownDisturbanceError(RecoveryError, ValueError):
    pass


@dataclass(frozen=True)
class DisturbanceConfig:
    name: str = "none"
    onset_min: int = 10  # policy steps; onset drawn uniformly from [onset_min, onset_max]
    onset_max: int = 80
    duration: int = 5
    magnitude: float = 3.0  # action noise std; obs noise std is magnitude * 1 cm
    push_speed: float = 0.6  # m/s given to the pushed object
    shift_min: float = 0.06  # m: object_shift's distance range
    shift_max: float = 0.15
    shift_clearance: float = 0.08  # m: the shifted object's origin at least this far from every other one
    hold_steps: int = 12  # gripper_open: closed this long counts as holding
    jitter_std: float = 0.1  # action_jitter: std on the 6 arm dimensions (unit action = 5 cm goal shift)
    dart: bool = False  # jitter every arm action as action_jitter does, on top of this disturbance (training data)

    def __post_init__(self) -> None:
        if self.name not in DISTURBANCES:
            raise UnknownDisturbanceError(f"unknown disturbance {self.name!r}; valid: {', '.join(DISTURBANCES)}")


@dataclass(frozen=True)
class DisturbanceClock:
    """Where the episode's disturbance stands: its step count, whether and when it fired, what it
    moved, its random draws. Saved beside a simulator snapshot to play an episode's future and come
    back to the present (``recovery.learning.counterfactual``); a snapshot rollback leaves it alone:
    the world goes back, the disturbance does not fire again."""

    t: int
    closed_for: int
    fired_at: int | None
    moved: str | None
    rng: dict


class DisturbedBackend(RobotBackend):
    """Applies one disturbance per episode to a LiberoBackend's policy steps."""

    def __init__(self, inner: RobotBackend, config: DisturbanceConfig, task_index: int):
        self.inner, self.config, self.task_index = inner, config, task_index
        self.supports_snapshot = inner.supports_snapshot
        self._obs: Observation = {}

    def __getattr__(self, name: str) -> Any:  # instruction, raw, flat_state, ...: the inner backend's
        return getattr(self.inner, name)

    @property
    def unwrapped(self) -> RobotBackend:
        return self.inner.unwrapped

    def reset(self, init_index: int | None, seed: int) -> Observation:
        self._obs = self.inner.reset(init_index, seed)
        self._rng = np.random.default_rng([seed, self.task_index, (init_index if init_index is not None else -1) + 1])
        self.onset = int(self._rng.integers(self.config.onset_min, self.config.onset_max + 1))
        self._t, self._closed_for, self._fired_at = -10, 0, None  # the 10 wait steps come first
        self._moved: str | None = None  # the object object_shift / object_tip moved (none: all were in the hand)
        return self._obs

    def record(self) -> dict:
        record = {"name": self.config.name, "onset": self.onset, "fired_at": self._fired_at,
                  "duration": self.config.duration, "magnitude": self.config.magnitude}
        return {**record, "moved": self._moved} if self.config.name in MOVES else record

    @property
    def steps_since_disturbance(self) -> int | None:
        """Policy steps since the disturbance ended, None before it did: what a perfect detector
        would know (sim/oracle.py)."""
        if self._fired_at is None or self._t < self._fired_at + self.config.duration:
            return None
        return self._t - (self._fired_at + self.config.duration)

    # --- RobotBackend ----------------------------------------------------------------------------
    def observe(self) -> Observation:
        return self._obs

    def step(self, command: Command) -> StepResult:
        if isinstance(command, RECOVERY_MOTION):
            result = self.inner.step(command)
            self._obs = result.observation
            return result
        action = validate_action(command)
        active = self._active(action)
        if (self.config.name == "action_jitter" or self.config.dart) and self._t >= 0:
            action = np.clip(action + np.r_[self.config.jitter_std * self._rng.standard_normal(6), 0.0], -1.0, 1.0)
        if active and self.config.name == "action_noise":
            action = np.clip(action + self.config.magnitude * self._rng.standard_normal(7), -1.0, 1.0)
        elif active and self.config.name == "gripper_open":
            action = np.r_[action[:6], GRIPPER_OPEN]
        elif active and self.config.name == "object_push" and self._t == self._fired_at:
            self._push()
        elif active and self.config.name in MOVES and self._t == self._fired_at:
            self._move_object(tip=self.config.name == "object_tip")
        result = self.inner.step(action)
        self._obs = result.observation
        if active and self.config.name == "obs_noise":
            self._obs = self._noisy(self._obs)
        self._t += 1
        return StepResult(self._obs, result.success)

    def eef_pose(self):
        return self.inner.eef_pose()

    def contacts(self):
        return self.inner.contacts()

    def snapshot(self, derived: bool = False):
        return self.inner.snapshot(derived)

    def restore(self, snapshot) -> Observation:
        self._obs = self.inner.restore(snapshot)
        return self._obs

    def clock(self) -> DisturbanceClock:
        return DisturbanceClock(self._t, self._closed_for, self._fired_at, self._moved,
                                copy.deepcopy(self._rng.bit_generator.state))

    def set_clock(self, clock: DisturbanceClock) -> None:
        self._t, self._closed_for, self._fired_at, self._moved = clock.t, clock.closed_for, clock.fired_at, clock.moved
        self._rng.bit_generator.state = copy.deepcopy(clock.rng)

    def close(self) -> None:
        self.inner.close()

    # --- the disturbance ---------------------------------------------------------------------------
    def _active(self, action: np.ndarray) -> bool:
        """True during the burst; the burst starts at the onset (gripper_open: at the onset or later,
        once the gripper has been closed for ``hold_steps``)."""
        if self.config.name == "none" or self._t < 0:
            return False
        self._closed_for = self._closed_for + 1 if action[6] > 0 else 0
        if self._fired_at is None:
            ready = self._t >= self.onset and (self.config.name != "gripper_open"
                                               or self._closed_for >= self.config.hold_steps)
            if not ready:
                return False
            self._fired_at = self._t
        return self._t < self._fired_at + self.config.duration

    def _push(self) -> None:
        env = self.inner.raw
        name = env.obj_of_interest[0]
        joint = env.objects_dict[name].joints[-1]
        angle = self._rng.uniform(0, 2 * np.pi)
        addr = env.sim.model.get_joint_qvel_addr(joint)
        env.sim.data.qvel[addr[0]:addr[0] + 3] = self.config.push_speed * np.array([np.cos(angle), np.sin(angle), 0.1])
        env.sim.forward()

    def _move_object(self, tip: bool) -> None:
        """Slide one of the task's objects (drawn from the episode's seed among those not in the hand)
        to a free spot, or lay it on its side where it stands."""
        env = self.inner.raw
        sim, grip = env.sim, self.inner.eef_pose().pos
        poses = {name: sim.data.body_xpos[env.obj_body_id[name]].copy() for name in env.objects_dict}
        candidates = env.obj_of_interest[:1] if tip else env.obj_of_interest  # tip what the task picks up
        free = [name for name in candidates if name in poses and np.linalg.norm(poses[name] - grip) > 0.06]
        if not free:
            return
        name = free[int(self._rng.integers(len(free)))]
        addr = sim.model.get_joint_qpos_addr(env.objects_dict[name].joints[-1])[0]
        if tip:
            angle = self._rng.uniform(0, 2 * np.pi)  # about a horizontal axis: wxyz of a quarter turn, then its own
            axis = np.array([np.cos(angle), np.sin(angle), 0.0]) * np.sin(np.pi / 4)
            turn = np.r_[np.cos(np.pi / 4), axis]
            qpos = sim.data.qpos[addr + 3:addr + 7].copy()
            sim.data.qpos[addr + 3:addr + 7] = _quat_multiply(turn, qpos)
            sim.data.qpos[addr + 2] += 0.03  # clear of the support while it falls onto its side
            sim.forward()
            self._moved = name
            return
        for _ in range(20):
            angle, distance = self._rng.uniform(0, 2 * np.pi), self._rng.uniform(self.config.shift_min,
                                                                                   self.config.shift_max)
            spot = poses[name][:2] + distance * np.array([np.cos(angle), np.sin(angle)])
            if all(np.linalg.norm(spot - pos[:2]) >= self.config.shift_clearance
                   for other, pos in poses.items() if other != name) and np.linalg.norm(spot - grip[:2]) > 0.1:
                sim.data.qpos[addr:addr + 2] = spot
                sim.forward()
                self._moved = name
                return

    def _noisy(self, obs: Observation) -> Observation:
        sigma = 0.01 * self.config.magnitude
        noisy = dict(obs)
        noisy["state"] = obs["state"] + np.r_[sigma * self._rng.standard_normal(3), np.zeros(5)]
        noisy["eef_pos"] = noisy["state"][:3]
        noisy["object_poses"] = {k: np.r_[v[:3] + sigma * self._rng.standard_normal(3), v[3:]]
                                 for k, v in obs["object_poses"].items()}
        return noisy


def _quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The product of two wxyz quaternions: ``a`` applied after ``b``."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])
