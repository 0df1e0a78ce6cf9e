"""Whether SIGINT or SIGTERM came while ``lcp`` watches for them (runner.watching_signals), readable from any layer.

Python runs a signal's handler in the main thread at the next bytecode; the handler Dagster installs during a step
raises its interrupt there, in whatever code runs. When that code catches it, the interrupt is lost: asyncio logs an
exception raised in a loop callback and goes on, a weakref finalizer's is printed and dropped, a library wraps it in
an error of its own. The signal itself is not lost: the C-level handler writes its number to a wakeup fd, which
:func:`last_signal` reads. So the generation loop (generate/partition.py) stops after the answer it just stored
(:func:`stop_if_interrupted`), and the runner reports a step that failed after a signal as the interrupt.

Plain Python, no Dagster: the generic layers below the orchestration use it."""

from __future__ import annotations

import os
import signal
import threading

SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
_watched: dict[str, int | None] = {"fd": None, "last": None}


def start_watching(read_fd: int) -> None:
    """Read signals from ``read_fd`` (the read end of the pipe given to ``signal.set_wakeup_fd``, non-blocking)."""
    _watched.update(fd=read_fd, last=None)


def stop_watching() -> None:
    _watched.update(fd=None)


def last_signal() -> int | None:
    """SIGINT or SIGTERM, whichever came last while watched (None: neither, or not watching)."""
    fd = _watched["fd"]
    if fd is not None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            data = b""
        got = [b for b in data if b in SIGNAL_NAMES]
        if got:
            _watched["last"] = got[-1]
    return _watched["last"]


def signal_came_while_watching() -> bool:
    """Whether SIGINT or SIGTERM came inside the current watched block."""
    return _watched["fd"] is not None and last_signal() is not None


def stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt in the main thread when a signal came while watched: for a loop between units of work
    whose interrupt may have been caught and dropped by the code it landed in. Elsewhere (another thread, not
    watching) it does nothing."""
    if threading.current_thread() is threading.main_thread() and signal_came_while_watching():
        raise KeyboardInterrupt
