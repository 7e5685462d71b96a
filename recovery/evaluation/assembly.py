"""Build what one evaluation episode needs from its options: a LIBERO backend, an agent (the
policy alone, or a supervisor around it) and the selector, the simulation-only oracle included."""

from __future__ import annotations

from recovery.core.decision import Selector
from recovery.core.robot import RobotBackend
from recovery.evaluation.results import EpisodeSpec
from recovery.supervision import build
from recovery.supervision.config import RecoveryOptions
from recovery.supervision.supervisor import Supervisor
from sim.disturbances import DisturbanceConfig, DisturbedBackend
from sim.libero_backend import LiberoBackend, LiberoConfig
from sim.oracle import DisturbanceOracle
from sim.tasks import resolve_task
from vla_wrappers.broker import ChunkBroker

SELECTORS = (*build.SELECTORS, "oracle")  # the oracle is told when the simulated disturbance ended


def build_backend(spec: EpisodeSpec, camera_size: int | None, disturbance: str) -> RobotBackend:
    backend = LiberoBackend(resolve_task(spec.suite, spec.task), LiberoConfig(camera_size=camera_size))
    if disturbance != "none":
        return DisturbedBackend(backend, DisturbanceConfig(name=disturbance), spec.task)
    return backend


def make_selector(options: RecoveryOptions, suite: str, policy: str) -> Selector:
    if options.selector == "oracle":
        return DisturbanceOracle(window=options.supervisor.retry_horizon)
    return build.make_selector(options, suite, policy)


def build_supervisor(backend: RobotBackend, broker: ChunkBroker, spec: EpisodeSpec, options: RecoveryOptions,
                     selector: Selector | None = None) -> Supervisor:
    """``selector`` None: the one ``options`` names."""
    selector = selector or make_selector(options, spec.suite, spec.policy)
    if isinstance(selector, DisturbanceOracle):
        selector.bind(backend)
    task = resolve_task(spec.suite, spec.task)
    return build.build_supervisor(backend, broker, spec.suite, task.name, selector, options)
