"""The privileged scripted corrector: the teacher of the learned repair policy, never run in evaluation.

Given a repair target (``recovery.supervision.repair.RepairTarget``: a remembered grip pose,
gripper and world, and the object to put back), it plans from the simulator's true state with the
scripted expert's skills: pick the focus up, then either carry it to the target's grip pose (it was
in the hand there) or set it down at its remembered place; a focus knocked over is stood up where
it lies (``_stand_up``); last, take the arm back to the target's grip pose over the objects, not
through them (``ScriptedExpert._travel``: rise, cross, descend).
``recovery collect-repairs`` runs it on disturbed episodes of the base policy and records what it
does; ``recovery train-repair`` clones it into a policy that reads only what a robot can perceive.
"""

from __future__ import annotations

import numpy as np

from recovery.core.features import quat_xyzw_to_matrix
from recovery.core.robot import Observation, RobotBackend
from sim import scene
from sim.expert import (CLOSE, FINGER_CLEARANCE, HAND_MARGIN, HOVER, OPEN, Actions, ScriptedExpert, axis_rotation,
                        down_rotation)
from recovery.core.servo import servo_action
from sim.libero_backend import LiberoBackend
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput

RELEASE_ABOVE = 0.005  # m: a set-down object is let go with its bottom this far above its remembered height
STAND_CLEARANCE = 0.06  # m: a lying object is lifted this far above half its length before it is turned up
TURN_STEPS, SETTLE_TURN = 12, 4  # control steps of the quarter turn, and of waiting for the swing to settle
STAND_RELEASE = 0.003  # m: a stood-up object is let go with its bottom this far above the support


class ScriptedCorrector(ScriptedExpert):
    def restore(self, goal: dict) -> None:
        """Plan the repair toward ``goal`` (a ``RepairTarget.observation()``); ``act`` executes it."""
        self._script = self._restore(goal)

    def _restore(self, goal: dict) -> Actions:
        focus, rot = goal["focus"] or None, np.asarray(goal["eef_rot"])
        holding = bool(goal["holding"])
        if focus is not None:
            yield from self._settle()  # a knocked object still rolling: plan on where it comes to rest
            if goal["focus_tipped"]:
                yield from self._stand_up(focus, np.asarray(goal["object_poses"][focus]))
            elif not (yield from self._pick(focus)):
                yield from self._gripper(OPEN, 8)  # missed: the arm still goes back, the policy takes over
            elif not goal["focus_held"]:
                target = np.asarray(goal["object_poses"][focus])
                height = scene.body_pos(self.env, focus)[2] - scene.entity_box(self.env, focus).lo[2]
                yield from self._carry_to(focus, target[:2], target[2] - height + RELEASE_ABOVE)
        grip = CLOSE if holding else OPEN
        cur, _ = self._pose()
        carried = focus if holding else ""
        height = self._corridor_top(carried, cur[:2], np.asarray(goal["eef_pos"])[:2]) + HAND_MARGIN
        yield from self._travel(np.asarray(goal["eef_pos"]), rot, grip, height)
        while True:
            yield self._hold_action(grip)


    def _stand_up(self, obj: str, standing: np.ndarray) -> Actions:
        """Grasp an object lying on its side across its middle, lift it, turn the hand a quarter
        about the fingers' closing axis so that the direction that pointed up when it stood
        (``standing``: its pose then) points up again, lower it onto the support it lay on, let go
        and back the hand out the way it came."""
        up_there = quat_xyzw_to_matrix(standing[3:7])[2]  # that direction, in the object's own frame
        up = quat_xyzw_to_matrix(self.backend.observe()["object_poses"][obj][3:7]) @ up_there
        along = np.r_[up[:2], 0.0] / max(float(np.linalg.norm(up[:2])), 1e-9)  # the lying object's long axis
        pts = scene.entity_points(self.env, obj)
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        centre = (lo + hi) / 2
        grip = np.r_[centre[:2], max(centre[2], lo[2] + FINGER_CLEARANCE)]  # round bodies: at their axis
        rot = self._closest(down_rotation(np.cross([0.0, 0.0, 1.0], along)), self._pose()[1])
        hover = hi[2] + HOVER
        yield from self._gripper(OPEN, 4)
        yield from self._travel(np.r_[grip[:2], hover], rot, OPEN,
                                max(hover, self._corridor_top(obj, self._pose()[0][:2], grip[:2]) + HAND_MARGIN))
        yield from self._move(grip, rot, OPEN, max_steps=50, tol=0.004)
        yield from self._gripper(CLOSE, 10)
        length = float(np.ptp(pts @ up))  # the object's extent along its own up axis
        lift = np.r_[self._pose()[0][:2], lo[2] + length / 2 + STAND_CLEARANCE]
        yield from self._move(lift, rot, CLOSE, max_steps=40, tol=0.01)
        closing = rot[:, 0]
        sign = 1.0 if (axis_rotation(closing, np.pi / 2) @ up)[2] > 0 else -1.0
        for k in range(1, TURN_STEPS + SETTLE_TURN + 1):  # turn a little each step, then let the swing settle
            cur, cur_rot = self._pose()
            turned = axis_rotation(closing, sign * np.pi / 2 * min(1.0, k / TURN_STEPS)) @ rot
            yield servo_action(cur, cur_rot, lift, turned, CLOSE, self.gains)
        bottom = scene.entity_points(self.env, obj)[:, 2].min()
        cur, _ = self._pose()
        yield from self._move(cur - [0.0, 0.0, bottom - lo[2] - STAND_RELEASE], turned, CLOSE, max_steps=40, tol=0.004)
        yield from self._gripper(OPEN, 8)
        cur, cur_rot = self._pose()
        yield from self._move(cur - cur_rot[:, 2] * 0.06, cur_rot, OPEN, max_steps=20, tol=0.015)  # back out
        cur, _ = self._pose()
        yield from self._move(cur + [0.0, 0.0, 0.06], rot, OPEN, max_steps=25, tol=0.015, rot_tol=0.1)  # hand down again
        return True


class CorrectorPolicy(Policy):
    """The corrector behind the Policy contract (one-step chunks): it plans at the first inference
    after each reset, from the ``repair_target`` of the observation."""

    def __init__(self, backend: RobotBackend | None):
        sim = backend.unwrapped if backend is not None else None
        if not isinstance(sim, LiberoBackend):
            raise PolicyConfigError("the scripted corrector reads privileged simulator state: it needs a LiberoBackend")
        self._corrector = ScriptedCorrector(sim)
        self._planned = False

    def reset(self, instruction: str) -> None:
        self._corrector.reset()
        self._planned = False

    def infer(self, obs: Observation) -> PolicyOutput:
        if "repair_target" not in obs:
            raise PolicyConfigError("the corrector repairs toward obs['repair_target']: run it as a repair policy")
        if not self._planned:
            self._corrector.restore(obs["repair_target"])
            self._planned = True
        return PolicyOutput(self._corrector.act(obs)[None])
