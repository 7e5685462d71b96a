"""Repair: put the world back the way a remembered state had it, with a goal-conditioned policy.

A physical rollback drives the arm back and leaves the objects where a disturbance left them. A
repair runs a repair policy (``vla_wrappers.repair``, behind the same ``Policy`` contract as the
base policies) toward a target from the nominal-state memory: the object poses, the grip pose and
the gripper of a remembered state. It restores one object, the *focus*: the object the gripper
held there if it holds it no longer; else, of the objects the task's instruction names, one
knocked over (tilted past ``RepairConfig.tipped``), which is stood up where it lies, else the one
displaced the most (beyond ``RepairConfig.displaced``), which is set back at its place. The repair
ends once the focus is back and the arm is at the target's pose, or when its step budget is spent;
control then returns to the base policy. The policy sees the current observation and
``obs["repair_target"]`` (``RepairTarget.observation``). The supervisor repairs only where there is
a focus (else the arm's rollback does all there is to do). Object poses come from the simulator in LIBERO and from
perception on a robot; where there are none, there is never a focus. The same comparisons of the world now
with a remembered one serve the physical rollback: whether the start still stands (``misplaced_named``) and
which moved object it follows (``followed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from recovery.core.features import quat_xyzw_to_matrix
from recovery.core.loop import Control
from recovery.core.modes import Mode
from recovery.core.robot import EefPose, Observation
from recovery.supervision.config import RepairConfig, RollbackConfig
from recovery.supervision.memory import NominalState
from recovery.supervision.rollback import Follow, RollbackResult
from vla_wrappers.broker import ChunkBroker

Poses = dict[str, np.ndarray]  # object name -> (7,) position + xyzw quaternion


def pose_change(before: np.ndarray, after: np.ndarray) -> tuple[float, float]:
    """(displacement m, tilt rad) from one pose to another. The tilt is how far the object's
    direction that pointed up at ``before`` now points away from up: which of its own axes that is
    varies from object to object (LIBERO's soup can stands on its local y)."""
    up_there = quat_xyzw_to_matrix(before[3:7])[2]  # the local direction that pointed up (a row of R)
    up_now = quat_xyzw_to_matrix(after[3:7]) @ up_there
    return float(np.linalg.norm(after[:3] - before[:3])), math.acos(float(np.clip(up_now[2], -1.0, 1.0)))


def finger_gap(state: np.ndarray) -> float:
    """The gripper's opening in metres: the two finger joints of the standard state."""
    return float(state[6] - state[7])


@dataclass(frozen=True)
class RepairTarget:
    """What a repair steers toward, as the repair policy receives it."""

    pose: EefPose  # the grip pose there
    state: np.ndarray  # (8,) the standard state there (eef position, axis-angle, fingers)
    object_poses: Poses  # the world there
    holding: bool  # the gripper held something there
    focus: str | None = None  # the object to put back; None: the world is as remembered (no repair needed)
    focus_held: bool = False  # the focus was in the hand there: it goes back into the hand, not onto its place
    focus_tipped: bool = False  # the focus lies knocked over: it is stood up where it lies

    @property
    def kind(self) -> str | None:
        """What the repair does to the focus (None: nothing to repair)."""
        if self.focus is None:
            return None
        return "pick up again" if self.focus_held else "stand up" if self.focus_tipped else "put back"

    def observation(self) -> dict:
        """The ``repair_target`` entry of the repair policy's observation (plain arrays, numbers and
        strings: it travels over the openpi wire too)."""
        return {"eef_pos": self.pose.pos, "eef_rot": self.pose.rot, "state": self.state,
                "object_poses": self.object_poses, "holding": float(self.holding), "focus": self.focus or "",
                "focus_held": float(self.focus_held), "focus_tipped": float(self.focus_tipped)}


def _held_there(target: NominalState, config: RepairConfig) -> str | None:
    """The object the gripper held at the target: the one nearest the grip point, if near enough."""
    poses = (target.observation or {}).get("object_poses", {})
    if not target.holding or not poses:
        return None
    near = {name: float(np.linalg.norm(pose[:3] - target.pose.pos)) for name, pose in poses.items()}
    name = min(near, key=near.get)
    return name if near[name] <= config.held else None


def in_hand(obs: Observation, name: str, config: RepairConfig) -> bool:
    pose = obs.get("object_poses", {}).get(name)
    return pose is not None and float(np.linalg.norm(pose[:3] - np.asarray(obs["eef_pos"]))) <= config.held


def named_in(instruction: str, name: str) -> bool:
    """Whether the instruction names the object: ``alphabet_soup_1`` is "alphabet soup",
    ``akita_black_bowl_1`` "black bowl" (a name's first word may be a brand); one word is never
    dropped from a two-word name ("tomato sauce" is not "bbq sauce")."""
    words = name.split("_")
    words = words[:-1] if len(words) > 1 and words[-1].isdigit() else words
    return any(" ".join(words[i:]) in instruction for i in range(max(len(words) - 1, 1)))


def misplaced(obs: Observation, target: NominalState, config: RepairConfig) -> dict[str, tuple[float, float]]:
    """Objects not as the target had them, with (displacement, tilt) against it: displaced beyond
    ``placed`` or knocked over past ``tipped``, and not in the hand now (what the hand carries comes
    back with it)."""
    then, now = (target.observation or {}).get("object_poses", {}), obs.get("object_poses", {})
    out = {}
    for name, pose in now.items():
        if name in then and not in_hand(obs, name, config):
            displacement, tilt = pose_change(then[name], pose)
            if displacement > config.placed or tilt > config.tipped:
                out[name] = (displacement, tilt)
    return out


def misplaced_named(obs: Observation, target: NominalState, instruction: str,
                    config: RepairConfig) -> dict[str, tuple[float, float]]:
    """``misplaced``, of the objects the instruction names only: the ones the task is about."""
    return {name: change for name, change in misplaced(obs, target, config).items() if named_in(instruction, name)}


def knocked_over(obs: Observation, start: NominalState, instruction: str, config: RepairConfig) -> tuple[str, ...]:
    """The objects the instruction names that lie knocked over now, against how they stood at the start."""
    return tuple(name for name, (_, tilt) in misplaced_named(obs, start, instruction, config).items()
                 if tilt > config.tipped)


def followed(obs: Observation, target: NominalState, config: RollbackConfig, tipped: float) -> Follow | None:
    """The object a physical rollback to ``target`` from ``obs`` follows (``RollbackConfig.follow``): the one
    nearest the grip point there, if near enough and under the hand, moved since and not knocked over (past
    ``tipped``). None for a target that held something: a rollback carrying it back brings it along."""
    if config.kind != "physical" or config.follow <= 0 or target.holding:
        return None
    then, now = (target.observation or {}).get("object_poses", {}), obs.get("object_poses", {})
    near = {name: float(np.linalg.norm(pose[:3] - target.pose.pos)) for name, pose in then.items() if name in now}
    if not near:
        return None
    name = min(near, key=near.get)
    over = float(np.linalg.norm(then[name][:2] - target.pose.pos[:2])) <= config.follow_over
    moved, tilt = pose_change(then[name], now[name])
    if near[name] > config.follow or not over or moved <= config.follow_moved or tilt > tipped:
        return None
    return Follow(name, now[name][:3] - then[name][:3])


def repair_target(obs: Observation, target: NominalState, instruction: str, config: RepairConfig) -> RepairTarget:
    """The target a repair from ``obs`` (with an empty hand) toward the remembered ``target`` steers
    to: its focus is None where the world there is the current one (see the module)."""
    seen = target.observation or {}
    goal = RepairTarget(target.pose, np.asarray(seen.get("state", np.zeros(8))), seen.get("object_poses", {}),
                        target.holding)
    held = _held_there(target, config)
    if held is not None and held in obs.get("object_poses", {}):
        return replace(goal, focus=held, focus_held=True)  # it was in the hand there: pick it up again
    named = {name: (displacement, tilt) for name, (displacement, tilt)
             in misplaced_named(obs, target, instruction, config).items()
             if displacement > config.displaced or tilt > config.tipped}
    if not named:
        return goal
    focus = max(named, key=lambda name: (named[name][1] > config.tipped, named[name][0]))  # knocked over first
    return replace(goal, focus=focus, focus_tipped=named[focus][1] > config.tipped)


def repaired(obs: Observation, pose: EefPose, goal: RepairTarget, config: RepairConfig) -> bool:
    """The focus is back (in the hand, if it was held there; at its place otherwise) and the arm is at
    the target's grip pose with the gripper as it was."""
    if goal.focus is not None:
        displacement, tilt = pose_change(goal.object_poses[goal.focus], obs["object_poses"][goal.focus])
        if goal.focus_held:
            if not in_hand(obs, goal.focus, config):
                return False
        elif tilt > config.tipped or (displacement > config.placed and not goal.focus_tipped):
            return False  # a stood-up object need not be at its place: upright, the base policy can take it
    pos_err, rot_err = pose.distance(goal.pose)
    open_enough = goal.holding or finger_gap(obs["state"]) >= finger_gap(goal.state) - config.opened
    return pos_err <= config.arm_pos_tol and rot_err <= config.arm_rot_tol and open_enough


class PolicyRepair:
    """A repair as the supervisor runs it (the ``Rollback`` contract): each control period, the repair
    policy's next action toward ``goal``, until ``repaired`` or the step budget is spent."""

    def __init__(self, target: NominalState, goal: RepairTarget, broker: ChunkBroker, config: RepairConfig):
        self.target, self.goal, self.broker, self.config = target, goal, broker, config
        self.steps, self._done = 0, False
        self._errors = (float("inf"), float("inf"))

    def next(self, obs: Observation, pose: EefPose, mode: Mode) -> Control | None:
        self._errors = pose.distance(self.goal.pose)
        self._done = repaired(obs, pose, self.goal, self.config)
        if self._done or self.steps >= self.config.max_steps:
            return None
        self.steps += 1
        return Control(self.broker.act({**obs, "repair_target": self.goal.observation()}), mode)

    def result(self) -> RollbackResult:
        details = {"repair": self.goal.focus, "repair_kind": self.goal.kind}
        return RollbackResult(self._done, self.steps, *self._errors, details=details)
