"""The high-level modes a selector chooses from."""

from __future__ import annotations

from enum import IntEnum


class Mode(IntEnum):
    EXECUTE = 0  # keep executing the base policy
    RETRY = 1  # roll back to the best-quality state of the recent past
    REPAIR = 2  # roll back to the best contact-free state of a longer past
    RESET = 3  # go back to the episode's start pose
    HOLD = 4  # stop and hold still (safe state; e.g. policy failure)

    @property
    def is_rollback(self) -> bool:
        return self in (Mode.RETRY, Mode.REPAIR, Mode.RESET)
