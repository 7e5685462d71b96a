"""Plain conversions between the stack's arrays and what travels in ROS messages (no rclpy here).

Actions are LIBERO's normalised end-effector deltas: a unit action moves the controller's goal by
5 cm / 0.5 rad within one control period. On the wire they are a Cartesian velocity (TwistStamped,
as MoveIt Servo takes) plus a gripper command, so any arm driver can execute them at its own rate.
"""

from __future__ import annotations

import numpy as np

from recovery.core.actions import POS_SCALE, ROT_SCALE

# sensor_msgs/Image encodings we decode without cv_bridge: channels and how to reach RGB
IMAGE_ENCODINGS = {"rgb8": (3, (0, 1, 2)), "bgr8": (3, (2, 1, 0)), "rgba8": (4, (0, 1, 2)),
                   "bgra8": (4, (2, 1, 0)), "mono8": (1, (0, 0, 0))}


def action_to_twist(action: np.ndarray, period: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(linear m/s, angular rad/s, gripper) for one validated 7-D action held for ``period`` s."""
    return action[:3] * POS_SCALE / period, action[3:6] * ROT_SCALE / period, float(action[6])


def twist_to_action(linear: np.ndarray, angular: np.ndarray, gripper: float, period: float) -> np.ndarray:
    """The 7-D action that moves as ``linear``/``angular`` for one ``period``; clipped to [-1, 1]."""
    arm = np.concatenate([np.asarray(linear) * period / POS_SCALE, np.asarray(angular) * period / ROT_SCALE])
    return np.clip(np.concatenate([arm, [gripper]]), -1.0, 1.0)


def quat_to_axis_angle(quat_xyzw: np.ndarray) -> np.ndarray:
    """robosuite's ``quat2axisangle`` (the standard LIBERO state), so the ROS state matches the sim's."""
    q = np.asarray(quat_xyzw, dtype=np.float64)
    w = float(np.clip(q[3], -1.0, 1.0))
    den = np.sqrt(1.0 - w * w)
    if np.isclose(den, 0.0):
        return np.zeros(3)
    return q[:3] * 2.0 * np.arccos(w) / den


def image_to_rgb(height: int, width: int, encoding: str, step: int, data) -> np.ndarray:
    """A sensor_msgs/Image's fields -> (H, W, 3) uint8 RGB; rows may be padded (``step``)."""
    if encoding not in IMAGE_ENCODINGS:
        raise ValueError(f"image encoding {encoding!r} is not supported; supported: {', '.join(IMAGE_ENCODINGS)}")
    channels, order = IMAGE_ENCODINGS[encoding]
    raw = np.frombuffer(data, dtype=np.uint8)
    if step < width * channels or raw.size < height * step:
        raise ValueError(f"image data of {raw.size} bytes does not fit {height}x{width} {encoding} (step {step})")
    rows = raw[: height * step].reshape(height, step)[:, : width * channels]
    pixels = rows.reshape(height, width, channels)
    return np.ascontiguousarray(pixels[:, :, list(order)])


def rgb_to_image_fields(image: np.ndarray) -> dict:
    """(H, W, 3) uint8 RGB -> the fields of a sensor_msgs/Image (rgb8, unpadded)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = image.shape[:2]
    return {"height": h, "width": w, "encoding": "rgb8", "is_bigendian": 0, "step": w * 3, "data": image.tobytes()}


def standard_state(eef_pos: np.ndarray, eef_quat: np.ndarray, fingers: np.ndarray) -> np.ndarray:
    """The standard 8-D state: eef position, axis-angle of the hand, two finger joints."""
    return np.concatenate([eef_pos, quat_to_axis_angle(eef_quat), fingers])
