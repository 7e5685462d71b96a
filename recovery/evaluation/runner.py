"""Run many episodes, in-process or over worker processes, writing each record as it ends."""

from __future__ import annotations

import ctypes
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from critics.references import load_references
from recovery.core import float_paths
from recovery.core.decision import UnknownSelectorError
from recovery.core.errors import RecoveryError
from recovery.core.interrupts import stop_on_interrupt
from recovery.core.loop import LoopConfig, run_episode
from recovery.evaluation.assembly import build_backend, build_supervisor, make_selector
from recovery.evaluation.results import SAMPLED_LAYOUT, EpisodeSpec, ResultsFile
from recovery.evaluation.trajectory import TrajectoryRecorder
from recovery.evaluation.video import VideoRecorder
from recovery.evaluation.world import WorldWatch
from recovery.ray_cluster import connect
from recovery.supervision.build import critic_path
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbanceConfig
from sim.tasks import resolve_task, resolve_tasks
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy, policy_class

log = logging.getLogger(__name__)

# Worker processes run one simulator per core. OpenBLAS would start a thread per core in each, and
# its threads spin between calls, against the other worker's simulator: episodes ran 15% slower
# with 2 workers on 2 cores (benchmarks/eval_loop_speed.py). Ray sets OMP_NUM_THREADS for its actors.
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


@dataclass(frozen=True)
class EvalConfig:
    suite: str
    tasks: tuple[int | str, ...] = ()  # empty: every task of the suite
    episodes: int = 50  # per task; episode i uses init state i
    sampled_layouts: bool = False  # episode i: a layout sampled with seed + i instead (training data)
    policy: str = "expert"
    policy_options: dict[str, str] = field(default_factory=dict)  # --policy-opt KEY=VALUE
    seed: int = 7
    workers: int = 1
    out: Path = Path("results/eval.jsonl")
    video_dir: Path | None = None
    max_steps: int | None = None  # None: the suite's standard budget
    replan_every: int = 5
    camera_size: int = 256  # used only when the policy, the video or the recording needs images
    record_trajectories: bool = False  # attach each episode's arrays to its record as "trajectory"
    record_images: bool = False
    record_world: bool = False  # the objects around each rollback (recovery.evaluation.world) as "world"
    recovery: RecoveryOptions | None = None  # None: the policy alone, no supervisor
    disturbance: str = "none"
    dart: bool = False  # also jitter every executed arm action (training data: recorded labels stay clean)
    end_after_recovery: bool = False  # end an episode once its first recovery is over (collecting repairs: its
    # success is then not known)
    progress: bool = True
    ray_address: str | None = None  # shard episodes over a Ray cluster ("local", "auto", HOST:PORT)


class TooManyEpisodesError(RecoveryError, ValueError):
    """More episodes asked for than a task has init states."""


def plan_episodes(config: EvalConfig) -> list[EpisodeSpec]:
    """Every episode of the evaluation, validated before anything runs."""
    policy_class(config.policy)  # an unknown policy fails here, not once per episode
    DisturbanceConfig(name=config.disturbance)  # and so does an unknown disturbance
    recovery = config.recovery
    if recovery and recovery.selector.startswith("oracle") and config.disturbance == "none":
        raise UnknownSelectorError("the oracle selector is told when the disturbance ended: it needs --disturbance")
    variant = {"selector": recovery.selector, "rollback": recovery.rollback, "repair": recovery.repair} if recovery else {}
    specs = []
    for task in resolve_tasks(config.suite, list(config.tasks)):
        if recovery:
            _check_recovery_inputs(recovery, task)
        if config.sampled_layouts:
            layouts = [(SAMPLED_LAYOUT, config.seed + i) for i in range(config.episodes)]
        else:
            available = len(task.init_states())
            if config.episodes > available:
                raise TooManyEpisodesError(f"{task.label} ({task.name}) has {available} init states; "
                                           f"--episodes {config.episodes} asks for more")
            layouts = [(i, config.seed) for i in range(config.episodes)]
        specs += [EpisodeSpec(task.suite, task.index, init, seed, config.policy, disturbance=config.disturbance,
                              **variant) for init, seed in layouts]
    return specs


def _check_recovery_inputs(options: RecoveryOptions, task) -> None:
    load_references(options.references, task.suite, task.name)  # names the command that builds them
    path = critic_path(options, task.suite)
    if path is not None and not path.exists():
        raise FileNotFoundError(f"value critic {path} does not exist; train one with `recovery train-critic`")


class EpisodeWorker:
    """Keeps one backend (and its policy) alive per task and turns any crash into an error record."""

    def __init__(self, config: EvalConfig):
        self.config = config
        self._sim_key: tuple | None = None
        self._backend = None
        self._agent = None
        self._weights: str | None = None  # the base policy's weights digest, recorded with each episode

    def run(self, spec: EpisodeSpec) -> dict:
        task = resolve_task(spec.suite, spec.task)
        record = {**asdict(spec), "task_name": task.name, "success": False, "steps": 0, "inferences": 0,
                  "error": None, "recovery": None}
        start = time.perf_counter()
        try:
            backend, agent = self._ensure(spec)
            start = time.perf_counter()  # the episode itself, not building the simulator
            backend.reset(spec.init_index, spec.seed)
            subscribers = [VideoRecorder(self.config.video_dir / spec.slug)] if self.config.video_dir else []
            repair_goal = (lambda: agent.repair_goal) if isinstance(agent, Supervisor) else None
            recorder = TrajectoryRecorder(backend.flat_state, repair_goal) if self.config.record_trajectories else None
            subscribers += [recorder] if recorder else []
            world = WorldWatch() if self.config.record_world else None
            subscribers += [world] if world else []
            loop = LoopConfig(max_steps=self.config.max_steps or task.max_steps)
            stop = (lambda: "recovered" if agent.rollbacks else None) if self.config.end_after_recovery else None
            outcome = run_episode(backend, agent, backend.instruction, loop, tuple(subscribers), stop)
            record.update(success=outcome.success, steps=outcome.steps, inferences=outcome.inferences)
            if self._weights:
                record["policy_weights"] = self._weights
            record["recovery"] = outcome.extras or None
            if self.config.disturbance != "none":
                record["disturbance_info"] = backend.record()
            if outcome.error is not None:
                raise outcome.error
            if recorder:
                record["trajectory"] = recorder.arrays()
            if world:
                record["world"] = world.summary
        except Exception:
            record["error"] = traceback.format_exc()
            log.error("episode %s failed after %d steps:\n%s", spec.slug, record["steps"], record["error"])
            self.close()  # the simulator may be in any state: build a fresh one next time
        record["wall_time"] = round(time.perf_counter() - start, 3)
        return record

    def _ensure(self, spec: EpisodeSpec):
        if spec.simulator_key() != self._sim_key:
            self.close()
            needs_images = (policy_class(spec.policy).needs_images or self.config.video_dir is not None
                            or self.config.record_images)
            self._backend = build_backend(spec, self.config.camera_size if needs_images else None,
                                          self.config.disturbance, self.config.dart)
            broker = ChunkBroker(make_policy(spec.policy, self._backend, self.config.policy_options),
                                 self.config.replan_every)
            self._weights = broker.policy.weights_digest()
            recovery = self.config.recovery
            self._agent = build_supervisor(self._backend, broker, spec, recovery) if recovery else broker
            self._sim_key = spec.simulator_key()
        return self._backend, self._agent

    def run_all(self, specs: list[EpisodeSpec]) -> list[dict]:
        return [self.run(spec) for spec in specs]

    def close(self) -> None:
        if self._agent is not None:
            self._agent.close()
        if self._backend is not None:
            self._backend.close()
        self._sim_key, self._backend, self._agent = None, None, None


_worker: EpisodeWorker | None = None


def _init_worker(config: EvalConfig, parent: int) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    _die_with(parent)
    _worker = EpisodeWorker(config)


def _die_with(parent: int) -> None:
    """A worker whose evaluation was killed (no Ctrl-C to clean up after) would simulate on for nobody.
    On Linux the kernel kills it with its parent (PR_SET_PDEATHSIG: even inside a long C call that
    holds the GIL, such as compiling a MuJoCo model); elsewhere a thread watches the parent."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it was gone before we asked
        os._exit(1)


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _run_in_worker(spec: EpisodeSpec) -> dict:
    return _worker.run(spec)


def _batches(specs: list[EpisodeSpec], size: int = 10) -> list[list[EpisodeSpec]]:
    """Consecutive episodes that share a simulator, so that a remote worker builds it once per batch."""
    batches: list[list[EpisodeSpec]] = []
    for spec in specs:
        last = batches[-1] if batches else None
        if last and len(last) < size and last[0].simulator_key() == spec.simulator_key():
            last.append(spec)
        else:
            batches.append([spec])
    return batches


def _execute_on_ray(specs: list[EpisodeSpec], config: EvalConfig) -> Iterator[dict]:
    """``config.workers`` Ray actors, each an EpisodeWorker; records come back a batch at a time."""
    from ray.util import ActorPool

    ray = connect(config.ray_address, num_cpus=config.workers)
    remote_worker = ray.remote(num_cpus=1)(EpisodeWorker)
    actors = [remote_worker.remote(config) for _ in range(max(config.workers, 1))]
    try:
        for records in ActorPool(actors).map_unordered(lambda actor, batch: actor.run_all.remote(batch),
                                                       _batches(specs)):
            yield from records
    finally:
        for actor in actors:
            ray.kill(actor)


def _execute(specs: list[EpisodeSpec], config: EvalConfig) -> Iterator[dict]:
    if config.ray_address:
        yield from _execute_on_ray(specs, config)
        return
    if config.workers <= 1:
        worker = EpisodeWorker(config)
        try:
            yield from (worker.run(spec) for spec in specs)
        finally:
            worker.close()
        return
    for name in ONE_THREAD:  # a user's own setting wins
        os.environ.setdefault(name, "1")
    ctx = multiprocessing.get_context("spawn")  # MuJoCo/EGL state must not be forked
    pool = ProcessPoolExecutor(config.workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(config, os.getpid()))
    try:
        futures = [pool.submit(_run_in_worker, spec) for spec in specs]
        yield from (f.result() for f in as_completed(futures))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():
            child.terminate()


def _settings(selector, options: RecoveryOptions) -> dict:
    """What makes two runs of a variant the same experiment: the selector's settings and the repair policy."""
    if options.repair != "policy":
        return selector.settings()
    return {**selector.settings(), "repair_policy": options.repair_policy,
            "repair_displaced": options.supervisor.repair.displaced, **{
                f"repair_policy.{key}": value for key, value in sorted(options.repair_policy_options.items())}}


def evaluate(config: EvalConfig, on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Run every planned episode not already in ``config.out``; return all of this plan's records.
    ``on_record`` sees each new record (with its trajectory, if recorded) before it is saved."""
    from tqdm import tqdm

    specs = plan_episodes(config)
    for problem in float_paths.unpinned():
        log.warning("episodes may not reproduce on other CPUs: %s", problem)
    # an unknown selector or a bad checkpoint fails here, before any episode
    selector = make_selector(config.recovery, config.suite, config.policy) if config.recovery else None
    settings = json.loads(json.dumps(_settings(selector, config.recovery))) if selector else {}  # as a record reads back
    if config.ray_address:
        connect(config.ray_address, num_cpus=config.workers)  # an unreachable cluster fails before anything runs
    store = ResultsFile(config.out)
    with store.exclusive():
        done = store.done_keys(specs[0].selector if specs else "off", settings)
        todo = [s for s in specs if s.key() not in done]
        successes = finished = 0
        with tqdm(total=len(specs), initial=len(specs) - len(todo), disable=not config.progress,
                  desc=f"{config.suite} {config.policy}", unit="ep") as bar, \
                stop_on_interrupt("stopping when the next episode ends (Ctrl-C again to stop now)") as stop:
            for record in _execute(todo, config):
                if on_record:
                    on_record(record)
                record.pop("trajectory", None)
                store.append({**record, "selector_settings": settings})
                successes, finished = successes + bool(record["success"]), finished + 1
                bar.update()
                bar.set_postfix(new_successes=f"{successes}/{finished}")
                if stop.is_set():
                    raise KeyboardInterrupt
    wanted = {s.key() for s in specs}
    return [r for r in store.load() if EpisodeSpec.key_of(r) in wanted]

