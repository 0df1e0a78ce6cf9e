"""An interrupt that a library catches and logs prints no stack trace while `lcp` watches for signals
(runner.watching_signals): Dagster raises the interrupt wherever the main thread is when SIGINT lands, and SQLAlchemy
closing a pooled connection ("Exception closing connection") or asyncio writing to a socket ("Fatal write error")
then log it with its trace, under the one "Interrupted (...)" line `lcp` prints (seen in
tests/reliability/test_interrupts.py on a loaded machine). Any other error those libraries log keeps its trace, and
outside the block logging is as it was.

Run in a fresh interpreter: there, as in `lcp`, no handler is configured and Python's last-resort handler writes to
stderr (under pytest the logging plugin's handlers would take the records instead)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import logging, sys
    from dagster._core.errors import DagsterExecutionInterruptedError
    from lc_pipeline.runner import watching_signals

    def logged(name, exc, label):
        try:
            raise exc
        except BaseException:
            logging.getLogger(name).error("%s", label, exc_info=True)

    with watching_signals():
        logged("sqlalchemy.pool.impl.NullPool", DagsterExecutionInterruptedError(), "inside: pool closing")
        logged("asyncio", KeyboardInterrupt(), "inside: socket write")
        logged("sqlalchemy.pool.impl.NullPool", OSError("disk full"), "inside: other error")
    print("--- after", file=sys.stderr)
    logged("sqlalchemy.pool.impl.NullPool", DagsterExecutionInterruptedError(), "after: pool closing")
""")


def test_a_logged_interrupt_prints_no_trace_while_watching_and_other_errors_keep_theirs():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    inside, after = proc.stderr.split("--- after")
    assert "inside: pool closing" not in inside and "inside: socket write" not in inside
    assert "DagsterExecutionInterruptedError" not in inside and "KeyboardInterrupt" not in inside
    assert "inside: other error" in inside and inside.count("Traceback") == 1 and "OSError: disk full" in inside
    assert "after: pool closing" in after and "DagsterExecutionInterruptedError" in after  # the filter is gone
