"""The learned repair policy behind the Policy contract: it reads the observation and its
``repair_target`` (``recovery.supervision.repair.RepairTarget.observation``) and answers with an
action chunk toward that target. The same checkpoint format and loading as the embedded policy;
a network is cloned from the privileged scripted corrector (``sim.corrector``) by ``recovery
collect-repairs`` and ``recovery train-repair``. None ships yet: the ones trained so far reach no
target (reports/repair.md), so ``--repair policy`` needs ``--repair-opt checkpoint=PATH``.
"""

from __future__ import annotations

import numpy as np

from recovery.core.robot import Observation
from recovery.core.shipped import shipped
from vla_wrappers.base import PolicyConfigError
from vla_wrappers.embedded.model import REPAIR
from vla_wrappers.embedded.policy import EmbeddedPolicy
from vla_wrappers.repair.layout import RepairLayout


class RepairPolicy(EmbeddedPolicy):
    kind, shipped, trained_by = REPAIR, shipped("vla_wrappers.repair", "checkpoints"), "train-repair"

    def features(self, obs: Observation) -> np.ndarray:
        layout = RepairLayout(self._ckpt.layout)
        if layout.size != len(self._ckpt.net.feat_mean):
            raise PolicyConfigError(f"this repair checkpoint reads {len(self._ckpt.net.feat_mean)} features; "
                                    f"this version makes {layout.size}")
        return layout.featurize_obs(obs, self._task_id)
