"""Build what one episode needs from the evaluation's options: backend, agent (policy or supervisor)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from critics.references import SHIPPED as REFERENCES_SHIPPED
from recovery.backend import RobotBackend
from recovery.evaluation.results import EpisodeSpec
from recovery.supervisor import SupervisorConfig

CRITICS_SHIPPED = Path(__file__).resolve().parents[2] / "critics" / "checkpoints"


@dataclass(frozen=True)
class RecoveryOptions:
    """The supervisor's settings; EvalConfig.recovery = None runs the policy alone."""

    selector: str = "rule"
    rollback: str = "physical"
    references: Path = REFERENCES_SHIPPED  # `recovery build-references` writes your own
    critic: Path | None = None  # None: the shipped critic of the suite, if any
    selector_path: Path | None = None  # the ppo selector's checkpoint; None: the shipped one of the suite
    rule_config: Path | None = None  # the rule's thresholds; None: the shipped calibration of suite and policy, if any
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)


def build_backend(spec: EpisodeSpec, camera_size: int | None, disturbance: str) -> RobotBackend:
    from sim.disturbances import DisturbanceConfig, DisturbedBackend
    from sim.libero_backend import LiberoBackend, LiberoConfig
    from sim.tasks import resolve_task

    backend = LiberoBackend(resolve_task(spec.suite, spec.task), LiberoConfig(camera_size=camera_size))
    if disturbance != "none":
        return DisturbedBackend(backend, DisturbanceConfig(name=disturbance), spec.task)
    return backend


def critic_path(options: RecoveryOptions, suite: str) -> Path | None:
    if options.critic is not None:
        return options.critic
    shipped = CRITICS_SHIPPED / f"{suite}.pt"
    return shipped if shipped.exists() else None


def make_selector(options: RecoveryOptions, suite: str, policy: str):
    """A fresh selector; ``ppo`` loads (and checks) its checkpoint, ``rule`` its suite's thresholds."""
    from recovery.learning.selector import PPOSelector, shipped_selector
    from recovery.rule_calibration import rule_config_for
    from recovery.selectors import SELECTORS, RuleSelector, UnknownSelectorError

    if options.selector == "ppo":
        return PPOSelector(options.selector_path or shipped_selector(suite), critic_path(options, suite))
    if options.selector == "rule":
        return RuleSelector(rule_config_for(suite, policy, options.rule_config))
    if options.selector == "oracle":
        from sim.oracle import DisturbanceOracle

        return DisturbanceOracle()
    if options.selector not in SELECTORS:
        raise UnknownSelectorError(f"unknown selector {options.selector!r}; valid: {', '.join(SELECTORS)}, ppo, "
                                   "oracle")
    return SELECTORS[options.selector]()


def build_supervisor(backend: RobotBackend, broker, spec: EpisodeSpec, options: RecoveryOptions, selector=None):
    """``selector`` None: the one ``options`` names. The value critic is loaded only where something
    reads it (the selector, or a trace for a plot): it is the largest per-step cost."""
    from critics.quality import QualityMonitor
    from critics.references import load_references
    from critics.risk import RiskMonitor
    from critics.value import ValueCritic
    from recovery.supervisor import Supervisor
    from sim.tasks import resolve_task

    task = resolve_task(spec.suite, spec.task)
    references = load_references(options.references, spec.suite, task.name)
    selector = selector or make_selector(options, spec.suite, spec.policy)
    if hasattr(selector, "bind"):  # the simulation-only oracle reads the disturbance
        selector.bind(backend)
    path = critic_path(options, spec.suite) if selector.reads_value or options.supervisor.keep_trace else None
    critic = ValueCritic.load(path) if path else None
    config = replace(options.supervisor, rollback=replace(options.supervisor.rollback, kind=options.rollback))
    return Supervisor(
        backend, broker, selector, QualityMonitor(references),
        value_fn=critic.value_fn if critic else None,
        risk=RiskMonitor(critic.risk_head if critic else None), config=config,
    )
