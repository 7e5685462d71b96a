"""Joint-space rollback trajectories: time-parametrised within velocity and acceleration limits,
checked before they are sent (supervisor) and before they are executed (arm).

All joints follow one trapezoidal velocity profile scaled to each joint's travel, so they start and
arrive together and the slowest joint sets the pace; no joint ever exceeds its limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recovery.core.errors import RecoveryError
from ros_nodes.config import JointLimits

TOLERANCE = 1e-6  # relative slack on limits (floating point)


class TrajectoryLimitError(RecoveryError, ValueError):
    """A trajectory that would leave the joint limits: refused, never sent or executed."""


@dataclass(frozen=True)
class JointPath:
    """Points of a joint trajectory; ``times`` from the start, one row per point."""

    times: np.ndarray  # (N,), strictly increasing, > 0
    positions: np.ndarray  # (N, dof)
    velocities: np.ndarray  # (N, dof)
    accelerations: np.ndarray  # (N, dof)

    @property
    def duration(self) -> float:
        return float(self.times[-1])


def plan_joint_move(start: np.ndarray, goal: np.ndarray, limits: JointLimits, dt: float,
                    max_joint_step: float = np.inf) -> JointPath:
    """Synchronised trapezoidal move from ``start`` to ``goal``, sampled every ``dt`` seconds.
    Refuses (TrajectoryLimitError) a goal outside the position limits or further than
    ``max_joint_step`` rad in any joint."""
    start, goal = np.asarray(start, dtype=np.float64), np.asarray(goal, dtype=np.float64)
    if not (np.all(np.isfinite(start)) and np.all(np.isfinite(goal))):
        raise TrajectoryLimitError(f"start {start.tolist()} or goal {goal.tolist()} is not finite")
    lower, upper = np.asarray(limits.lower), np.asarray(limits.upper)
    outside = np.flatnonzero((goal < lower) | (goal > upper))
    if outside.size:
        raise TrajectoryLimitError(f"goal outside the position limits at joint(s) {outside.tolist()}: "
                                   f"{np.round(goal[outside], 4).tolist()}")
    delta = goal - start
    if np.max(np.abs(delta)) > max_joint_step:
        raise TrajectoryLimitError(f"rollback moves a joint by {np.max(np.abs(delta)):.3f} rad, more than the "
                                   f"allowed {max_joint_step} rad")
    travel = np.abs(delta)
    moving = travel > 1e-9
    if not moving.any():
        return _path(np.array([dt]), start, goal, np.zeros((1, len(start))), np.zeros((1, len(start))))
    # s(t) in [0, 1]: peak speed and acceleration of s that keep every joint within its limits
    v_peak = float(np.min(np.asarray(limits.max_velocity)[moving] / travel[moving]))
    a_peak = float(np.min(np.asarray(limits.max_acceleration)[moving] / travel[moving]))
    if v_peak * v_peak / a_peak >= 1.0:  # never reaches v_peak: triangular profile
        t_acc = np.sqrt(1.0 / a_peak)
        v_peak, t_total = a_peak * t_acc, 2.0 * t_acc
    else:
        t_acc = v_peak / a_peak
        t_total = 1.0 / v_peak + t_acc
    times = np.arange(1, int(np.ceil(t_total / dt)) + 1) * dt
    times[-1] = t_total
    s, ds, dds = _trapezoid(times, t_acc, t_total, v_peak, a_peak)
    positions = start + np.outer(s, delta)
    return _path(times, positions, goal, np.outer(ds, delta), np.outer(dds, delta))


def _path(times, positions, goal, velocities, accelerations) -> JointPath:
    positions = np.atleast_2d(positions).copy()
    positions[-1] = goal  # exactly the goal, whatever the rounding
    velocities, accelerations = velocities.copy(), accelerations.copy()
    velocities[-1] = 0.0
    accelerations[-1] = 0.0
    return JointPath(np.asarray(times, dtype=np.float64), positions, velocities, accelerations)


def _trapezoid(t: np.ndarray, t_acc: float, t_total: float, v: float, a: float):
    t_dec = t_total - t_acc
    s = np.where(t < t_acc, 0.5 * a * t ** 2,
                 np.where(t <= t_dec, 0.5 * a * t_acc ** 2 + v * (t - t_acc),
                          1.0 - 0.5 * a * (t_total - t) ** 2))
    ds = np.where(t < t_acc, a * t, np.where(t <= t_dec, v, a * (t_total - t)))
    dds = np.where(t < t_acc, a, np.where(t <= t_dec, 0.0, -a))
    return np.clip(s, 0.0, 1.0), ds, dds


def check_trajectory(start: np.ndarray, path: JointPath, limits: JointLimits) -> list[str]:
    """Every way ``path`` (executed from ``start``) breaks ``limits``; empty when it is safe.
    Velocity is checked between consecutive points and on the points' own velocities; acceleration
    on the points' own accelerations when given."""
    problems = []
    arrays = (path.times, path.positions, path.velocities, path.accelerations, np.asarray(start, dtype=np.float64))
    if not all(np.all(np.isfinite(a)) for a in arrays):  # every comparison with NaN is false: check first
        return ["times, positions, velocities or accelerations are not finite (NaN or Inf)"]
    times = np.concatenate([[0.0], path.times])
    if np.any(np.diff(times) <= 0):
        problems.append("time_from_start must be positive and strictly increasing")
        return problems
    lower, upper = np.asarray(limits.lower), np.asarray(limits.upper)
    vmax, amax = np.asarray(limits.max_velocity), np.asarray(limits.max_acceleration)
    if np.any(path.positions < lower - TOLERANCE) or np.any(path.positions > upper + TOLERANCE):
        problems.append("positions outside the joint limits")
    positions = np.vstack([start, path.positions])
    speed = np.abs(np.diff(positions, axis=0)) / np.diff(times)[:, None]
    if np.any(speed > vmax * (1 + TOLERANCE) + TOLERANCE):
        joint = int(np.argmax(np.max(speed / vmax, axis=0)))
        problems.append(f"velocity limit exceeded: joint {joint} at {np.max(speed[:, joint]):.3f} rad/s "
                        f"(limit {vmax[joint]})")
    if path.velocities.size and np.any(np.abs(path.velocities) > vmax * (1 + TOLERANCE) + TOLERANCE):
        problems.append("point velocities exceed the velocity limits")
    if path.accelerations.size and np.any(np.abs(path.accelerations) > amax * (1 + TOLERANCE) + TOLERANCE):
        problems.append("point accelerations exceed the acceleration limits")
    return problems


def sample(path: JointPath, start: np.ndarray, t: float) -> np.ndarray:
    """Joint setpoint ``t`` seconds into ``path`` (started at ``start``), linearly interpolated."""
    times = np.concatenate([[0.0], path.times])
    positions = np.vstack([start, path.positions])
    return np.array([np.interp(t, times, positions[:, j]) for j in range(positions.shape[1])])
