"""MP4 of an episode: agent view and wrist view side by side, one frame per executed control
step (rollback motion included), each labelled with the mode it ran in."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recovery.core.loop import EpisodeOutcome, Step, Subscriber
from recovery.core.modes import Mode
from recovery.core.robot import Observation

FPS = 20  # LIBERO's control frequency: the video plays in real time
FRAME_KEYS = ("agentview_image", "wrist_image")
MODE_COLOURS = {Mode.EXECUTE: (255, 255, 255), Mode.HOLD: (255, 200, 0)}  # RGB; recovery modes: red
RECOVERY_COLOUR = (255, 60, 60)


class VideoRecorder(Subscriber):
    """Episode subscriber; writes ``path`` when the episode ends (``_ok``/``_fail`` suffix)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._frames: list[np.ndarray] = []

    def on_episode_start(self, obs: Observation) -> None:
        self._frames = [self._frame(obs, Mode.EXECUTE)]

    def on_step(self, step: Step) -> None:
        self._frames.append(self._frame(step.result.observation, step.mode))

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        import cv2

        if not self._frames:
            return
        target = self.path.with_name(f"{self.path.stem}_{'ok' if outcome.success else 'fail'}.mp4")
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
    def _frame(obs: Observation, mode: Mode) -> np.ndarray:
        import cv2

        missing = [k for k in FRAME_KEYS if k not in obs]
        if missing:
            raise KeyError(f"video needs camera observations {missing}; build the backend with a camera size")
        frame = np.ascontiguousarray(np.concatenate([obs[k] for k in FRAME_KEYS], axis=1))
        scale = frame.shape[0] / 256
        cv2.putText(frame, mode.name, (int(6 * scale) + 1, int(22 * scale) + 1), cv2.FONT_HERSHEY_SIMPLEX, 0.6 * scale,
                    (0, 0, 0), max(1, int(2 * scale)), cv2.LINE_AA)
        cv2.putText(frame, mode.name, (int(6 * scale), int(22 * scale)), cv2.FONT_HERSHEY_SIMPLEX, 0.6 * scale,
                    MODE_COLOURS.get(mode, RECOVERY_COLOUR), max(1, int(2 * scale)), cv2.LINE_AA)
        return frame
