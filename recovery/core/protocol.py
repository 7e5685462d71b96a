"""The standard LIBERO evaluation protocol (openpi / OpenVLA evaluators): control steps per episode."""

from __future__ import annotations

STANDARD_MAX_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
STANDARD_SUITES = tuple(STANDARD_MAX_STEPS)


def max_steps_for(suite: str) -> int:
    """Standard budget; LIBERO-PRO variants (e.g. libero_goal_swap) inherit their base suite's."""
    for base in sorted(STANDARD_MAX_STEPS, key=len, reverse=True):
        if suite == base or suite.startswith(base + "_"):
            return STANDARD_MAX_STEPS[base]
    return STANDARD_MAX_STEPS["libero_90"]
