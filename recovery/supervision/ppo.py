"""A trained PPO policy as a ``Selector``, and the checkpoint checks that make loading safe.

Checkpoints are stable-baselines3 zips that carry ``selector_meta``: the observation layout, the
digest of the value critic whose value and risk the selector was trained on, and the package
version that wrote them. A checkpoint of another layout or another critic fails to load with both
named: a swapped critic silently changes what the selector sees.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from recovery.core.decision import DecisionContext
from recovery.core.errors import RecoveryError
from recovery.core.files import file_digest
from recovery.core.modes import Mode
from recovery.core.shipped import shipped
from recovery.supervision.observation import LEARNED_MODES, ObservationLayout

SHIPPED = shipped("recovery.supervision", "checkpoints")
FORMAT = "agentic-recovery/ppo-selector"


class SelectorCheckpointError(RecoveryError, ValueError):
    """Not a selector checkpoint, or one written for another observation layout or critic."""


def package_version() -> str:
    try:
        return metadata.version("agentic-recovery")
    except metadata.PackageNotFoundError:
        return "unknown"


def selector_meta(layout: ObservationLayout, critic: Path | None) -> dict:
    """``critic``: the value critic's checkpoint the selector reads (None: no critic, value and risk 0)."""
    return {"format": FORMAT, "layout": layout.describe(), "modes": [m.name for m in LEARNED_MODES],
            "critic": file_digest(critic), "package_version": package_version()}


def check_meta(meta: dict | None, layout: ObservationLayout, path: Path, critic: Path | None) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SelectorCheckpointError(f"{path} is not a selector checkpoint of `recovery train-selector`")
    expected = selector_meta(layout, critic)
    if meta.get("critic") != expected["critic"]:
        raise SelectorCheckpointError(
            f"{path} was trained on the value critic with digest {meta.get('critic')}; this run reads {critic} "
            f"(digest {expected['critic']}): pass the critic it was trained with (--critic), or retrain it with "
            "`recovery train-selector`")
    for key in ("layout", "modes"):
        if meta.get(key) != expected[key]:
            raise SelectorCheckpointError(
                f"{path} was written for observation {key} {meta.get(key)} (package "
                f"{meta.get('package_version')}); this version (package {expected['package_version']}) reads "
                f"{expected[key]}: retrain it with `recovery train-selector`")


def shipped_selector(suite: str) -> Path:
    return SHIPPED / f"{suite}.zip"


class PPOSelector:
    """Deterministic (greedy) mode choice of a trained PPO actor."""

    reads_value = True

    def __init__(self, path: Path, critic: Path | None, layout: ObservationLayout = ObservationLayout(),
                 device: str = "cpu"):
        from stable_baselines3 import PPO

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"selector checkpoint {path} does not exist; train one with "
                                    "`recovery train-selector`")
        self.model = PPO.load(path, device=device)
        check_meta(getattr(self.model, "selector_meta", None), layout, path, critic)
        self.layout, self.path = layout, path

    def reset(self) -> None:
        pass

    def settings(self) -> dict:
        return {"checkpoint": file_digest(self.path), "critic": self.model.selector_meta["critic"]}

    def decide(self, ctx: DecisionContext) -> Mode:
        action, _ = self.model.predict(self.layout.encode(ctx), deterministic=True)
        return LEARNED_MODES[int(action)]
