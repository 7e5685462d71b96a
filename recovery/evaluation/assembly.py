"""Build what one evaluation episode needs from its options: a LIBERO backend, an agent (the
policy alone, or a supervisor around it) and the selector, the simulation-only oracle included."""

from __future__ import annotations

from recovery.core.decision import Selector
from recovery.core.modes import Mode
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

# the oracles are told when the simulated disturbance ended
ORACLES = {"oracle": Mode.RETRY, "oracle_repair": Mode.REPAIR}
SELECTORS = (*build.SELECTORS, *ORACLES)


def build_backend(spec: EpisodeSpec, camera_size: int | None, disturbance: str, dart: bool = False) -> RobotBackend:
    """``dart``: jitter every executed arm action as well (collecting training data, ``sim.disturbances``)."""
    backend = LiberoBackend(resolve_task(spec.suite, spec.task), LiberoConfig(camera_size=camera_size))
    if disturbance != "none" or dart:
        return DisturbedBackend(backend, DisturbanceConfig(name=disturbance, dart=dart), spec.task)
    return backend


def make_selector(options: RecoveryOptions, suite: str, policy: str) -> Selector:
    if options.selector in ORACLES:
        return DisturbanceOracle(window=options.supervisor.retry_horizon, mode=ORACLES[options.selector])
    return build.make_selector(options, suite, policy)


def build_supervisor(backend: RobotBackend, broker: ChunkBroker, spec: EpisodeSpec, options: RecoveryOptions,
                     selector: Selector | None = None) -> Supervisor:
    """``selector`` None: the one ``options`` names."""
    selector = selector or make_selector(options, spec.suite, spec.policy)
    if isinstance(selector, DisturbanceOracle):
        selector.bind(backend)
    task = resolve_task(spec.suite, spec.task)
    return build.build_supervisor(backend, broker, spec.suite, task.name, selector, options)
