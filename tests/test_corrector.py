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


class Shove(Subscriber):
    """Slides an object across the floor after one executed period (a push that does not tip it)."""

    def __init__(self, backend, name: str, at: int, offset):
        self.backend, self.name, self.at, self.offset = backend, name, at, np.asarray(offset)
        self.steps: list[Step] = []

    def on_step(self, step: Step) -> None:
        self.steps.append(step)
        if step.index == self.at:
            sim = self.backend.raw.sim
            addr = sim.model.get_joint_qpos_addr(self.backend.raw.objects_dict[self.name].joints[-1])[0]
            sim.data.qpos[addr:addr + 3] += self.offset
            sim.forward()
            self.before = step.result.observation["object_poses"][self.name].copy()


def test_the_corrector_puts_a_shoved_object_back_and_the_arm_over_it(object_backend):
    """libero_object task 0: the base policy stands still; after period 14 a distractor is slid 8 cm;
    the REPAIR decided next goes to a state remembered from before: the corrector picks the
    object up, sets it down at its place and takes the arm back, all through the episode loop."""
    repair = ChunkBroker(make_policy(CORRECTOR, object_backend), RepairConfig.replan_every)
    supervisor = Supervisor(object_backend, ChunkBroker(make_policy("zero", object_backend)),
                            ScriptedSelector({15: Mode.REPAIR}), QualityMonitor(None),
                            config=SupervisorConfig(keep_trace=True), repair=repair)
    shove = Shove(object_backend, "cream_cheese_1", 14, [0.0, 0.08, 0.0])
    outcome = play(object_backend, supervisor, 0, 7, 200, (shove,))
    (recovery,) = outcome.extras["recoveries"]
    assert recovery["mode"] == "REPAIR" and recovery["repair"] == "cream_cheese_1" and recovery["reached"]
    repairing = [step for step in shove.steps if step.mode == Mode.REPAIR]
    assert len(repairing) == recovery["steps"] and not any(isinstance(s.command, JointTarget) for s in repairing)
    end = repairing[-1].result.observation["object_poses"]["cream_cheese_1"]
    displacement, tilt = pose_change(shove.before, end)
    assert displacement < RepairConfig.placed and tilt < RepairConfig.tipped
