"""The LIBERO arm behaving like a real arm driver (no ROS here; ``sim_arm_node`` puts topics on it).

Each tick is one LIBERO control step. What moves the arm, by priority: the emergency stop (hold
still), a joint trajectory, the newest twist command not yet executed (each one moves the arm for
one control period, as a LIBERO action does; one older than ``command_timeout_s`` is dropped),
else hold still.

A joint trajectory is executed as a joint trajectory controller would follow it: the setpoint is
interpolated in time, and the operational-space controller tracks the grip-point pose of that
setpoint (forward kinematics on the simulator's own model). LIBERO's robot only takes OSC
commands, so this keeps its controller, gains and contact behaviour intact; the arm ends at the
goal pose (the joints agree up to the null space, which the OSC keeps near its nominal posture).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from recovery.core.actions import WAIT_ACTION, InvalidActionError
from recovery.core.loop import NUM_WAIT_STEPS
from recovery.core.robot import EefPose, Observation
from ros_nodes.config import SimArmConfig
from ros_nodes.convert import twist_to_action
from ros_nodes.trajectory import JointPath, sample
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import GRIP_SITE, LiberoBackend
from recovery.core.servo import servo_action
from sim.tasks import resolve_task

ARM_JOINTS = tuple(f"robot0_joint{i}" for i in range(1, 8))
HOLD = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1e-9])  # OSC keeps its orientation goal on an exact 0.0


@dataclass(frozen=True)
class TrajectoryEvent:
    state: str  # succeeded | aborted
    reason: str
    pos_error: float
    rot_error: float
    joint_error: float  # max |q - q_goal| over the arm joints, rad


@dataclass(frozen=True)
class Tick:
    obs: Observation
    joint_vel: np.ndarray
    contact_force: float
    success: bool
    event: TrajectoryEvent | None  # a trajectory that just ended


class SimArm:
    def __init__(self, config: SimArmConfig):
        self.config = config
        task = resolve_task(config.suite, config.task)
        self.instruction = task.instruction
        self.sim = LiberoBackend(task)
        d = config.disturbance
        self.backend = self.sim if d.name == "none" else DisturbedBackend(
            self.sim, DisturbanceConfig(name=d.name, onset_min=d.onset_min, onset_max=d.onset_max,
                                        duration=d.duration, magnitude=d.magnitude), task.index)
        self._model = self.sim.raw.sim.model._model  # soft resets keep the model
        ids = [mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in ARM_JOINTS]
        self._qpos = self._model.jnt_qposadr[ids]
        self._qvel = self._model.jnt_dofadr[ids]
        self._site = mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)
        self._scratch = mujoco.MjData(self._model)
        self.estopped = False
        self.reset()

    # --- commands --------------------------------------------------------------------------------
    def reset(self) -> Observation:
        """The configured init state, seeded, after the standard wait steps (objects settle)."""
        self.backend.reset(self.config.init_index, self.config.seed)
        for _ in range(NUM_WAIT_STEPS):
            self.backend.step(WAIT_ACTION)
        self._twist: tuple[np.ndarray, float] | None = None
        self._gripper = 0.0
        self._trajectory: tuple[JointPath, np.ndarray, float] | None = None
        self._success = False
        return self.backend.observe()

    def command_twist(self, linear: np.ndarray, angular: np.ndarray, stamp: float) -> None:
        """The next tick executes it (a newer command replaces one not yet executed). A non-finite
        twist raises InvalidActionError and changes nothing."""
        twist = np.concatenate([linear, angular]).astype(np.float64)
        if not (np.all(np.isfinite(twist)) and np.isfinite(stamp)):
            raise InvalidActionError(f"twist {twist.tolist()} (stamp {stamp}) is not finite")
        if not self.estopped:
            self._twist = (twist, stamp)

    def command_gripper(self, value: float) -> None:
        if not np.isfinite(value):
            raise InvalidActionError(f"gripper command {value} is not finite")
        if not self.estopped:
            self._gripper = float(np.clip(value, -1.0, 1.0))

    def stop(self) -> None:
        """Drop every pending command and trajectory: the next tick holds still."""
        self._trajectory, self._twist = None, None

    def start_trajectory(self, path: JointPath, now: float) -> None:
        """Replaces any running trajectory (a validated one: see trajectory.check_trajectory)."""
        if not self.estopped:
            self._trajectory = (path, self.joint_positions(), now)

    def cancel_trajectory(self) -> None:
        self._trajectory = None

    def set_emergency_stop(self, engaged: bool) -> None:
        self.estopped = engaged
        if engaged:
            self.stop()

    @property
    def executing(self) -> bool:
        return self._trajectory is not None

    # --- one control step ----------------------------------------------------------------------------
    def tick(self, now: float) -> Tick:
        """One control step; ``now`` on the clock of the commands' stamps."""
        event, stepped = None, self.sim  # only a commanded step goes through the disturbance
        if self._trajectory is not None:
            event = self._track(now)
        elif self._twist is not None and now - self._twist[1] <= self.config.command_timeout_s:
            twist, self._twist, stepped = self._twist[0], None, self.backend
            self._success = self.backend.step(
                twist_to_action(twist[:3], twist[3:], self._gripper, 1.0 / self.config.rate_hz)).success
        else:
            self._hold()
        raw = self.sim.raw.sim.data
        return Tick(stepped.observe(), raw.qvel[self._qvel].copy(), self.sim.contacts().force, self._success, event)

    def joint_positions(self) -> np.ndarray:
        return self.sim.raw.sim.data.qpos[self._qpos].copy()

    def forward_kinematics(self, joints: np.ndarray) -> EefPose:
        """Grip-point pose of the arm at ``joints`` (the rest of the scene as it is now)."""
        d = self._scratch
        d.qpos[:] = self.sim.raw.sim.data.qpos
        d.qpos[self._qpos] = joints
        mujoco.mj_kinematics(self._model, d)
        return EefPose(d.site_xpos[self._site].copy(), d.site_xmat[self._site].reshape(3, 3).copy())

    def close(self) -> None:
        self.backend.close()

    # --- helpers ---------------------------------------------------------------------------------
    def _hold(self) -> None:
        # the simulator's own step: holding is no policy step (a disturbance's clock does not run)
        self._success = self.sim.step(np.concatenate([HOLD, [self._gripper]])).success

    def _track(self, now: float) -> TrajectoryEvent | None:
        """One step toward the trajectory's setpoint at ``now``; an event once it has ended."""
        path, start, started = self._trajectory
        t = now - started
        target = self.forward_kinematics(sample(path, start, t))
        pose = self.sim.eef_pose()
        # rollback motion is never disturbed: the simulator's own step
        self._success = self.sim.step(servo_action(pose.pos, pose.rot, target.pos, target.rot, self._gripper)).success
        if t < path.duration:
            return None
        goal = path.positions[-1]
        pos_err, rot_err = self.sim.eef_pose().distance(self.forward_kinematics(goal))
        joint_err = float(np.max(np.abs(self.joint_positions() - goal)))
        cfg = self.config
        if pos_err <= cfg.goal_pos_tol and rot_err <= cfg.goal_rot_tol:
            state, reason = "succeeded", ""
        elif t > path.duration + cfg.goal_time_tol_s:
            state, reason = "aborted", f"goal not reached within {cfg.goal_time_tol_s} s of the last point"
        else:
            return None
        self._trajectory = None
        return TrajectoryEvent(state, reason, pos_err, rot_err, joint_err)
