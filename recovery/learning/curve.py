"""The learning curve of a selector run: success and mode frequencies against decisions (a PNG)."""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from recovery.supervision.observation import LEARNED_MODES  # noqa: E402


def plot_learning_curve(curve_csv: Path, out: Path) -> Path | None:
    """One point per PPO rollout; None when the run has not finished a rollout yet."""
    if not curve_csv.exists():
        return None
    with curve_csv.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    decisions = [int(r["decisions"]) for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    scored = [(d, float(r["success_rate"])) for d, r in zip(decisions, rows) if r["success_rate"]]
    if scored:
        top.plot(*zip(*scored), marker="o", label="success rate (episodes ended in the rollout)")
    top.set_ylim(-0.05, 1.05)
    top.set_ylabel("success")
    top.legend(loc="lower right")
    for mode in LEARNED_MODES:
        bottom.plot(decisions, [float(r[f"share_{mode.name}"]) for r in rows], label=mode.name)
    bottom.set_ylabel("share of decisions")
    bottom.set_xlabel("decisions")
    bottom.legend(loc="upper right")
    fig.suptitle(f"selector training: {curve_csv.parent.name}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
