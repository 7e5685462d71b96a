"""Does the gripper hold something? A physical rollback opens the gripper, so it must wait while it does.

Contact force alone misses light objects: LIBERO's black bowl, held by its rim, presses on the
fingers with ~4.6 N, under the 5 N contact-free threshold, and the contacts of a steady grasp
flicker from one step to the next. So a gripper commanded closed that touched anything within the
last few steps counts as holding; once it has touched nothing for longer (the object slipped
out), or is commanded open, it does not.
"""

from __future__ import annotations

from recovery.core.robot import ContactInfo


class GraspMonitor:
    def __init__(self, latch_steps: int = 5):
        self.latch_steps = latch_steps  # steps without a touch after which a closed gripper holds nothing
        self.reset()

    def reset(self) -> None:
        self._untouched_for: int | None = None  # steps since the closed gripper last touched something
        self.holding = False

    def update(self, closed: bool, contacts: ContactInfo, force_threshold: float) -> bool:
        """Feed one step: whether the gripper is commanded closed, and the robot's contacts."""
        touching = bool(contacts.touching) or not contacts.is_free(force_threshold)
        if not closed:
            self._untouched_for = None
        elif touching:
            self._untouched_for = 0
        elif self._untouched_for is not None:
            self._untouched_for += 1
        self.holding = self._untouched_for is not None and self._untouched_for <= self.latch_steps
        return self.holding
