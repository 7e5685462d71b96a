"""The privileged scripted corrector: the teacher of the learned repair policy, never run in evaluation.

Given a repair target (``recovery.supervision.repair.RepairTarget``: a remembered grip pose,
gripper and world, and the object to put back), it plans from the simulator's true state with the
scripted expert's skills: pick the focus up, then either carry it to the target's grip pose (it was
in the hand there) or set it down at its remembered place; last, take the arm back to the target's
grip pose over the objects, not through them (``ScriptedExpert._travel``: rise, cross, descend).
``recovery collect-repairs`` runs it on disturbed episodes of the base policy and records what it
does; ``recovery train-repair`` clones it into a policy that reads only what a robot can perceive.
"""

from __future__ import annotations

import numpy as np

from recovery.core.robot import Observation, RobotBackend
from sim import scene
from sim.expert import CLOSE, HAND_MARGIN, OPEN, Actions, ScriptedExpert
from sim.libero_backend import LiberoBackend
from vla_wrappers.base import Policy, PolicyConfigError, PolicyOutput

RELEASE_ABOVE = 0.005  # m: a set-down object is let go with its bottom this far above its remembered height


class ScriptedCorrector(ScriptedExpert):
    def restore(self, goal: dict) -> None:
        """Plan the repair toward ``goal`` (a ``RepairTarget.observation()``); ``act`` executes it."""
        self._script = self._restore(goal)

    def _restore(self, goal: dict) -> Actions:
        focus, rot = goal["focus"] or None, np.asarray(goal["eef_rot"])
        holding = bool(goal["holding"])
        if focus is not None:
            if not (yield from self._pick(focus)):
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
