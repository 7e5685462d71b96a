"""A ROS 2 arm as a RobotBackend: the episode loop drives it exactly as it drives LIBERO.

In: ``sensor_msgs/JointState`` (arm + fingers), the end-effector pose (PoseStamped), the contact
wrench, optional object poses and camera images. Out: one TwistStamped + gripper command per
control period for a policy action or a ``CartesianStep`` (a rollback's rise); for a ``JointTarget``
(a rollback), one joint-space ``trajectory_msgs/JointTrajectory`` on the controller's topic (or a
FollowJointTrajectory goal where control_msgs is installed) when the target is new, then nothing
while the controller runs it.

Safety: every input must be younger than ``max_state_age_s`` or ``observe`` raises StaleStateError
(the caller holds: nothing is commanded from old data); a message that cannot be used (a
JointState with other joint names or counts, a value that is not finite) is rejected, logged, and
holds the supervisor for ``max_state_age_s`` (``ros_nodes.state.ArmStateCache``); a rollback
trajectory outside the joint limits is refused; after an emergency stop no command leaves this
backend until ``clear_emergency_stop``.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, Float64

from recovery.core.errors import RecoveryError
from recovery.core.features import quat_xyzw_to_matrix
from recovery.core.robot import (Command, ContactInfo, EefPose, JointTarget, Observation, RobotBackend, StepResult,
                                 delta_action)
from ros_nodes.config import ConfigError, RobotConfig
from ros_nodes.convert import action_to_twist, image_to_rgb, standard_state
from ros_nodes.messages import pose_arrays, to_sec, trajectory_msg
from ros_nodes.state import ArmStateCache, JointMapper, StaleStateError, check_finite
from ros_nodes.trajectory import JointPath, TrajectoryLimitError, check_trajectory, plan_joint_move


class EmergencyStopError(RecoveryError, RuntimeError):
    """The emergency stop is engaged: no command may be sent until it is reset."""


class RosBackend(RobotBackend):
    supports_snapshot = False

    def __init__(self, node: Node, config: RobotConfig):
        self.node, self.config = node, config
        self.log = node.get_logger()
        self.joints = JointMapper(config.joints.names, config.joints.finger_names)
        self.state = ArmStateCache()
        self._motion: JointTarget | None = None  # the joint target whose trajectory the controller runs
        self._twisted_at = -np.inf  # when the last twist went out (node clock)
        self._command_lock = threading.Lock()  # an e-stop can never slip between its check and a publish
        self._estopped = False
        self._next_tick: float | None = None
        self._obs: Observation | None = None
        topics = config.topics
        node.create_subscription(JointState, topics.joint_states, self._on_joint_state, 10)
        node.create_subscription(PoseStamped, topics.eef_pose, self._on_eef_pose, 10)
        if topics.wrench:
            node.create_subscription(WrenchStamped, topics.wrench, self._on_wrench, 10)
        if topics.success:
            node.create_subscription(Bool, topics.success, lambda m: self.state.put("success", m.data, 0.0), 10)
        for name in config.object_names:
            node.create_subscription(PoseStamped, f"{topics.objects}/{name}/pose",
                                     lambda m, n=name: self._on_object(n, m), 10)
        for key, topic in config.cameras.items():
            node.create_subscription(Image, topic, lambda m, k=key: self._on_image(k, m), 2)
        self._twist_pub = node.create_publisher(TwistStamped, topics.twist_command, 10)
        self._gripper_pub = node.create_publisher(Float64, topics.gripper_command, 10)
        self._trajectory = self._trajectory_sender()
        self._required = ("joints", "eef_pose", *(("wrench",) if topics.wrench else ()),
                          *(f"object:{n}" for n in config.object_names), *config.cameras)

    # --- inputs (executor thread) ----------------------------------------------------------------
    def _on_joint_state(self, msg: JointState) -> None:
        self._accept("joints", lambda: self.joints.split(list(msg.name), msg.position, msg.velocity), msg.header)

    def _on_eef_pose(self, msg: PoseStamped) -> None:
        self._accept("eef_pose", lambda: pose_arrays(msg), msg.header)

    def _on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self._accept("wrench", lambda: float(math.sqrt(f.x * f.x + f.y * f.y + f.z * f.z)), msg.header)

    def _on_object(self, name: str, msg: PoseStamped) -> None:
        self._accept(f"object:{name}", lambda: np.concatenate(pose_arrays(msg)), msg.header)

    def _on_image(self, key: str, msg: Image) -> None:
        self._accept(key, lambda: image_to_rgb(msg.height, msg.width, msg.encoding, msg.step, msg.data), msg.header)

    def _accept(self, key: str, parse: Callable[[], object], header) -> None:
        """Store an input; one that cannot be used is rejected, logged, and holds the supervisor."""
        try:
            value = check_finite(parse())
        except ValueError as exc:
            self.state.reject(key, str(exc), self.now())
            self.log.error(f"rejected {key}: {exc}", throttle_duration_sec=2.0)
            return
        self.state.put(key, value, to_sec(header.stamp))

    # --- RobotBackend ------------------------------------------------------------------------------
    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def observe(self) -> Observation:
        """The latest inputs as the LIBERO backend's observation keys; StaleStateError if any is old."""
        values = self.state.fresh(self._required, self.now(), self.config.max_state_age_s)
        joint_pos, joint_vel, fingers = values["joints"]
        pos, quat = values["eef_pose"]
        obs: Observation = {
            "state": standard_state(pos, quat, fingers), "eef_pos": pos, "eef_quat": quat,
            "gripper_qpos": fingers, "joint_pos": joint_pos, "joint_vel": joint_vel,
            "contact_force": values.get("wrench", 0.0),
        }
        if self.config.object_names:
            obs["object_poses"] = {n: values[f"object:{n}"] for n in self.config.object_names}
        obs.update({key: values[key] for key in self.config.cameras})
        self._obs = obs
        return obs

    def step(self, command: Command) -> StepResult:
        if isinstance(command, JointTarget):
            self._follow(command)
        else:
            self._twist(delta_action(command))
        self._wait_tick()
        return StepResult(self.observe(), bool(self.state.latest("success")))

    def eef_pose(self) -> EefPose:
        obs = self._last_obs()
        return EefPose(obs["eef_pos"], quat_xyzw_to_matrix(obs["eef_quat"]))

    def contacts(self) -> ContactInfo:
        return ContactInfo(float(self._last_obs()["contact_force"]), frozenset())

    def joint_move_problem(self, target: JointTarget, max_steps: int) -> str | None:
        """Why the joint-space trajectory to ``target`` is refused: outside the joint, velocity or
        acceleration limits, a joint moving too far, or longer than ``max_steps`` periods."""
        try:
            path = self._checked_path(target)
        except TrajectoryLimitError as exc:
            return str(exc)
        budget = max_steps * self.config.period
        if path.duration > budget:
            return f"needs {path.duration:.2f} s within the limits, the budget is {budget:.2f} s"
        return None

    def wait_for_state(self, since: float, timeout: float) -> bool:
        """Wait until every input has a usable sample stamped after ``since`` (a scene reset, say), so
        that an episode starts from the state it will act on; False if none came within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.observe()
                if self.state.oldest(self._required) >= since:
                    return True
            except StaleStateError:
                pass
            time.sleep(self.config.period / 4)
        return False

    def idle(self) -> None:
        """One control period without commanding anything (holding)."""
        self._wait_tick()

    def close(self) -> None:
        """Publishers and subscriptions go with the node."""

    # --- episode and safety ---------------------------------------------------------------------
    def start_episode(self) -> None:
        self._next_tick = None
        self._obs = None
        self._motion = None
        self._twisted_at = -np.inf

    def engage_emergency_stop(self) -> None:
        with self._command_lock:
            self._estopped = True

    def clear_emergency_stop(self) -> None:
        with self._command_lock:
            self._estopped = False

    @property
    def estopped(self) -> bool:
        return self._estopped

    # --- helpers ---------------------------------------------------------------------------------
    def _check_estop(self) -> None:
        if self._estopped:
            raise EmergencyStopError("emergency stop engaged: no command until it is reset")

    def _wait_tick(self) -> None:
        """Keep the control rate: sleep until the next period boundary (never bursts to catch up)."""
        now = time.monotonic()
        self._next_tick = max((self._next_tick or now) + self.config.period, now)
        time.sleep(self._next_tick - now)

    def _last_obs(self) -> Observation:
        if self._obs is None:
            raise StaleStateError("no observation yet: call observe() first")
        return self._obs

    def _twist(self, action: np.ndarray) -> None:
        linear, angular, gripper = action_to_twist(action, self.config.period)
        msg = TwistStamped()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.config.frame_id
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(v) for v in linear)
        msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = (float(v) for v in angular)
        with self._command_lock:
            self._check_estop()
            self._twist_pub.publish(msg)
            self._gripper_pub.publish(Float64(data=gripper))
        self._motion = None
        self._twisted_at = self.now()

    def _follow(self, target: JointTarget) -> None:
        """Send the trajectory to a new target; while the controller runs it, command nothing more."""
        if self._motion is not None and np.array_equal(self._motion.joints, target.joints):
            self._check_estop()
            return
        # plan from joints that include the last twist: the arm executes it on its next tick, and a
        # trajectory whose first point is where the arm no longer is would be refused (or jerk)
        settled = self._twisted_at + 2 * self.config.period
        if not self.wait_for_state(since=settled, timeout=self.config.max_state_age_s):
            raise StaleStateError(f"no joint state within {self.config.max_state_age_s} s of the last twist: "
                                  "no trajectory is planned from an old one")
        path = self._checked_path(target)
        with self._command_lock:
            self._check_estop()
            self._gripper_pub.publish(Float64(data=float(target.gripper)))
            self._trajectory(trajectory_msg(self.config.joints.names, path))
        self._motion = target

    def _checked_path(self, target: JointTarget) -> JointPath:
        """The trajectory from the current joints to ``target``, checked against the limits the way
        the arm's controller checks it; TrajectoryLimitError says why there is none."""
        cfg, start = self.config, self._last_obs()["joint_pos"]
        path = plan_joint_move(start, target.joints, cfg.joints.limits, cfg.trajectory_dt, cfg.max_rollback_joint_step)
        problems = check_trajectory(start, path, cfg.joints.limits)
        if problems:
            raise TrajectoryLimitError("; ".join(problems))
        return path

    def _trajectory_sender(self):
        """A function that sends a JointTrajectory: on the controller's topic, or as a
        FollowJointTrajectory goal. The supervisor judges the motion by the poses it observes."""
        if self.config.trajectory_interface == "topic":
            from trajectory_msgs.msg import JointTrajectory

            publisher = self.node.create_publisher(JointTrajectory, self.config.topics.trajectory, 10)

            return publisher.publish
        try:
            from control_msgs.action import FollowJointTrajectory
            from rclpy.action import ActionClient
        except ImportError as exc:
            raise ConfigError("trajectory_interface=action needs control_msgs (FollowJointTrajectory), which is "
                              "not installed: use trajectory_interface=topic") from exc
        client = ActionClient(self.node, FollowJointTrajectory, self.config.topics.trajectory_action)

        def send_action(msg) -> None:
            if not client.wait_for_server(timeout_sec=1.0):
                raise RuntimeError(f"no FollowJointTrajectory server on {self.config.topics.trajectory_action}")
            client.send_goal_async(FollowJointTrajectory.Goal(trajectory=msg))

        return send_action
