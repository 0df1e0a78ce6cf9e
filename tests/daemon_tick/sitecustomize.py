"""Loaded by every Python process of a test that puts this folder first on PYTHONPATH (Python imports
``sitecustomize`` at start-up): in the Dagster daemon's process only (``python -m dagster._daemon``, as `dagster
dev` starts it) the backfill daemon waits 2 s between its iterations instead of Dagster's fixed 30 s
(``DEFAULT_DAEMON_INTERVAL_SECONDS``, read by the backfill loop at each sleep and not configurable). An asset
backfill advances one level of the graph per iteration, so a UI test spends minutes asleep otherwise; nothing
else in the daemon or the runs changes."""

import sys

if "dagster._daemon" in getattr(sys, "orig_argv", ()):
    import dagster._daemon.controller as _controller

    # A Dagster that renames the constant must not make this file a silent no-op.
    if not hasattr(_controller, "DEFAULT_DAEMON_INTERVAL_SECONDS"):
        raise RuntimeError(f"{__file__}: dagster._daemon.controller has no DEFAULT_DAEMON_INTERVAL_SECONDS")
    _controller.DEFAULT_DAEMON_INTERVAL_SECONDS = 2
