"""Whether SIGINT or SIGTERM came inside :func:`recording_signals` (which runner.watching_signals enters), readable
from any layer.

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
from collections.abc import Iterator
from contextlib import contextmanager

SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
_watched: dict[str, int | None] = {"fd": None, "last": None}


@contextmanager
def recording_signals() -> Iterator[None]:
    """Record the signals that come inside the block: a non-blocking pipe given to ``signal.set_wakeup_fd``, which
    :func:`last_signal` reads (Dagster replaces the Python handlers while a run executes; the wakeup fd stays). Main
    thread only; the previous wakeup fd is restored when the block ends."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    _watched.update(fd=read_fd, last=None)
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        _watched.update(fd=None)
        os.close(read_fd)
        os.close(write_fd)


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
