"""More disturbed-only rollouts for a critic experiment (``inputs.py``), in train-critic's store format.

Sampled layouts of seeds 22000+ (train-critic's are 2000+ nominal and 12000+ disturbed; never an
evaluation init state), the action-noise burst; resumable like an evaluation.

Usage: python reports/critics/more_disturbed.py SUITE EPISODES_PER_TASK OUT
(we ran: libero_spatial 120 EXTRA, 30 min on 2 cores)
"""

import sys
from pathlib import Path

from recovery.pipelines.train_critic import CriticTrainConfig, collect_condition

if __name__ == "__main__":
    suite, per_task, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    collect_condition(CriticTrainConfig(suite=suite, episodes_per_task=per_task, workers=2), "action_noise", 22_000,
                      out / suite)
