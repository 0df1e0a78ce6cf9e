"""The Dagster instance ``lcp`` opens: ``$DAGSTER_HOME``'s, opened under a lock so that two commands at once work.

Opening an instance creates its storage the first time: Dagster's SQLite run and schedule storages create their
tables and stamp their schema version without a retry, so two ``lcp`` commands started together on a new
``DAGSTER_HOME`` (two ``lcp models add`` from a script, a test suite's workers) failed in one of them with
"table alembic_version already exists" or "UNIQUE constraint failed: alembic_version.version_num". Every ``lcp``
command opens its instance here, holding ``$DAGSTER_HOME/.lcp-instance.lock`` (a ``filelock.FileLock``, freed
by the system when its holder dies) while Dagster opens the storage; once made, the storage is shared as usual.
``lcp ui`` creates a new home's storage this way before it starts ``dagster dev``; processes that are not
``lcp`` (a ``dagster dev`` started by hand, a user's script) do not take the lock.
"""

from __future__ import annotations

from pathlib import Path

from lc_pipeline.settings import env

LOCK_NAME = ".lcp-instance.lock"
LOCK_TIMEOUT_S = 300.0  # opening takes about a second; a migration of a large instance may take minutes


def open_instance(*, capture_compute_logs: bool = True):
    """``$DAGSTER_HOME``'s ``dg.DagsterInstance``, opened while this process holds the instance lock.

    ``capture_compute_logs=False`` replaces dagster.yaml's compute log manager by Dagster's no-op one (the runs
    ``lcp`` executes in its own process: cli.cli_run_instance says why). Without ``DAGSTER_HOME``, or with one that
    is not a folder, Dagster's own error."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef
    from filelock import FileLock, Timeout

    home = env("DAGSTER_HOME")
    if not home or not Path(home).is_dir():
        return dg.DagsterInstance.get()
    lock = FileLock(str(Path(home) / LOCK_NAME), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise RuntimeError(f"DAGSTER_HOME {home}: another lcp command has held {lock.lock_file} for "
                           f"{LOCK_TIMEOUT_S:g} s while opening the Dagster instance; run the command again") from None
    try:
        if capture_compute_logs:
            return dg.DagsterInstance.get()
        no_capture = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides={"compute_logs": no_capture}))
    finally:
        lock.release()


def add_missing_partitions(instance, dimension: str, keys: list[str]) -> None:
    """Adds to ``instance`` those of ``keys`` that its dynamic partitions of ``dimension`` lack, in one call."""
    new = [key for key in keys if not instance.has_dynamic_partition(dimension, key)]
    if new:
        instance.add_dynamic_partitions(dimension, new)
