"""A trained PPO policy as a ``Selector``, and the checkpoint checks that make loading safe.

Checkpoints are stable-baselines3 zips that carry ``selector_meta``: the observation layout and
the package version that wrote them. A checkpoint of another layout fails to load with both named.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from recovery.learning.observation import LEARNED_MODES, ObservationLayout
from recovery.modes import Mode
from recovery.selectors import DecisionContext

SHIPPED = Path(__file__).resolve().parent / "checkpoints"
FORMAT = "agentic-recovery/ppo-selector"


class SelectorCheckpointError(ValueError):
    """Not a selector checkpoint, or one written for another observation layout."""


def package_version() -> str:
    try:
        return metadata.version("agentic-recovery")
    except metadata.PackageNotFoundError:
        return "unknown"


def selector_meta(layout: ObservationLayout) -> dict:
    return {"format": FORMAT, "layout": layout.describe(), "modes": [m.name for m in LEARNED_MODES],
            "package_version": package_version()}


def check_meta(meta: dict | None, layout: ObservationLayout, path: Path) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SelectorCheckpointError(f"{path} is not a selector checkpoint of `recovery train-selector`")
    expected = selector_meta(layout)
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

    def __init__(self, path: Path, layout: ObservationLayout = ObservationLayout(), device: str = "cpu"):
        from stable_baselines3 import PPO

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"selector checkpoint {path} does not exist; train one with "
                                    "`recovery train-selector`")
        self.model = PPO.load(path, device=device)
        check_meta(getattr(self.model, "selector_meta", None), layout, path)
        self.layout, self.path = layout, path

    def reset(self) -> None:
        pass

    def decide(self, ctx: DecisionContext) -> Mode:
        action, _ = self.model.predict(self.layout.encode(ctx), deterministic=True)
        return LEARNED_MODES[int(action)]
