"""ROS node ``sim_arm``: the simulated LIBERO arm behind the topics of a real arm driver.

Publishes joint states, the end-effector pose, the contact wrench, object poses and the task's
success flag after every tick. A tick runs as soon as a twist command arrives (so each command is
one control period of motion, with no extra latency), while a trajectory runs at ``rate_hz``,
and otherwise when the arm has been idle for 1.5 periods (holding still, states kept fresh).
It executes TwistStamped + gripper commands and JointTrajectory messages
(validated like a joint trajectory controller: joint names, finite values, position, velocity and
acceleration limits; refused ones, and twist or gripper commands that are not finite, are logged
and reported on ``~/trajectory_status``: no message stops the node); obeys the latched
emergency stop; ``~/reset`` (std_srvs/Trigger) restores the configured init state.
"""

from __future__ import annotations

import json
import sys
import threading

import rclpy
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from recovery.core.actions import InvalidActionError
from recovery.core.errors import RecoveryError
from ros_nodes.config import SimArmConfig
from ros_nodes.messages import LATCHED, fill_pose, received_path, to_sec
from ros_nodes.runtime import node_main
from ros_nodes.sim_arm import SimArm, Tick
from ros_nodes.trajectory import TrajectoryLimitError

IDLE_PERIODS = 1.5  # an idle tick waits this long for a command (a late one must not meet a hold step)


class SimArmNode:
    def __init__(self, node: Node, config: SimArmConfig):
        self.node, self.config = node, config
        self.log = node.get_logger()
        self.arm = SimArm(config)
        self._lock = threading.Lock()  # the simulator is stepped by the tick thread, reset by the service
        self._wake = threading.Event()  # a command arrived: tick now
        topics = config.topics
        self._joint_pub = node.create_publisher(JointState, topics.joint_states, 10)
        self._pose_pub = node.create_publisher(PoseStamped, topics.eef_pose, 10)
        self._wrench_pub = node.create_publisher(WrenchStamped, topics.wrench, 10)
        self._success_pub = node.create_publisher(Bool, topics.success, 10)
        self._status_pub = node.create_publisher(String, "~/trajectory_status", 10)
        self._object_pubs = {name: node.create_publisher(PoseStamped, f"{topics.objects}/{name}/pose", 10)
                             for name in self.arm.backend.observe()["object_poses"]}
        node.create_subscription(TwistStamped, topics.twist_command, self._on_twist, 10)
        node.create_subscription(Float64, topics.gripper_command, self._on_gripper, 10)
        node.create_subscription(JointTrajectory, topics.trajectory, self._on_trajectory, 10)
        node.create_subscription(Bool, topics.emergency_stop, self._on_estop, LATCHED)
        node.create_service(Trigger, "~/reset", self._on_reset)
        self.log.info(f"{config.suite}/{config.task} init {config.init_index}: {self.arm.instruction!r}; "
                      f"disturbance {config.disturbance.name}")

    # --- commands (executor thread) ------------------------------------------------------------------
    def _on_twist(self, msg: TwistStamped) -> None:
        lin, ang = msg.twist.linear, msg.twist.angular
        try:
            with self._lock:
                self.arm.command_twist([lin.x, lin.y, lin.z], [ang.x, ang.y, ang.z], to_sec(msg.header.stamp))
                if not self.arm.executing:
                    self._wake.set()
        except InvalidActionError as exc:
            self._refuse("command", str(exc))

    def _on_gripper(self, msg: Float64) -> None:
        try:
            with self._lock:
                self.arm.command_gripper(msg.data)
        except InvalidActionError as exc:
            self._refuse("command", str(exc))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:  # the controllers' convention: an empty trajectory cancels
            with self._lock:
                self.arm.cancel_trajectory()
            self._status({"state": "cancelled"})
            return
        with self._lock:
            try:
                if self.arm.estopped:
                    raise TrajectoryLimitError("emergency stop engaged")
                path = received_path(msg, self.config.joints.names, self.arm.joint_positions(),
                                     self.config.joints.limits)
            except TrajectoryLimitError as exc:
                path, problem = None, str(exc)
            else:
                self.arm.start_trajectory(path, self.node.get_clock().now().nanoseconds * 1e-9)
        if path is None:
            return self._refuse("trajectory", problem)
        self._status({"state": "executing", "points": len(msg.points), "duration": path.duration,
                      "goal": path.positions[-1].tolist()})

    def _refuse(self, what: str, reason: str) -> None:
        """A message this arm will not execute: logged and reported; the arm goes on as before."""
        self.log.error(f"{what} refused: {reason}", throttle_duration_sec=1.0)
        self._status({"state": "rejected", "what": what, "reason": reason})

    def _on_estop(self, msg: Bool) -> None:
        with self._lock:
            was = self.arm.estopped
            self.arm.set_emergency_stop(msg.data)
        if msg.data != was:
            self.log.warning("emergency stop " + ("ENGAGED: holding still" if msg.data else "released"))

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            self.arm.reset()
        response.success, response.message = True, self.arm.instruction
        return response

    # --- the tick loop (its own thread) --------------------------------------------------------------
    def run(self) -> None:
        period = 1.0 / self.config.rate_hz
        try:
            while rclpy.ok():
                with self._lock:
                    tick = self._tick()
                    wait = period if self.arm.executing else IDLE_PERIODS * period
                self._publish(tick)
                self._wake.wait(timeout=wait)
                self._wake.clear()
        finally:
            with self._lock:
                self.arm.close()

    def _tick(self) -> Tick:
        """One tick; a command that fails in the simulator stops the arm (reported) instead of the node."""
        now = self.node.get_clock().now().nanoseconds * 1e-9
        try:
            return self.arm.tick(now)
        except RecoveryError as exc:
            self.arm.stop()
            self._refuse("command", f"failed in the simulator, arm stopped: {exc}")
            return self.arm.tick(now)

    def _publish(self, tick: Tick) -> None:
        stamp = self.node.get_clock().now().to_msg()
        cfg, obs = self.config, tick.obs
        joints = JointState(name=list(cfg.joints.names + cfg.joints.finger_names),
                            position=[*obs["joint_pos"].tolist(), *obs["gripper_qpos"].tolist()],
                            velocity=[*tick.joint_vel.tolist(), *[0.0] * len(cfg.joints.finger_names)])
        joints.header.stamp = stamp
        self._joint_pub.publish(joints)
        self._pose_pub.publish(self._pose(stamp, obs["eef_pos"], obs["eef_quat"]))
        wrench = WrenchStamped()
        wrench.header.stamp, wrench.header.frame_id = stamp, cfg.frame_id
        wrench.wrench.force.z = float(tick.contact_force)  # the summed contact force (magnitude only)
        self._wrench_pub.publish(wrench)
        for name, pose in obs["object_poses"].items():
            self._object_pubs[name].publish(self._pose(stamp, pose[:3], pose[3:7]))
        self._success_pub.publish(Bool(data=bool(tick.success)))
        if tick.event is not None:
            self._status({"state": tick.event.state, "reason": tick.event.reason,
                          "pos_error": tick.event.pos_error, "rot_error": tick.event.rot_error,
                          "joint_error": tick.event.joint_error})

    def _pose(self, stamp, pos, quat) -> PoseStamped:
        msg = PoseStamped()
        msg.header.stamp, msg.header.frame_id = stamp, self.config.frame_id
        return fill_pose(msg, pos, quat)

    def _status(self, status: dict) -> None:
        self._status_pub.publish(String(data=json.dumps(status)))


def main(args: list[str] | None = None) -> int:
    return node_main("sim_arm", SimArmConfig, lambda node, config: SimArmNode(node, config).run, args)


if __name__ == "__main__":
    sys.exit(main())
