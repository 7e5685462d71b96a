"""ROS message <-> array helpers shared by the nodes (the only conversions that need message types)."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import PoseStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ros_nodes.config import JointLimits
from ros_nodes.trajectory import JointPath, TrajectoryLimitError, check_trajectory

# latched: a late subscriber still gets the last value (mode, emergency stop)
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


def to_sec(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def duration(seconds: float) -> Duration:
    sec = int(np.floor(seconds))
    return Duration(sec=sec, nanosec=int(round((seconds - sec) * 1e9)))


def pose_arrays(msg: PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    """(position, xyzw quaternion)."""
    p, q = msg.pose.position, msg.pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([q.x, q.y, q.z, q.w])


def fill_pose(msg: PoseStamped, pos: np.ndarray, quat_xyzw: np.ndarray) -> PoseStamped:
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in pos)
    o = msg.pose.orientation
    o.x, o.y, o.z, o.w = (float(v) for v in quat_xyzw)
    return msg


def trajectory_msg(names: tuple[str, ...], path: JointPath) -> JointTrajectory:
    """Header stamp zero: start on receipt (the trajectory_msgs convention)."""
    msg = JointTrajectory(joint_names=list(names))
    for t, q, v, a in zip(path.times, path.positions, path.velocities, path.accelerations):
        msg.points.append(JointTrajectoryPoint(positions=q.tolist(), velocities=v.tolist(),
                                               accelerations=a.tolist(), time_from_start=duration(float(t))))
    return msg


def trajectory_path(msg: JointTrajectory, order: list[int]) -> JointPath:
    """The message's points with joints reordered by ``order`` (message index per configured joint).
    Missing velocities/accelerations are left empty (not checked, not assumed zero)."""
    def column(values: list, n: int) -> np.ndarray:
        return np.array([[row[i] for i in order] for row in values]) if all(len(r) == n for r in values) \
            else np.zeros((0,))

    n = len(msg.joint_names)
    points = msg.points
    return JointPath(
        np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in points]),
        column([list(p.positions) for p in points], n), column([list(p.velocities) for p in points], n),
        column([list(p.accelerations) for p in points], n),
    )


def received_path(msg: JointTrajectory, names: tuple[str, ...], start: np.ndarray, limits: JointLimits) -> JointPath:
    """The path of a received trajectory, checked as a joint trajectory controller checks it (joint
    names, one position per joint, finite values, limits); TrajectoryLimitError says why it is refused."""
    if sorted(msg.joint_names) != sorted(names):
        raise TrajectoryLimitError(f"joint names {list(msg.joint_names)} do not match {list(names)}")
    path = trajectory_path(msg, [list(msg.joint_names).index(n) for n in names])
    if path.positions.shape != (len(msg.points), len(names)):
        raise TrajectoryLimitError("every point needs one position per joint")
    problems = check_trajectory(start, path, limits)
    if problems:
        raise TrajectoryLimitError("; ".join(problems))
    return path
