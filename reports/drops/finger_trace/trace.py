"""Per-step (commanded closed, touching, holding) and finger opening of the rule's episodes, run at f2bd0f6 (the
monitor before the change): `python trace.py SUITE rule DISTURBANCE OUT.jsonl FIRST_INIT END_INIT` (init states 0-1)."""
import sys, os, json
from recovery.cli import _recovery_options, build_parser
from recovery.evaluation.results import EpisodeSpec
from recovery.evaluation.runner import EpisodeWorker, EvalConfig
from recovery.supervision import grasp as G
from recovery.supervision import supervisor as S
from sim.tasks import resolve_task

SUITE, SEL, DIST, OUT = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
inits = range(int(sys.argv[5]), int(sys.argv[6]))
log, fing = [], []
orig = G.GraspMonitor.update
def update(self, closed, contacts, thr):
    h = orig(self, closed, contacts, thr)
    log.append((bool(closed), bool(contacts.touching) or not contacts.is_free(thr), h))
    return h
G.GraspMonitor.update = update
orig_obs = S.Supervisor.observe
def observe(self, obs):
    fing.append(round(float(obs["state"][6] - obs["state"][7]), 5))
    return orig_obs(self, obs)
S.Supervisor.observe = observe
args = build_parser("plot-episode").parse_args(["plot-episode", "--suite", SUITE, "--selector", SEL])
config = EvalConfig(suite=SUITE, policy="embedded", policy_options=[], disturbance=DIST,
                    recovery=_recovery_options(args, keep_trace=False))
w = EpisodeWorker(config)
with open(OUT, "a") as f:
    for init in inits:
        for task_i in range(10):
            log.clear(); fing.clear()
            task = resolve_task(SUITE, task_i)
            spec = EpisodeSpec(task.suite, task.index, init, 7, "embedded", selector=SEL, disturbance=DIST, rollback="physical", repair="rollback")
            rec = w.run(spec)
            f.write(json.dumps({"task": task_i, "init": init, "success": rec["success"], "dist": rec.get("disturbance_info"),
                                "rec": rec["recovery"]["recoveries"], "log": log[:], "gap": fing[:]}) + "\n"); f.flush()
w.close()
