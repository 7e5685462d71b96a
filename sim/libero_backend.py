"""LIBERO (MuJoCo through robosuite) as a RobotBackend.

Observation keys (all world frame, float64 unless noted):

- ``state`` (8,): eef position, eef axis-angle, 2 finger joints: the standard protocol's state
- ``eef_pos`` (3,), ``eef_quat`` (4, xyzw, hand body), ``gripper_qpos`` (2,), ``joint_pos`` (7,)
- ``object_poses``: {object name: (7,) position + xyzw quaternion}, privileged
- ``agentview_image``, ``wrist_image`` (H, W, 3) uint8, only when cameras are on, rotated
  180 degrees as in the openpi evaluator
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from numpy.lib.stride_tricks import as_strided

from recovery.core.errors import RecoveryError
from recovery.core.robot import (NO_CONTACT, Command, ContactInfo, EefPose, JointTarget, Observation, RobotBackend,
                                 StepResult, delta_action)
from sim.tasks import TaskSpec

logging.getLogger("robosuite_logs").setLevel(logging.ERROR)

GRIP_SITE = "gripper0_grip_site"
ROBOT_GEOM_PREFIXES = ("robot0_", "gripper0_")
CAMERA_KEYS = {"agentview": "agentview_image", "robot0_eye_in_hand": "wrist_image"}
HORIZON = 100_000  # our own step budgets end episodes; robosuite's horizon must never do it
JOINT_LEAD = 0.2  # rad: how far a joint-space rollback sets the goal ahead of each joint. Under the
# critically damped controller below the joints then settle at ~1.4 rad/s, within the Panda's 2.1-2.6 rad/s
JOINT_CONTROLLER = {  # robosuite's joint-position controller, as stiff as its limits allow
    "type": "JOINT_POSITION", "input_max": 1, "input_min": -1, "output_max": JOINT_LEAD, "output_min": -JOINT_LEAD,
    "kp": 300, "damping_ratio": 1, "impedance_mode": "fixed", "kp_limits": [0, 300],
    "damping_ratio_limits": [0, 10], "qpos_limits": None, "interpolation": None, "ramp_ratio": 0.2,
}


class InitStateError(RecoveryError, IndexError):
    """An init-state index the task does not have."""


@dataclass(frozen=True)
class LiberoConfig:
    camera_size: int | None = None  # None: no camera is rendered (physics only, ~15 ms/step)
    cameras: tuple[str, ...] = ("agentview", "robot0_eye_in_hand")
    render_gpu_device_id: int = -1


@dataclass(frozen=True)
class SimSnapshot:
    """Everything needed for a bit-identical restore (physics alone is not enough)."""

    physics: np.ndarray  # mjSTATE_INTEGRATION: qpos, qvel, act, warm-start, ctrl, ...
    gripper_action: np.ndarray
    goal_ori: np.ndarray
    goal_pos: np.ndarray
    timestep: int
    cur_time: float
    observation: Observation
    data: Any = None  # MjData, derived quantities and contacts included: see ``LiberoBackend.snapshot``


class LiberoBackend(RobotBackend):
    supports_snapshot = True

    def __init__(self, task: TaskSpec, config: LiberoConfig = LiberoConfig()):
        from libero.libero.envs.env_wrapper import ControlEnv

        self.task = task
        self.config = config
        self._init_states = task.init_states()
        cams = config.camera_size is not None
        size = config.camera_size or 128
        with contextlib.redirect_stdout(io.StringIO()):
            # LIBERO's OffScreenRenderEnv is this with the renderer forced on: an EGL context costs ~1.2 s
            # of every simulator built, for cameras that physics-only episodes never read
            self._env = ControlEnv(
                bddl_file_name=task.bddl_path, has_offscreen_renderer=cams, use_camera_obs=cams,
                camera_names=list(config.cameras), camera_heights=size, camera_widths=size,
                render_gpu_device_id=config.render_gpu_device_id, horizon=HORIZON,
                hard_reset=False,  # 0.04 s instead of ~2 s, bit-identical once the gripper is zeroed
            )
        self._obs: Observation = {}
        self._osc: tuple | None = None  # (OSC controller, action size) while a joint-space motion has the arm
        model = self.raw.sim.model._model  # soft resets keep the model: names and ids are looked up once
        self._geom_names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}"
                            for i in range(model.ngeom)]
        self._is_robot_geom = [n.startswith(ROBOT_GEOM_PREFIXES) for n in self._geom_names]  # by geom id
        self._force6 = np.zeros(6)  # mj_contactForce's output
        self._grip_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)
        self._bind_sim()

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def instruction(self) -> str:
        return self.task.instruction

    @property
    def num_init_states(self) -> int:
        return len(self._init_states)

    @property
    def raw(self) -> Any:
        """The BDDL robosuite env, for privileged users (expert, disturbances). Its ``sim`` and
        ``robots`` are rebuilt on every reset: never cache them across one."""
        return self._env.env

    def reset(self, init_index: int | None, seed: int) -> Observation:
        """Seeded, deterministic reset into the task's fixed init state ``init_index``, or, with
        ``None``, into a layout sampled from the task's placement regions with ``seed`` (same
        distribution as the init states, but never one of them: for training data)."""
        if init_index is not None and not 0 <= init_index < len(self._init_states):
            raise InitStateError(
                f"{self.task.label} has {len(self._init_states)} init states; index {init_index} is out of range"
            )
        self._use_osc()
        self._env.seed(seed)
        self.raw.hard_reset = init_index is None  # a soft reset places objects that sit on a fixture at
        raw = self._env.reset()  # twice the fixture's offset (a bowl on the stove lands on the floor)
        self.raw.hard_reset = False
        self.raw.robots[0].gripper.current_action = np.zeros(1)  # a soft reset keeps the old command
        if init_index is not None:
            raw = self._env.set_init_state(self._init_states[init_index])
        self._obs = self._convert(raw)
        self._bind_sim()
        return self._obs

    def _bind_sim(self) -> None:
        """Hold the handles the per-step reads use (the arrays alias the simulator's memory); a hard
        reset builds a new simulator, so every reset binds again."""
        model, data = self.raw.sim.model._model, self.raw.sim.data._data
        self._mj = (model, data)
        self._grip_xpos, self._grip_xmat = data.site_xpos[self._grip_site], data.site_xmat[self._grip_site]
        # the geom pairs of the contact buffer, as long as the arena could hold: MuJoCo keeps the contacts at the
        # arena's start (mj_clearEfc), so this view stays valid while ``data.contact`` is rebuilt, for ~20 us, each step
        pairs = data.contact.geom
        self._contact_geoms = as_strided(pairs, (data.narena // pairs.strides[0], 2), pairs.strides, writeable=False)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()

    # --- RobotBackend --------------------------------------------------------------------------
    def observe(self) -> Observation:
        return self._obs

    def step(self, command: Command) -> StepResult:
        """A policy action through OSC, or one period of a joint-space motion through robosuite's
        joint-position controller, heading for the target joints at most ``JOINT_LEAD`` ahead."""
        if isinstance(command, JointTarget):
            self._use_joint_control()
            lead = np.clip((command.joints - self._obs["joint_pos"]) / JOINT_LEAD, -1.0, 1.0)
            return self._step_controller(np.r_[lead, command.gripper])
        self._use_osc()
        return self._step_controller(delta_action(command))

    def _step_controller(self, command: np.ndarray) -> StepResult:
        raw, _, done, _ = self._env.step(command)
        self._obs = self._convert(raw)
        return StepResult(self._obs, bool(done))

    def flat_state(self) -> np.ndarray:
        """LIBERO's own state vector ``[time, qpos, qvel]`` (what its demos and init states hold)."""
        return self.raw.sim.get_state().flatten().copy()

    def success(self) -> bool:
        return bool(self._env.check_success())

    def eef_pose(self) -> EefPose:
        return EefPose(self._grip_xpos.copy(), self._grip_xmat.reshape(3, 3).copy())

    def _use_joint_control(self) -> None:
        """Hand the arm to robosuite's joint-position controller (a rollback: a burst can stretch the
        arm against a joint limit, where the Cartesian servo cannot pull it back)."""
        if self._osc is not None:
            return
        from robosuite.controllers import controller_factory

        env, robot = self.raw, self.raw.robots[0]
        self._osc = (robot.controller, env._action_dim)
        robot.controller = controller_factory("JOINT_POSITION", {**robot.controller_config, **JOINT_CONTROLLER,
                                                                 "sim": robot.controller.sim})
        env._action_dim = robot.action_dim  # robosuite checks commands against the size cached at reset

    def _use_osc(self) -> None:
        """Back to OSC after a joint-space motion; its goal becomes wherever the motion ended (the
        policy's deltas start from there)."""
        if self._osc is None:
            return
        env, robot, (osc, action_dim) = self.raw, self.raw.robots[0], self._osc
        robot.controller, env._action_dim, self._osc = osc, action_dim, None
        osc.update(force=True)
        osc.reset_goal()

    def contacts(self) -> ContactInfo:
        """Robot-vs-world contacts, in plain Python over the contact pairs: right after a physics
        step the caches are cold, and there each numpy call costs more than this loop (~30 contacts)."""
        (model, data), robot, force, touching = self._mj, self._is_robot_geom, 0.0, []
        for i, (geom1, geom2) in enumerate(self._contact_geoms[: data.ncon].tolist()):
            if robot[geom1] != robot[geom2]:  # robot vs. the rest of the world
                mujoco.mj_contactForce(model, data, i, self._force6)
                force += abs(float(self._force6[0]))
                touching.append(self._geom_names[geom2 if robot[geom1] else geom1])
        return ContactInfo(force, frozenset(touching)) if touching else NO_CONTACT

    def snapshot(self, derived: bool = False) -> SimSnapshot:
        """The integration state restores the future bit-identically, but positions and contacts
        read right after a step are those MuJoCo computed before integrating, one physics step old;
        a restore recomputes them for the present. ``derived`` keeps the whole MjData (~1.6 ms), so
        that a branch comes back reading what it read (the counterfactual play-out); a rollback
        need not."""
        env, robot = self.raw, self.raw.robots[0]
        model, data = env.sim.model._model, env.sim.data._data
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        physics = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, data, physics, spec)
        return SimSnapshot(
            physics, np.array(robot.gripper.current_action, dtype=np.float64).copy(),
            robot.controller.goal_ori.copy(), robot.controller.goal_pos.copy(),
            env.timestep, env.cur_time, _copy_obs(self._obs), copy.copy(data) if derived else None,
        )

    def restore(self, snapshot: SimSnapshot) -> Observation:
        env, robot = self.raw, self.raw.robots[0]
        model, data = env.sim.model._model, env.sim.data._data
        if snapshot.data is not None:
            mujoco.mj_copyData(data, model, snapshot.data)  # into the same buffers: the per-step views stay valid
        else:
            mujoco.mj_setState(model, data, snapshot.physics, mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_forward(model, data)
        robot.gripper.current_action = snapshot.gripper_action.copy()
        robot.controller.goal_ori = snapshot.goal_ori.copy()
        robot.controller.goal_pos = snapshot.goal_pos.copy()
        env.timestep, env.cur_time = snapshot.timestep, snapshot.cur_time
        self._obs = _copy_obs(snapshot.observation)
        return self._obs

    # --- helpers -------------------------------------------------------------------------------
    def _convert(self, raw: dict[str, np.ndarray]) -> Observation:
        from robosuite.utils.transform_utils import quat2axisangle

        quat = raw["robot0_eef_quat"]
        obs: Observation = {
            "state": np.concatenate([raw["robot0_eef_pos"], quat2axisangle(quat), raw["robot0_gripper_qpos"]]),
            "eef_pos": raw["robot0_eef_pos"].copy(),
            "eef_quat": quat.copy(),
            "gripper_qpos": raw["robot0_gripper_qpos"].copy(),
            "joint_pos": raw["robot0_joint_pos"].copy(),
            "object_poses": {
                name: np.concatenate([raw[f"{name}_pos"], raw[f"{name}_quat"]]) for name in self.raw.objects_dict
            },
        }
        for camera in self.config.cameras if self.config.camera_size else ():
            obs[CAMERA_KEYS.get(camera, f"{camera}_image")] = np.ascontiguousarray(raw[f"{camera}_image"][::-1, ::-1])
        return obs


def _copy_obs(obs: Observation) -> Observation:
    return {k: ({n: p.copy() for n, p in v.items()} if isinstance(v, dict) else v.copy()) for k, v in obs.items()}
