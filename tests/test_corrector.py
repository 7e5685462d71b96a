"""The scripted corrector repairs a real LIBERO world: the teacher of the learned repair policy."""

from __future__ import annotations

import numpy as np
import pytest

from critics.quality import QualityMonitor
from recovery.core.loop import Step, Subscriber
from recovery.core.modes import Mode
from recovery.core.robot import JointTarget
from recovery.supervision.config import RepairConfig, SupervisorConfig
from recovery.supervision.repair import pose_change
from recovery.supervision.supervisor import Supervisor
from tests.episodes import play
from tests.test_supervisor import ScriptedSelector
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy

pytestmark = pytest.mark.sim

CORRECTOR = "sim.corrector:CorrectorPolicy"


SOUP = "alphabet_soup_1"  # libero_object task 0 names it: "pick up the alphabet soup and place it in the basket"


class Knock(Subscriber):
    """After one executed period, moves the soup on the floor by ``offset`` and turns it ``quat``
    (wxyz): a shove, or a knock that lays it on its side."""

    def __init__(self, backend, at: int, offset, quat=None):
        self.backend, self.at, self.offset, self.quat = backend, at, np.asarray(offset), quat
        self.steps: list[Step] = []

    def on_step(self, step: Step) -> None:
        self.steps.append(step)
        if step.index == self.at:
            sim = self.backend.raw.sim
            addr = sim.model.get_joint_qpos_addr(self.backend.raw.objects_dict[SOUP].joints[-1])[0]
            sim.data.qpos[addr:addr + 3] += self.offset
            if self.quat is not None:
                sim.data.qpos[addr + 3:addr + 7] = self.quat
            sim.forward()
            self.before = step.result.observation["object_poses"][SOUP].copy()


def _repair_after(backend, knock: Knock) -> tuple[dict, list[Step]]:
    """The base policy stands still; the REPAIR decided at period 15, the first to see the knock,
    goes to a state remembered from before it, with the corrector as the repair policy."""
    repair = ChunkBroker(make_policy(CORRECTOR, backend), RepairConfig.replan_every)
    supervisor = Supervisor(backend, ChunkBroker(make_policy("zero", backend)), ScriptedSelector({15: Mode.REPAIR}),
                            QualityMonitor(None), config=SupervisorConfig(keep_trace=True), repair=repair)
    outcome = play(backend, supervisor, 0, 7, 200, (knock,))
    (recovery,) = outcome.extras["recoveries"]
    repairing = [step for step in knock.steps if step.mode == Mode.REPAIR]
    assert len(repairing) == recovery["steps"] and not any(isinstance(s.command, JointTarget) for s in repairing)
    return recovery, repairing


def test_the_corrector_puts_a_shoved_object_back_and_the_arm_over_it(object_backend):
    knock = Knock(object_backend, 14, [0.0, 0.08, 0.0])
    recovery, repairing = _repair_after(object_backend, knock)
    assert recovery["mode"] == "REPAIR" and recovery["repair"] == SOUP and recovery["reached"]
    displacement, tilt = pose_change(knock.before, repairing[-1].result.observation["object_poses"][SOUP])
    assert displacement < RepairConfig.placed and tilt < RepairConfig.tipped


def test_the_corrector_stands_a_knocked_over_object_up(object_backend):
    knock = Knock(object_backend, 14, [0.0, 0.0, 0.03], quat=[np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4), 0.0])
    recovery, repairing = _repair_after(object_backend, knock)
    lying = pose_change(knock.before, repairing[0].observation["object_poses"][SOUP])[1]
    standing = pose_change(knock.before, repairing[-1].result.observation["object_poses"][SOUP])[1]
    assert recovery["repair"] == SOUP and recovery["repair_kind"] == "stand up" and recovery["reached"]
    assert lying > np.radians(80) and standing < RepairConfig.tipped
