"""A kinematic robot without MuJoCo, for fast tests of the loop, supervisor, selectors and rollback.

It honours the ``RobotBackend`` contract the way LIBERO does, with made-up but consistent
kinematics: the first three joints move the grip point along x, y, z (``LINK`` metres per radian),
the fourth turns the hand about z. A policy action moves the grip point one period later by a fifth
of its goal shift (a unit action: 1 cm, the lag and gain ``critics.tracking`` fitted on LIBERO's
OSC), a ``JointTarget`` moves every joint at most ``JOINT_SPEED`` radians toward the target, and
the fingers open or close 5 mm per period.
Tests shove it (``push``), make it touch things (``touching``), refuse motions (``refuse``) and
read their success from a goal point: the task is "reach the goal". Objects (``objects``: name ->
pose, upright) are carried by closed fingers within ``GRASP_REACH`` of them and stay where they
are let go; tests knock them about by setting their poses.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from recovery.core.actions import POS_SCALE, ROT_SCALE
from recovery.core.robot import (Command, ContactInfo, EefPose, JointTarget, Observation, RobotBackend, StepResult,
                                 delta_action)
from vla_wrappers.base import Policy, PolicyOutput

LINK = 0.1  # m of grip-point travel per radian of the first three joints
BASE = np.array([0.0, 0.0, 1.0])
JOINT_SPEED = 0.1  # rad per period in a joint-space motion
FINGER_SPEED = 0.005  # m per period
FINGER_OPEN = 0.04
GOAL_TOLERANCE = 0.01  # m: success when the grip point is this close to the goal
GRASP_REACH = 0.02  # m: closed fingers this close to an object's origin carry it
UPRIGHT = np.array([0.0, 0.0, 0.0, 1.0])  # xyzw


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@dataclass
class _State:
    joints: np.ndarray = field(default_factory=lambda: np.zeros(7))
    fingers: float = FINGER_OPEN
    moving: np.ndarray = field(default_factory=lambda: np.zeros(4))  # the last action's motion, under way
    objects: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (7,) pose


class KinematicRobot(RobotBackend):
    supports_snapshot = True
    instruction = "reach the goal"

    def __init__(self, goal: np.ndarray | None = None, camera_size: int | None = None):
        self.goal = BASE + (np.array([0.2, 0.0, 0.0]) if goal is None else np.asarray(goal, dtype=np.float64))
        self.camera_size = camera_size
        self.touching: frozenset[str] = frozenset()  # what the tests say the hand touches
        self.refuse: str | None = None  # a reason to refuse every joint-space motion
        self.goal_counts_from = 0  # executed periods after which reaching the goal counts (0: from the start)
        self.commands: list[Command] = []  # every command executed, in order
        self._state = _State()

    # --- the episode ----------------------------------------------------------------------------
    def reset(self, init_index: int | None, seed: int) -> Observation:
        """A start pose drawn from ``seed`` (init_index shifts it): deterministic, as LIBERO's."""
        rng = np.random.default_rng([seed, (init_index if init_index is not None else -1) + 1])
        self._state = _State(joints=np.r_[rng.uniform(-0.05, 0.05, 3), 0.0, np.zeros(3)], objects=self._state.objects)
        self.commands = []
        self.touching = frozenset()
        return self.observe()

    @property
    def objects(self) -> dict[str, np.ndarray]:
        return self._state.objects

    def place(self, name: str, position) -> None:
        """Put an object (upright) at ``position``: a test's way of setting up or knocking about the world."""
        self._state.objects[name] = np.r_[np.asarray(position, dtype=np.float64), UPRIGHT]

    def push(self, offset: np.ndarray) -> None:
        """Shove the grip point by ``offset`` metres (a bump the policy did not command)."""
        self._state.joints[:3] += np.asarray(offset, dtype=np.float64) / LINK

    # --- RobotBackend ----------------------------------------------------------------------------
    def observe(self) -> Observation:
        pose = self.eef_pose()
        fingers = np.array([self._state.fingers, -self._state.fingers]) / 2
        yaw = self._state.joints[3]
        obs: Observation = {
            "state": np.r_[pose.pos, 0.0, 0.0, yaw, fingers],
            "eef_pos": pose.pos, "eef_quat": np.array([0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]),
            "gripper_qpos": fingers, "joint_pos": self._state.joints.copy(),
            "object_poses": {name: pose.copy() for name, pose in self._state.objects.items()},
        }
        if self.camera_size:
            obs["agentview_image"] = self._image(0)
            obs["wrist_image"] = self._image(1)
        return obs

    def step(self, command: Command) -> StepResult:
        state = self._state
        before = self.eef_pose().pos
        carried = [name for name, pose in state.objects.items()
                   if state.fingers < FINGER_OPEN / 2 and np.linalg.norm(pose[:3] - before) < GRASP_REACH]
        if isinstance(command, JointTarget):
            state.joints += np.clip(command.joints - state.joints, -JOINT_SPEED, JOINT_SPEED)
            state.moving = np.zeros(4)
            gripper = command.gripper
        else:
            action = delta_action(command)
            state.joints[:4] += state.moving
            state.moving = np.r_[0.2 * POS_SCALE * action[:3] / LINK, 0.2 * ROT_SCALE * action[5]]
            gripper = action[6]
        if gripper:
            state.fingers = float(np.clip(state.fingers - np.sign(gripper) * FINGER_SPEED, 0.0, FINGER_OPEN))
        for name in carried:
            state.objects[name][:3] += self.eef_pose().pos - before
        self.commands.append(command)
        return StepResult(self.observe(), self.success())

    def eef_pose(self) -> EefPose:
        return EefPose(BASE + LINK * self._state.joints[:3], _rot_z(self._state.joints[3]))

    def contacts(self) -> ContactInfo:
        return ContactInfo(6.0 if self.touching else 0.0, self.touching)

    def joint_move_problem(self, target: JointTarget, max_steps: int) -> str | None:
        return self.refuse

    def idle(self) -> None:
        self.commands.append(None)

    def snapshot(self, derived: bool = False) -> tuple[_State, Observation]:  # it derives nothing: always exact
        return copy.deepcopy(self._state), self.observe()

    def restore(self, snapshot: tuple[_State, Observation]) -> Observation:
        self._state = copy.deepcopy(snapshot[0])
        return self.observe()

    def success(self) -> bool:
        if len(self.commands) < self.goal_counts_from:
            return False
        return float(np.linalg.norm(self.eef_pose().pos - self.goal)) < GOAL_TOLERANCE

    def _image(self, camera: int) -> np.ndarray:
        """A frame whose brightness follows the grip point: enough for a video to show motion."""
        level = int(np.clip(128 + 600 * (self.eef_pose().pos[camera] - BASE[camera]), 0, 255))
        return np.full((self.camera_size, self.camera_size, 3), level, dtype=np.uint8)


class ReachPolicy(Policy):
    """Heads for a point with a proportional servo, gripper open (or, ``gripper=1``, closed): a base
    policy for the fake robot."""

    def __init__(self, robot: KinematicRobot, target: np.ndarray | None = None, gain: float = 1.0,
                 gripper: float = -1.0):
        self.robot, self.target, self.gain, self.gripper = robot, target, gain, gripper

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs: Observation) -> PolicyOutput:
        target = self.robot.goal if self.target is None else self.target
        move = np.clip(self.gain * (target - obs["eef_pos"]) / POS_SCALE, -1.0, 1.0)
        return PolicyOutput(np.tile(np.r_[move, 0.0, 0.0, 1e-9, self.gripper], (5, 1)))
