"""The stand-up probe of reports/repair.md: libero_object under object_tip, 5 sampled layouts a task (seed
31000+, never an evaluation init state), the shipped rule with the privileged corrector as the repair, drops
and tips only. Usage: python reports/repair/stand_up_probe/run.py OUT.jsonl (with stand_hover.patch applied
or not)."""
import sys
from pathlib import Path

from recovery.evaluation.runner import EvalConfig, evaluate
from recovery.supervision.config import RecoveryOptions, RepairConfig, SupervisorConfig

if __name__ == "__main__":
    evaluate(EvalConfig(suite="libero_object", tasks=tuple(range(10)), episodes=5, sampled_layouts=True,
                        policy="embedded", seed=31000, workers=2, disturbance="object_tip", out=Path(sys.argv[1]),
                        recovery=RecoveryOptions(selector="rule", repair="policy",
                                                 repair_policy="sim.corrector:CorrectorPolicy",
                                                 supervisor=SupervisorConfig(repair=RepairConfig(displaced=1.0)))))
