"""Does the gripper hold something? A physical rollback opens the gripper, so it must wait while it does.

Contact force alone misses light objects: LIBERO's black bowl, held by its rim, presses on the
fingers with ~4.6 N, under the 5 N contact-free threshold, and the contacts of a steady grasp
flicker from one step to the next. So a gripper commanded closed that touched anything within the
last few steps counts as holding; once it has touched nothing for longer (the object slipped
out), or is commanded open, it does not. Nor once its untouched fingers open wider than they were
at the last touch: a gripper commanded closed that opens lets go (a gripper fault, a burst on its
command). The latch would otherwise hold on for a few steps after the drop, and a rollback
decided then carries "it" back to where the hand held the object, with nothing in the hand.
Flickering contacts never open the fingers: a closing gripper's gap only shrinks.
"""

from __future__ import annotations

from recovery.core.robot import ContactInfo


class GraspMonitor:
    def __init__(self, latch_steps: int = 5, opening: float = 0.001):
        self.latch_steps = latch_steps  # steps without a touch after which a closed gripper holds nothing
        self.opening = opening  # m: untouched fingers this much wider than at the last touch have let go
        self.reset()

    def reset(self) -> None:
        self._untouched_for: int | None = None  # steps since the closed gripper last touched something
        self._gap_at_touch = 0.0  # the fingers' opening at the last touch
        self.holding = False
        self.let_go = False  # the last update found the hand letting go (a drop: it held, and opened)

    def update(self, closed: bool, contacts: ContactInfo, force_threshold: float, gap: float) -> bool:
        """Feed one step: whether the gripper is commanded closed, the robot's contacts, and the
        fingers' opening (m; the distance between the two finger joints)."""
        touching = bool(contacts.touching) or not contacts.is_free(force_threshold)
        self.let_go = False
        if not closed:
            self._untouched_for = None
        elif touching:
            self._untouched_for, self._gap_at_touch = 0, gap
        elif self._untouched_for is not None:
            self.let_go = gap > self._gap_at_touch + self.opening
            self._untouched_for = None if self.let_go else self._untouched_for + 1
        self.holding = self._untouched_for is not None and self._untouched_for <= self.latch_steps
        return self.holding
