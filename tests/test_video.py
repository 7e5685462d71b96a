"""Episode videos: one frame per executed control step, rollback motion included, labelled with its mode."""

from __future__ import annotations

import cv2
import numpy as np

from recovery.core.modes import Mode
from recovery.evaluation.video import VideoRecorder
from tests.kinematic_robot import KinematicRobot
from tests.test_loop import UNREACHABLE, Log, ScriptedSelector, play, supervisor


def _frames(path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            return frames
        frames.append(frame)


def test_the_video_shows_every_executed_step_and_its_mode(tmp_path):
    robot = KinematicRobot(goal=UNREACHABLE, camera_size=128)
    log = Log(robot, push_at=12)
    play(robot, supervisor(robot, ScriptedSelector({15: Mode.RETRY}), UNREACHABLE), max_steps=40,
         subscribers=(log, VideoRecorder(tmp_path / "episode")))
    frames = _frames(tmp_path / "episode_fail.mp4")
    assert len(frames) == 1 + 40  # the first observation, then one frame per executed step
    label = (slice(0, 40), slice(0, 120))  # top left, where the mode is written

    def red(frame):  # BGR: recovery modes are written in red, EXECUTE in white
        region = frame[label].astype(int)
        return int(np.sum((region[..., 2] > 150) & (region[..., 1] < 120) & (region[..., 0] < 120)))

    rollback = [s.index for s in log.steps if s.mode == Mode.RETRY]
    assert rollback and all(red(frames[i]) > 20 for i in rollback)
    assert all(red(frames[s.index]) == 0 for s in log.steps if s.mode == Mode.EXECUTE)
