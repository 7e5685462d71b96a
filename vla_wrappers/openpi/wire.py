"""Our observation dict <-> an openpi LIBERO request.

Client side: images rotated 180 degrees already (the backend does it, as the openpi evaluator),
resized with padding to 224 x 224 uint8; ``observation/state`` is the 8-D standard state. Our own
privileged policies can also receive object poses under ``observation/object_poses``.
"""

from __future__ import annotations

import cv2
import numpy as np

from recovery.core.robot import Observation

IMAGE = "observation/image"
WRIST_IMAGE = "observation/wrist_image"
STATE = "observation/state"
OBJECT_POSES = "observation/object_poses"
PROMPT = "prompt"


def resize_with_pad(image: np.ndarray, size: int) -> np.ndarray:
    """Keep the aspect ratio, pad with black to ``size`` x ``size``, uint8 (openpi's image_tools)."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        image = (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)
    h, w = image.shape[:2]
    scale = size / max(h, w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR) if (nh, nw) != (h, w) else image
    out = np.zeros((size, size, 3), dtype=np.uint8)
    top, left = (size - nh) // 2, (size - nw) // 2
    out[top:top + nh, left:left + nw] = resized
    return out


def to_request(obs: Observation, prompt: str, image_size: int = 224, send_object_poses: bool = False) -> dict:
    request = {STATE: np.asarray(obs["state"], dtype=np.float32), PROMPT: prompt}
    if "agentview_image" in obs:
        request[IMAGE] = resize_with_pad(obs["agentview_image"], image_size)
    if "wrist_image" in obs:
        request[WRIST_IMAGE] = resize_with_pad(obs["wrist_image"], image_size)
    if send_object_poses:
        request[OBJECT_POSES] = {k: np.asarray(v, dtype=np.float64) for k, v in obs["object_poses"].items()}
    return request


def from_request(request: dict) -> tuple[Observation, str]:
    """Server side: the observation our policies read, and the prompt. Raises ValueError if malformed."""
    if not isinstance(request, dict) or STATE not in request or PROMPT not in request:
        raise ValueError(f"request must be a map with {STATE!r} and {PROMPT!r}")
    state = np.asarray(request[STATE], dtype=np.float64)
    if state.shape != (8,):
        raise ValueError(f"{STATE} must have shape (8,), got {state.shape}")
    obs: Observation = {"state": state, "eef_pos": state[:3], "gripper_qpos": state[6:]}
    if IMAGE in request:
        obs["agentview_image"] = np.asarray(request[IMAGE])
    if WRIST_IMAGE in request:
        obs["wrist_image"] = np.asarray(request[WRIST_IMAGE])
    if OBJECT_POSES in request:
        poses = request[OBJECT_POSES]
        obs["object_poses"] = {(k.decode() if isinstance(k, bytes) else k): np.asarray(v) for k, v in poses.items()}
    return obs, str(request[PROMPT])
