"""What happened to the objects around each rollback: the world against the remembered state it aimed for.

A physical rollback drives the arm back to a remembered state and leaves the objects where the
disturbance left them. This episode subscriber (``recovery eval --record-world``) measures how far
the world was from that state when the rollback was decided and when it ended, and at the end of
the episode, from the privileged object poses every LIBERO observation carries. Per object that
differs by more than ``LISTED``: [displacement m, tilt rad (``recovery.supervision.repair.pose_change``:
about the direction that pointed up), height change m]. The records in reports/taxonomy/ measured the
tilt between the objects' local z axes, which misses a soup can (it stands on its local y) knocked over.
"""

from __future__ import annotations

import numpy as np

from recovery.core.loop import EpisodeOutcome, Step, Subscriber
from recovery.core.robot import RECOVERY_MOTION, Observation
from recovery.supervision.repair import finger_gap, pose_change

LISTED = (0.005, 0.05)  # m, rad: smaller differences are left out of the record

Poses = dict[str, np.ndarray]


def object_changes(before: Poses, after: Poses) -> dict[str, list[float]]:
    """Objects that moved between two worlds: name -> [displacement m, tilt rad, height change m]."""
    out = {}
    for name, pose in after.items():
        if name not in before:
            continue
        displacement, tilt = pose_change(before[name], pose)
        if displacement > LISTED[0] or tilt > LISTED[1]:
            out[name] = [round(displacement, 4), round(tilt, 4), round(float(pose[2] - before[name][2]), 4)]
    return out


def _poses(obs: Observation) -> Poses:
    return {name: np.asarray(pose, dtype=np.float64) for name, pose in obs.get("object_poses", {}).items()}


def _fingers(obs: Observation) -> float:
    return round(finger_gap(obs["state"]), 4)


class WorldWatch(Subscriber):
    """Per rollback: the target's policy step, the world at the decision and after the motion
    (against the target's world), the highest any object rose above its target height in between
    (held, then lost), whether the arm reached the target, and the gripper's opening at the target
    and after (a physical rollback opens it); at the end, the world against the last target and
    against the start."""

    def on_episode_start(self, obs: Observation) -> None:
        self._start, self._last = _poses(obs), obs
        self._by_policy_step: list[Poses] = []  # the world each policy command was taken from
        self._fingers: list[float] = []  # and the gripper's opening then
        self._rollbacks: list[dict] = []
        self._awaiting: list[str] = []  # what the next executed period's observation completes

    def on_event(self, event: dict) -> None:
        if event["event"] == "decision" and "target_step" in event:
            target = event["target_step"]
            between = self._by_policy_step[target:]
            rose = {name: round(max(float(w[name][2] - pose[2]) for w in between), 4)
                    for name, pose in self._by_policy_step[target].items()} if between else {}
            self._rollbacks.append({"target_step": target, "decision_step": len(self._by_policy_step),
                                    "rose": {k: v for k, v in rose.items() if v > LISTED[0]},
                                    "fingers": [self._fingers[target]], **({"repair": event["repair"]}
                                                                          if "repair" in event else {})})
            self._awaiting.append("at_decision")
        elif event["event"] == "rollback_end":
            self._rollbacks[-1].update(reached=event["reached"], periods=event["steps"])
            self._awaiting.append("after")

    def on_step(self, step: Step) -> None:
        world = _poses(step.observation)
        for key in self._awaiting:
            rollback = self._rollbacks[-1]
            rollback[key] = object_changes(self._by_policy_step[rollback["target_step"]], world)
            if key == "after":
                rollback["fingers"].append(_fingers(step.observation))
        self._awaiting = []
        if not isinstance(step.command, RECOVERY_MOTION):
            self._by_policy_step.append(world)
            self._fingers.append(_fingers(step.observation))
        self._last = step.result.observation  # its poses are read once, at the end

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        target = self._by_policy_step[self._rollbacks[-1]["target_step"]] if self._rollbacks else None
        last = _poses(self._last)
        self.summary = {"rollbacks": self._rollbacks, "end_vs_start": object_changes(self._start, last),
                        "end_vs_target": object_changes(target, last) if target else None}
