"""Do live episodes reproduce published ones, episode by episode?

Episodes are seeded and deterministic: the same code on the same init state, seed and disturbance
gives the same outcome, step for step, on any x86-64 machine (``recovery.core.float_paths`` pins
the kernels that would otherwise follow the CPU). A published results file is a promise a reader
can check; where an episode does not reproduce, say so loudly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recovery.evaluation.results import EpisodeSpec


def outcome(record: dict) -> dict:
    """What must be equal for two runs of an episode to count as the same."""
    recovery = record.get("recovery") or {}
    return {"success": record["success"], "steps": record["steps"], "error": record.get("error") is not None,
            "rollbacks": recovery.get("rollbacks", 0), "recovery_steps": recovery.get("recovery_steps", 0)}


@dataclass
class Reproduction:
    matched: int = 0
    differing: list[tuple[dict, dict]] = field(default_factory=list)  # (live, published)
    unpublished: int = 0  # live episodes that no published file holds

    @property
    def ok(self) -> bool:
        return not self.differing and self.matched > 0


def reproduce(live: list[dict], published: list[dict]) -> Reproduction:
    by_key = {EpisodeSpec.key_of(r): r for r in published}
    result = Reproduction()
    for record in live:
        known = by_key.get(EpisodeSpec.key_of(record))
        if known is None:
            result.unpublished += 1
        elif outcome(record) == outcome(known):
            result.matched += 1
        else:
            result.differing.append((record, known))
    return result


def reproduction_report(result: Reproduction) -> str:
    lines = []
    if result.ok:
        lines.append(f"All {result.matched} live episodes match the published run, episode by episode.")
    elif result.matched == 0 and not result.differing:
        lines.append("NOT CHECKED: the published files hold none of these episodes.")
    else:
        lines.append(f"DOES NOT REPRODUCE: {len(result.differing)} of {result.matched + len(result.differing)} "
                     "episodes differ from the published run:")
        lines += ["", "| episode | live | published |", "|---|---|---|"]
        for live, published in result.differing:
            spec = EpisodeSpec(*EpisodeSpec.key_of(live))
            lines.append(f"| {spec.slug} | {outcome(live)} | {outcome(published)} |")
    if result.unpublished:
        lines.append(f"({result.unpublished} live episodes are not in the published files.)")
    return "\n".join(lines)
