"""Arbitrary messages against every conversion a ROS node applies to what it receives: each either
gives a usable value or a clear error (a ValueError the node reports), never another exception.
Bounded: a few hundred examples each, no deadline (the machine is shared)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.core.errors import RecoveryError
from ros_nodes.config import JointLimits
from ros_nodes.convert import IMAGE_ENCODINGS, image_to_rgb
from ros_nodes.state import JointMapper, check_finite

JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
HOME = np.array([0.0, -0.13, 0.0, -2.46, 0.0, 2.23, 0.78])
FUZZ = settings(max_examples=300, deadline=None)

numbers = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.integers(-10**6, 10**6).map(float)
names = st.lists(st.sampled_from(JOINTS + FINGERS + ("elbow_joint", "", "panda_joint1")), max_size=11)


@FUZZ
@given(names=names, positions=st.lists(numbers, max_size=11), velocities=st.lists(numbers, max_size=11))
def test_joint_states(names, positions, velocities):
    try:
        arm, vel, fingers = check_finite(JointMapper(JOINTS, FINGERS).split(names, positions, velocities))
    except ValueError as exc:
        assert isinstance(exc, RecoveryError) and str(exc)
        return
    assert arm.shape == vel.shape == (7,) and fingers.shape == (2,)
    assert np.all(np.isfinite(arm)) and np.all(np.isfinite(vel)) and np.all(np.isfinite(fingers))


@FUZZ
@given(height=st.integers(0, 40), width=st.integers(0, 40), step=st.integers(0, 200),
       encoding=st.sampled_from((*IMAGE_ENCODINGS, "16UC1", "", "rgb8 ")), data=st.binary(max_size=6000))
def test_images(height, width, step, encoding, data):
    try:
        image = image_to_rgb(height, width, encoding, step, data)
    except ValueError as exc:
        assert str(exc)
        return
    assert image.shape == (height, width, 3) and image.dtype == np.uint8


@FUZZ
@given(names=names, points=st.lists(st.tuples(st.lists(numbers, max_size=8), st.lists(numbers, max_size=8),
                                              st.integers(0, 5), st.integers(0, 999_999_999)), max_size=6))
def test_trajectories(names, points):
    trajectory_msgs = pytest.importorskip("trajectory_msgs.msg", reason="ROS message types: pip install -e '.[ros]'")
    from builtin_interfaces.msg import Duration

    from ros_nodes.messages import received_path
    from ros_nodes.trajectory import TrajectoryLimitError

    msg = trajectory_msgs.JointTrajectory(joint_names=list(names))
    for positions, velocities, sec, nanosec in points:
        msg.points.append(trajectory_msgs.JointTrajectoryPoint(
            positions=positions, velocities=velocities, time_from_start=Duration(sec=sec, nanosec=nanosec)))
    limits = JointLimits()
    try:
        path = received_path(msg, JOINTS, HOME, limits)
    except TrajectoryLimitError as exc:
        assert str(exc)
        return
    assert np.all(np.isfinite(path.positions)) and path.positions.shape == (len(points), 7)
    assert np.all(path.positions >= np.array(limits.lower) - 1e-6) and np.all(path.positions <= np.array(limits.upper) + 1e-6)
