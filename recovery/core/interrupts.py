"""Ctrl-C that stops a long run between units of work (an episode, a selector decision).

A KeyboardInterrupt raised wherever the signal happens to land can be lost: raised inside a
``__del__`` or a simulator callback, Python prints it as "Exception ignored" and carries on, and
inside MuJoCo's C code it can surface as another error. So the first Ctrl-C only sets a flag the
run checks between units; a second one interrupts at once.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Iterator


@contextlib.contextmanager
def stop_on_interrupt(notice: str | None = None) -> Iterator[threading.Event]:
    """Yield an event that the first Ctrl-C sets (printing ``notice``); outside the main thread,
    where no signal handler can be installed, the event is never set."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        if notice:
            print(notice, file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
