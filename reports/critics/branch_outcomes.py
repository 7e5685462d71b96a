"""Is a post-burst outcome a function of the state the critic sees? An experiment (private attributes
used, not a tool): on sampled layouts (seeds 7000+, none of the critic's), run the embedded policy
under the action-noise burst to the step after the burst, snapshot the simulator, the broker's
queue and the disturbance's clock, then play the rest of the episode K + 1 times from there:
branch 0 as is, branch 1 as is again (the replay must agree), branches 2..K with the next action's
arm part moved by EPS times a standard normal (EPS = 0.001: 0.05 mm of goal). Writes one line a
state to reports/critics/branch_outcomes_SUITE.jsonl.

Usage: python reports/critics/branch_outcomes.py SUITE LAYOUTS_PER_TASK K EPS   (we ran: libero_spatial 2 6 0.001)
"""
import sys, json, copy, time
from collections import deque
import numpy as np, torch
from recovery.core.actions import WAIT_ACTION
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import LiberoBackend
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy
torch.set_num_threads(1)
suite, per_task, K, eps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
out = open(f"reports/critics/branch_outcomes_{suite}.jsonl", "a")
for task_index in range(10):
    task = resolve_task(suite, task_index)
    backend = DisturbedBackend(LiberoBackend(task), DisturbanceConfig(name="action_noise"), task_index)
    broker = ChunkBroker(make_policy("embedded", backend), 5)
    for j in range(per_task):
        seed = 7000 + 100 * task_index + j
        backend.reset(None, seed)
        for _ in range(10): backend.step(WAIT_ACTION)
        broker.reset(backend.instruction)
        steps = 0
        success = False
        while steps < task.max_steps and not success:
            r = backend.step(broker.act(backend.observe())); steps += 1; success = r.success
            if backend.steps_since_disturbance == 0: break
        if success or steps >= task.max_steps:
            continue
        snap, queue, state = backend.snapshot(), deque(broker._queue), (backend._t, backend._fired_at)
        outcomes = []
        for b in range(K + 1):
            backend.restore(snap); broker._queue = deque(queue); backend._t, backend._fired_at = state
            rng = np.random.default_rng(b)
            s, ok, first = steps, False, True
            while s < task.max_steps and not ok:
                a = np.asarray(broker.act(backend.observe()), dtype=np.float64)
                if first and b > 1:
                    a = a + np.r_[eps * rng.standard_normal(6), 0.0]
                first = False
                ok = backend.step(a).success; s += 1
            outcomes.append(bool(ok))
        rec = {"task": task_index, "seed": seed, "burst_end_step": steps, "replay_same": outcomes[0] == outcomes[1],
               "base": outcomes[0], "perturbed": outcomes[2:]}
        print(json.dumps(rec), flush=True); out.write(json.dumps(rec) + "\n"); out.flush()
    backend.close()
