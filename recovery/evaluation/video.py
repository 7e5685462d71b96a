"""MP4 of an episode: agent view and wrist view side by side, one frame per control step."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recovery.backend import Observation

FPS = 20  # LIBERO's control frequency: the video plays in real time
FRAME_KEYS = ("agentview_image", "wrist_image")


class VideoRecorder:
    """Episode subscriber; writes ``path`` when the episode ends (``_ok``/``_fail`` suffix)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._frames: list[np.ndarray] = []

    def on_episode_start(self, obs: Observation) -> None:
        self._frames = [self._frame(obs)]

    def on_step(self, obs: Observation, action: np.ndarray) -> None:
        self._frames.append(self._frame(obs))

    def on_episode_end(self, success: bool) -> None:
        import cv2

        target = self.path.with_name(f"{self.path.stem}_{'ok' if success else 'fail'}.mp4")
        target.parent.mkdir(parents=True, exist_ok=True)
        height, width = self._frames[0].shape[:2]
        writer = cv2.VideoWriter(str(target), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (width, height))
        try:
            for frame in self._frames:
                writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        self._frames = []

    @staticmethod
    def _frame(obs: Observation) -> np.ndarray:
        missing = [k for k in FRAME_KEYS if k not in obs]
        if missing:
            raise KeyError(f"video needs camera observations {missing}; build the backend with a camera size")
        return np.concatenate([obs[k] for k in FRAME_KEYS], axis=1)
