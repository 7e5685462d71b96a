"""A supervisor from its parts, and the shipped files those parts read by default.

Used alike by the evaluation, the selector's training environment and the ROS supervisor node.
Selectors here: ``none``, ``rule`` and ``ppo``; the simulation-only ``oracle`` is added by the
evaluation (it reads the simulated disturbance).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

from critics.quality import QualityMonitor
from critics.references import load_references
from critics.risk import RiskMonitor
from critics.value import ValueCritic
from recovery.core.decision import Selector, UnknownSelectorError
from recovery.core.errors import RecoveryError
from recovery.core.robot import RobotBackend
from recovery.supervision.config import SELECTORS, SHIPPED_CRITICS, RecoveryOptions
from recovery.supervision.ppo import PPOSelector, shipped_selector
from recovery.supervision.selectors import NoneSelector, RuleConfig, RuleSelector
from recovery.supervision.supervisor import Supervisor
from vla_wrappers.base import Policy
from vla_wrappers.broker import ChunkBroker
from vla_wrappers.registry import make_policy


class RuleConfigError(RecoveryError, ValueError):
    """A thresholds file that `recovery calibrate-rule` did not write, or calibration settings out of range."""


class MissingCriticError(RecoveryError, FileNotFoundError):
    """Something reads the value critic and the suite ships none: the message names the command that trains one."""


class CriticPolicyError(RecoveryError, ValueError):
    """A value critic trained on the rollouts of other policy weights than the ones running."""


def check_critic_policy(critic: ValueCritic, path: Path, policy: Policy) -> None:
    """Refuse a critic trained on the rollouts of other weights than ``policy`` runs: its values
    describe another policy's chances, and a selector reading them reads noise. One that does not
    record its policy's weights (trained before critics did) passes with a warning."""
    trained, running = critic.training.get("policy_weights"), policy.weights_digest()
    if running is None or trained == running:
        return
    if trained is None:
        warnings.warn(f"value critic {path} does not record the policy weights it was trained on; this run's "
                      f"policy runs weights {running}: if they differ, its values describe another policy "
                      "(`recovery train-critic` makes one that records them)", stacklevel=2)
        return
    raise CriticPolicyError(
        f"value critic {path} was trained on rollouts of policy weights {trained}; this run's policy runs {running}: "
        f"train one on it with `recovery train-critic --suite {critic.training.get('suite')}` and pass it with --critic")


def critic_path(options: RecoveryOptions, suite: str) -> Path | None:
    if options.critic is not None:
        return options.critic
    path = SHIPPED_CRITICS / f"{suite}.pt"
    return path if path.exists() else None


def shipped_rule_path(suite: str, policy: str) -> Path:
    return SHIPPED_CRITICS / f"{suite}_{policy}.rule.json"


def load_rule_config(path: Path) -> RuleConfig:
    if not Path(path).exists():
        raise FileNotFoundError(f"rule thresholds {path} do not exist; make them with `recovery calibrate-rule`")
    try:
        return RuleConfig.from_dict(json.loads(Path(path).read_text())["rule"])
    except (ValueError, KeyError, TypeError) as error:
        raise RuleConfigError(f"{path} is not a `recovery calibrate-rule` file: {error!r}") from error


def rule_config_for(suite: str, policy: str, path: Path | None = None) -> RuleConfig:
    """``path``, else the shipped calibration for this suite and policy, else the defaults."""
    shipped_path = shipped_rule_path(suite, policy)
    if path is None and not shipped_path.exists():
        return RuleConfig()
    return load_rule_config(path or shipped_path)


def make_selector(options: RecoveryOptions, suite: str, policy: str) -> Selector:
    """A fresh selector; ``ppo`` loads (and checks) its checkpoint, ``rule`` its suite's thresholds."""
    if options.selector == "ppo":
        return PPOSelector(options.selector_path or shipped_selector(suite), critic_path(options, suite))
    if options.selector == "rule":
        return RuleSelector(rule_config_for(suite, policy, options.rule_config))
    if options.selector == "none":
        return NoneSelector()
    raise UnknownSelectorError(f"unknown selector {options.selector!r}; valid: {', '.join(SELECTORS)}")


def build_supervisor(backend: RobotBackend, broker: ChunkBroker, suite: str, task_name: str, selector: Selector,
                     options: RecoveryOptions) -> Supervisor:
    """The value critic is loaded only where something reads it (the selector, the ranking of
    rollback targets, or a trace for a plot): it is the largest per-step cost."""
    references = load_references(options.references, suite, task_name)
    by_value = options.supervisor.target_score == "value"
    path = critic_path(options, suite) if selector.reads_value or by_value or options.supervisor.keep_trace else None
    if by_value and path is None:
        raise MissingCriticError(f"rollback targets ranked by value need a value critic, and {suite} ships none: "
                                 f"train one with `recovery train-critic --suite {suite}` and pass it with --critic")
    critic = ValueCritic.load(path) if path else None
    if critic:
        check_critic_policy(critic, path, broker.policy)
    config = replace(options.supervisor, rollback=replace(options.supervisor.rollback, kind=options.rollback))
    repair = ChunkBroker(make_policy(options.repair_policy, backend, options.repair_policy_options),
                         config.repair.replan_every) if options.repair == "policy" else None
    return Supervisor(
        backend, broker, selector, QualityMonitor(references),
        value_fn=critic.value_fn if critic else None,
        # without a critic every value is 1.0: the value-risk rules would judge a constant
        risk=RiskMonitor(critic.risk_head) if critic else None, config=config, repair=repair,
    )
