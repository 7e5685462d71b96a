"""One episode's quality / value / risk / tracking-error traces with the mode switches marked (a PNG)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_episode(record: dict, out: Path) -> Path:
    """``record`` is an episode record whose ``recovery`` summary holds a ``trace``."""
    trace = (record.get("recovery") or {}).get("trace")
    if not trace:
        raise ValueError("the record has no trace: run the episode with the supervisor's keep_trace on")
    fig, ax = plt.subplots(figsize=(10, 4))
    steps = range(len(trace["quality"]))
    ax.plot(steps, trace["quality"], label="quality q")
    ax.plot(steps, trace["value"], label="value V")
    ax.plot(steps, trace["risk"], label="risk (TVR head)")
    if "tracking" in trace:  # metres: on its own axis, in cm
        cm = ax.twinx()
        cm.plot(steps, [100 * e for e in trace["tracking"]], color="grey", linewidth=0.8)
        cm.set_ylabel("tracking error (cm, grey)")
    disturbance = record.get("disturbance_info") or {}
    if disturbance.get("fired_at") is not None:
        start = disturbance["fired_at"]
        ax.axvspan(start, start + disturbance["duration"], color="red", alpha=0.15,
                   label=f"disturbance: {disturbance['name']}")
    for decision in record["recovery"]["recoveries"]:
        ax.axvline(decision["step"], color="black", linestyle="--", linewidth=1)
        ax.annotate(f"{decision['mode']}→{decision['target_step']}", (decision["step"], 1.02),
                    fontsize=8, rotation=90, va="bottom")
    outcome = "success" if record["success"] else "failure"
    ax.set(xlabel="policy step (recovery motion excluded)", ylim=(-0.05, 1.25),
           title=f"{record['suite']}/{record['task']} init {record['init']}: {outcome}, "
                 f"{record['steps']} steps, {record['recovery']['rollbacks']} rollbacks")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
