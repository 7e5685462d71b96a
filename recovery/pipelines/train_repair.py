"""``recovery train-repair``: clone the scripted corrector's repairs into the learned repair policy.

The network and training are the embedded policy's (``recovery.pipelines.train_policy``); its input
adds the repair target to the state features (``vla_wrappers.repair.layout``), so that at run time
it reads only what a robot perceives and remembers, never the simulator.
"""

from __future__ import annotations

from recovery.core.features import FeatureLayout
from recovery.pipelines.train_policy import TrainConfig, fit_chunk_net
from sim.repair_demos import RepairDemo, load_repairs
from vla_wrappers.embedded.model import REPAIR, Checkpoint
from vla_wrappers.repair.layout import RepairLayout


def _repair_features(layout: FeatureLayout, demo: RepairDemo, task_id: int, t: int):
    return RepairLayout(layout).featurize(demo.state[t], dict(zip(demo.object_names, demo.object_poses[t])), task_id,
                                          demo.goal)


def train_repair(config: TrainConfig) -> Checkpoint:
    """``config.demos_dir``: where `recovery collect-repairs` wrote the repair demonstrations. Only
    repairs with an object to put back are cloned: the supervisor runs the repair policy only then
    (a recovery with nothing to restore is a rollback)."""
    demos = [demo for demo in load_repairs(config.demos_dir, config.suite) if demo.goal["focus"]]
    return fit_chunk_net(config, demos, REPAIR, _repair_features)
