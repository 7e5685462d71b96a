"""Where the points go: the episodes a snapshot rollback wins and a physical rollback loses, by cause.

Input: two columns of the same episodes (suite, task, init state, seed), one with the physical
rollback, one with the snapshot rollback, both run with ``recovery eval --record-world``. Each
episode the snapshot wins is put in the first of these classes that fits, judged from the world
the physical rollback left (``recovery.evaluation.world``):

- ``no rollback``: the physical rollback was refused (the gripper held an object throughout);
- ``tipped``: an object stands tilted by more than ``TIPPED`` against the target state;
- ``dropped``: an object rose more than ``LIFTED`` between the target and the decision (it was
  carried) and lies more than ``DISPLACED`` from where it was;
- ``displaced``: an object lies more than ``DISPLACED`` from its place in the target state;
- ``arm short``: the world is back, the arm did not reach its target;
- ``gripper reopened``: the target held the gripper more than ``FINGERS`` closer than the
  rollback (which opens it) left it;
- ``out of time``: the snapshot episode's length plus the rollback's motion exceeds the budget;
- ``world restored``: none of these, and the base policy still fails.

The episodes that go the other way (the physical rollback wins, the snapshot loses) are put in the
same classes, from the same world: after any restore, exact or not, the base policy's outcome can
hang on a millimetre (``reports/critics.md``, branch outcomes), so a class that counts about as many
episodes both ways is that chance, not a gap a repair could close.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from recovery.core.protocol import max_steps_for
from recovery.supervision.config import RepairConfig
from recovery.evaluation.stats import episode_key, mcnemar_exact_p

TIPPED, DISPLACED = RepairConfig.tipped, RepairConfig.placed  # what a repair counts as knocked over / moved
LIFTED = 0.03  # m
FINGERS = 0.01  # m
CLASSES = ("no rollback", "tipped", "dropped", "displaced", "arm short", "gripper reopened", "out of time",
           "world restored")


class MissingWorldError(ValueError):
    """A physical record without the world record the taxonomy reads."""


@dataclass(frozen=True)
class Differing:
    """One episode the two rollbacks end differently, classified by the world the physical one left."""

    key: tuple  # suite, task, init, seed
    cause: str
    detail: str  # the object and figures behind the cause
    at_decision: str  # the world when the rollback was decided, against the target
    by_motion: bool  # the rollback's own motion moved an object by more than DISPLACED
    at_end: str  # what is still wrong with the world at the end of the physical episode
    targets: str  # the physical and the snapshot rollback's target steps


def _worst(changes: dict[str, list[float]], index: int) -> tuple[str, list[float]] | None:
    return max(changes.items(), key=lambda item: item[1][index], default=None)


def _describe(changes: dict[str, list[float]] | None) -> str:
    worst = _worst(changes or {}, 0)
    if worst is None:
        return "nothing moved"
    name, (moved, tilt, rise) = worst
    return f"{name} {moved * 100:.1f} cm, {tilt * 57.3:.0f} deg, dz {rise * 100:+.1f} cm"


def classify(physical: dict, snapshot: dict) -> Differing:
    world = physical.get("world")
    if world is None:
        raise MissingWorldError(f"{physical['suite']}/{physical['task']} init {physical['init']}: no world record "
                                "(run the physical column with `recovery eval --record-world`)")
    snapshot_rollbacks = (snapshot.get("world") or {}).get("rollbacks", [])
    targets = (f"{'/'.join(str(r['target_step']) for r in world['rollbacks']) or '-'} vs "
               f"{'/'.join(str(r['target_step']) for r in snapshot_rollbacks) or '-'}")
    at_end = _describe(world["end_vs_target"] if world["end_vs_target"] is not None else world["end_vs_start"])
    key = episode_key(physical)
    if not world["rollbacks"]:
        return Differing(key, "no rollback", "refused while the gripper held an object", "", False, at_end, targets)
    rollback = world["rollbacks"][0]
    before, after = rollback.get("at_decision", {}), rollback.get("after", {})
    by_motion = any(change[0] - before.get(name, [0.0])[0] > DISPLACED for name, change in after.items())
    tipped = _worst({k: v for k, v in after.items() if v[1] > TIPPED}, 1)
    displaced = {k: v for k, v in after.items() if v[0] > DISPLACED}
    dropped = {k: v for k, v in displaced.items() if rollback["rose"].get(k, 0.0) > LIFTED}
    target_fingers, after_fingers = rollback["fingers"][0], rollback["fingers"][-1]
    if tipped:
        cause, detail = "tipped", _describe(dict([tipped]))
    elif dropped:
        name = _worst(dropped, 0)[0]
        cause, detail = "dropped", f"rose {rollback['rose'][name] * 100:.0f} cm; " + _describe({name: dropped[name]})
    elif displaced:
        cause, detail = "displaced", _describe(displaced)
    elif not rollback.get("reached", False):
        cause, detail = "arm short", f"{rollback.get('periods', 0)} periods of motion"
    elif after_fingers - target_fingers > FINGERS:
        cause, detail = "gripper reopened", f"fingers {target_fingers * 100:.1f} -> {after_fingers * 100:.1f} cm"
    elif snapshot["success"] and snapshot["steps"] + rollback.get("periods", 0) > max_steps_for(physical["suite"]):
        cause, detail = "out of time", f"snapshot succeeded at {snapshot['steps']}, motion {rollback['periods']}"
    else:
        cause, detail = "world restored", _describe(after)
    return Differing(key, cause, detail, _describe(before), by_motion, at_end, targets)


def classified_episodes(physical: list[dict], snapshot: list[dict], snapshot_wins: bool = True) -> list[Differing]:
    """Classify every episode that succeeds with the snapshot rollback and fails with the physical
    one (``snapshot_wins=False``: the other way round)."""
    snap = {episode_key(r): r for r in snapshot}
    return sorted((classify(p, snap[key]) for p in physical for key in (episode_key(p),)
                   if key in snap and snap[key]["success"] == snapshot_wins and p["success"] != snapshot_wins),
                  key=lambda item: item.key)


def taxonomy_report(physical: list[dict], snapshot: list[dict]) -> str:
    lost, won = classified_episodes(physical, snapshot), classified_episodes(physical, snapshot, snapshot_wins=False)
    paired = {episode_key(r) for r in physical} & {episode_key(r) for r in snapshot}
    lost_by, won_by = Counter(item.cause for item in lost), Counter(item.cause for item in won)
    lines = [f"{len(lost)} of {len(paired)} paired episodes succeed with the snapshot rollback and fail with the "
             f"physical one; {len(won)} go the other way (McNemar p = {mcnemar_exact_p(len(lost), len(won)):.3g}). "
             "Both are classified by the world the physical rollback left: a cause that counts about as many "
             "episodes both ways is the base policy's chance after any restore, not a gap a repair could close.",
             "", "| cause | snapshot wins, physical loses | physical wins, snapshot loses |", "|---|---|---|"]
    lines += [f"| {cause} | {lost_by[cause]} | {won_by[cause]} |" for cause in CLASSES if lost_by[cause] or won_by[cause]]
    moved = sum(item.by_motion for item in lost)
    lines += ["", f"In {moved} of the episodes the snapshot wins, the rollback's own motion moved an object by more "
              f"than {DISPLACED * 100:.0f} cm.", "", "The episodes the snapshot wins:",
              "", "| suite/task | init | cause | at the decision | after the rollback | moved by the motion | "
              "at the episode's end | target steps (physical vs snapshot) |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {k[0]}/{k[1]} | {k[2]} | {item.cause} | {item.at_decision} | {item.detail} | "
              f"{'yes' if item.by_motion else ''} | {item.at_end} | {item.targets} |" for item in lost for k in (item.key,)]
    return "\n".join(lines)
