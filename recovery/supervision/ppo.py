"""A trained PPO policy as a ``Selector``, and the checkpoint checks that make loading safe.

Checkpoints are stable-baselines3 zips that carry ``selector_meta``: the observation layout, the
digest of the value critic whose value and risk the selector was trained on, the thresholds of the
rule whose advice it reads (layouts from version 2: the selector advises itself with them, so a
recalibrated rule cannot change what it sees), and the package version that wrote them. A
selector is read with the layout version it was trained on (so one of an earlier version keeps
working); a checkpoint of another layout or another critic fails to load with both named: a
swapped critic silently changes what the selector sees.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from recovery.core.decision import DecisionContext
from recovery.core.errors import RecoveryError
from recovery.core.files import file_digest
from recovery.core.modes import Mode
from recovery.core.shipped import shipped
from recovery.supervision.observation import LEARNED_MODES, ObservationLayout
from recovery.supervision.selectors import RuleConfig, RuleSelector

# switches the rule gained after selectors began recording its thresholds, as the rule of a checkpoint that
# does not record them ran: off (the drop trigger, 2026-12-06). Its advice is what the selector was trained on
RULE_SWITCHES_ADDED = {"retry_on_let_go": False}

SHIPPED = shipped("recovery.supervision", "checkpoints")
FORMAT = "agentic-recovery/ppo-selector"


class SelectorCheckpointError(RecoveryError, ValueError):
    """Not a selector checkpoint, or one written for another observation layout or critic."""


def package_version() -> str:
    try:
        return metadata.version("agentic-recovery")
    except metadata.PackageNotFoundError:
        return "unknown"


def selector_meta(layout: ObservationLayout, critic: Path | None, rule: RuleConfig | None = None) -> dict:
    """``critic``: the value critic's checkpoint the selector reads (None: no critic, value and risk 0);
    ``rule``: the thresholds of the rule whose advice an ``advised`` layout reads."""
    if layout.advised and rule is None:
        raise ValueError(f"observation layout version {layout.version} reads the rule's advice: name its thresholds")
    meta = {"format": FORMAT, **_compared(layout, critic)}
    return {**meta, "rule": asdict(rule)} if layout.advised else meta


def _compared(layout: ObservationLayout, critic: Path | None) -> dict:
    """What a checkpoint must match to be read here (and the version that writes it)."""
    return {"layout": layout.describe(), "modes": [m.name for m in LEARNED_MODES], "critic": file_digest(critic),
            "package_version": package_version()}


def check_meta(meta: dict | None, layout: ObservationLayout, path: Path, critic: Path | None) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SelectorCheckpointError(f"{path} is not a selector checkpoint of `recovery train-selector`")
    expected = _compared(layout, critic)
    if meta.get("critic") != expected["critic"]:
        raise SelectorCheckpointError(
            f"{path} was trained on the value critic with digest {meta.get('critic')}; this run reads {critic} "
            f"(digest {expected['critic']}): pass the critic it was trained with (--critic), or retrain it with "
            "`recovery train-selector`")
    if layout.advised and not isinstance(meta.get("rule"), dict):
        raise SelectorCheckpointError(f"{path} reads the rule's advice (layout version {layout.version}) but records "
                                      "no thresholds for it: retrain it with `recovery train-selector`")
    for key in ("layout", "modes"):
        if meta.get(key) != expected[key]:
            raise SelectorCheckpointError(
                f"{path} was written for observation {key} {meta.get(key)} (package "
                f"{meta.get('package_version')}); this version (package {expected['package_version']}) reads "
                f"{expected[key]}: retrain it with `recovery train-selector`")


def check_advisor(meta: dict, layout: ObservationLayout, path: Path, rule: RuleConfig | None) -> None:
    """A resumed selector must go on reading the advice it was trained on (a rule switch added since
    a checkpoint was written is off for it, ``ppo.RULE_SWITCHES_ADDED``)."""
    trained = advising_rule(meta, layout)
    if trained is not None and trained != rule:
        differing = {key: value for key, value in asdict(trained).items() if getattr(rule, key, None) != value}
        raise SelectorCheckpointError(
            f"{path} reads the advice of a rule with other thresholds than this run's ({differing}): pass them with "
            f"--rule-config FILE, a JSON file {{\"rule\": ...}} holding {json.dumps(asdict(trained))}")


def trained_layout(meta: dict | None) -> ObservationLayout:
    """The layout of this package's version that the checkpoint says it was trained on (the
    current one where it names none this package reads: ``check_meta`` then says what differs)."""
    try:
        return ObservationLayout(version=meta["layout"]["version"])
    except (TypeError, KeyError, ValueError):
        return ObservationLayout()


def advising_rule(meta: dict, layout: ObservationLayout) -> RuleConfig | None:
    """The rule whose advice a checked checkpoint reads (None: its layout reads none)."""
    return RuleConfig.from_dict({**RULE_SWITCHES_ADDED, **meta["rule"]}) if layout.advised else None


def shipped_selector(suite: str) -> Path:
    return SHIPPED / f"{suite}.zip"


class PPOSelector:
    """Deterministic (greedy) mode choice of a trained PPO actor."""

    reads_value = True

    def __init__(self, path: Path, critic: Path | None, device: str = "cpu"):
        from stable_baselines3 import PPO

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"selector checkpoint {path} does not exist; train one with "
                                    "`recovery train-selector`")
        self.model = PPO.load(path, device=device)
        meta = getattr(self.model, "selector_meta", None)
        self.layout, self.path = trained_layout(meta), path
        check_meta(meta, self.layout, path, critic)
        rule = advising_rule(meta, self.layout)
        self.advisor = RuleSelector(rule) if rule else None

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        meta = self.model.selector_meta
        return {"checkpoint": file_digest(self.path), "critic": meta["critic"], "layout": self.layout.version,
                **({"advised_by": meta["rule"]} if self.advisor else {})}

    def decide(self, ctx: DecisionContext) -> Mode:
        advice = self.advisor.advise(ctx) if self.advisor else None
        action, _ = self.model.predict(self.layout.encode(ctx, advice), deterministic=True)
        return LEARNED_MODES[int(action)]
