"""The generation store: finished rows on disk, keyed by cache key, each stored as soon as it exists.

Two kinds of files, read together by :meth:`GenerationCheckpoint.load`:

- **Parquet parts** (``part-<ns>-<id>.parquet``): written to a temp file, fsync'd and renamed, so a process
  killed at any moment leaves only whole parts (plus, at worst, an ignored temp file).
- **Journals** (``journal-<ns>-<id>.jsonl``, local lakes only): a :class:`StoreWriter` appends every row it
  is given to its own journal at once, one JSON line per row, written through to the OS before ``add``
  returns. The first line names the columns and their types. A journal whose writer is alive is locked
  (``flock``); the writer's background thread fsyncs it about once a second and folds it into a Parquet part
  every ``fold_rows`` rows or ``fold_s`` seconds and when the writer closes (the part first, then the
  journal goes, so a crash in between leaves duplicates, never a loss).

What survives what, on a local lake: a process killed with ``kill -9`` loses no row that ``add`` returned
(the OS holds it); a machine that loses power loses at most the last ~second of rows (not yet fsync'd). A
line cut off by a kill in the middle of its write (the journal's last line, without its newline) is not a
stored row: it is left out on reading (and generated again). On an object store (a ``UPath``, see
:mod:`lc_pipeline.storage`) there is no appending: rows are kept by the writer and put as one part (one PUT,
atomic by itself) every ``fold_rows`` rows or ``fold_s`` seconds (shorter there) and at the end, so a killed
run loses at most the rows of that last period.

The store is also the cache: rows stay after the partition is written, so a rerun with the same prompts,
model settings and sampling parameters finds every row and generates nothing. Unique file names keep
concurrent writers from colliding; ``compact`` folds the parts and the journals of writers that are gone
into one part after a finished partition.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import polars as pl

from lc_pipeline import storage

log = logging.getLogger(__name__)

KEY = "cache_key"
PART_PREFIX, PART_SUFFIX = "part-", ".parquet"
JOURNAL_PREFIX, JOURNAL_SUFFIX = "journal-", ".jsonl"
# When a writer folds its rows into a Parquet part: local (the journal already holds every row) and on an
# object store (the pending rows are the only copy), by count or by age, whichever comes first.
FOLD_ROWS, FOLD_S = 1024, 60.0
OBJECT_STORE_FOLD_ROWS, OBJECT_STORE_FOLD_S = 256, 5.0
SYNC_S = 1.0  # how often a writer fsyncs its journal (only when rows came since the last time)
# Column types a journal's header may name (every generations column is one of these).
_DTYPES = {str(t): t for t in (pl.String, pl.Int64, pl.Int32, pl.Float64, pl.Boolean)}


def _stamp(path: Path) -> tuple[str, str]:
    """Sort key of a store file: the nanosecond stamp in its name, then the name (oldest first)."""
    name = path.name
    return name.split("-", 2)[1] if name.count("-") >= 2 else "", name


def _new_name(prefix: str, suffix: str, stamp: str | None = None) -> str:
    return f"{prefix}{stamp or f'{time.time_ns():020d}'}-{uuid.uuid4().hex[:8]}{suffix}"


def read_journal(path: Path) -> pl.DataFrame | None:
    """The rows of one journal (None: no header yet). A last line without its newline was cut off by a kill
    in the middle of its write: it was never stored and is left out. Any other unreadable line is an error
    naming the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:  # folded and removed by its writer since it was listed
        return None
    lines = text.split("\n")
    if lines[-1]:
        log.warning("generation store %s: its last line was cut off (a writer killed mid-write); that row is "
                    "generated again", path)
    lines = lines[:-1]
    if not lines:
        return None
    try:
        header = json.loads(lines[0])
        schema = {name: _DTYPES[dtype] for name, dtype in header["columns"].items()}
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"generation store {path}, line 1: not a journal header ({type(exc).__name__}: {exc})") from None
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"generation store {path}, line {number}: not a stored row ({exc})") from None
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _in_use(path: Path) -> bool:
    """Whether a live writer holds ``path`` (its flock; released by the kernel when the writer dies)."""
    try:
        with open(path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            return False
    except FileNotFoundError:
        return True  # gone already: not ours to fold


class _Journal:
    """One writer's open journal: created under a temp name, locked, headed, then renamed into place (so no
    reader ever sees it unlocked while its writer lives)."""

    def __init__(self, directory: Path, schema: Mapping[str, pl.DataType]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.stamp = f"{time.time_ns():020d}"
        self.path = directory / _new_name(JOURNAL_PREFIX, JOURNAL_SUFFIX, self.stamp)
        tmp = directory / f".{self.path.name}.tmp"
        self._fh: IO[str] = open(tmp, "x", encoding="utf-8")  # noqa: SIM115  (closed in discard/close)
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)
        header = {"columns": {name: str(dtype) for name, dtype in schema.items()}}
        self._fh.write(json.dumps(header) + "\n")
        self._fh.flush()
        os.replace(tmp, self.path)
        self.unsynced = False

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._fh.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        self._fh.flush()  # to the OS: a killed process loses nothing written
        self.unsynced = True

    def sync(self) -> None:
        if self.unsynced:
            self.unsynced = False
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Closed and unlocked, the file kept (its rows are stored; ``compact`` or a reader picks them up)."""
        if not self._fh.closed:
            self._fh.close()

    def discard(self) -> None:
        """Its rows are in a Parquet part: removed (still locked, so no compaction reads it half-gone)."""
        self.path.unlink(missing_ok=True)
        self.close()


class GenerationCheckpoint:
    def __init__(self, directory: str | Path, key: str = KEY):
        self.directory = storage.lake_path(directory)
        self.key = key

    def parts(self) -> list[Path]:
        """The Parquet parts, oldest first (names start with a nanosecond timestamp)."""
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob(f"{PART_PREFIX}*{PART_SUFFIX}"), key=_stamp)

    def journals(self) -> list[Path]:
        """The journals (local lakes only), oldest first."""
        if not storage.is_local(self.directory) or not self.directory.exists():
            return []
        return sorted(self.directory.glob(f"{JOURNAL_PREFIX}*{JOURNAL_SUFFIX}"), key=_stamp)

    def _read(self, files: Sequence[Path]) -> pl.DataFrame | None:
        frames = []
        for path in sorted(files, key=_stamp):  # oldest first: "last" wins below
            frame = read_journal(path) if path.name.endswith(JOURNAL_SUFFIX) else storage.read_parquet(path)
            if frame is not None:
                frames.append(frame)
        if not frames:
            return None
        return pl.concat(frames, how="diagonal_relaxed").unique(self.key, keep="last", maintain_order=True)

    def load(self) -> pl.DataFrame | None:
        """Every stored row (parts and journals, live writers' included), one per key, the newest winning."""
        return self._read([*self.parts(), *self.journals()])

    def append(self, rows: pl.DataFrame, stamp: str | None = None) -> Path:
        """Write ``rows`` as one new part, atomically. Unique names: concurrent writers never collide.
        ``stamp``: the part's place in the order (a folded journal's own), default now."""
        if self.key not in rows.columns:
            raise ValueError(f"checkpoint {self.directory}: rows have no {self.key!r} column")
        path = self.directory / _new_name(PART_PREFIX, PART_SUFFIX, stamp)
        # Local: temp file, fsync, rename (durable before it becomes visible); object store: one PUT.
        storage.write_parquet(rows, path)
        return path

    def writer(self, schema: Mapping[str, pl.DataType], fold_rows: int | None = None,
               fold_s: float | None = None) -> StoreWriter:
        """A :class:`StoreWriter` for rows of ``schema`` (use it as a context manager)."""
        return StoreWriter(self, schema, fold_rows, fold_s)

    def compact(self) -> None:
        """Fold all parts and the journals of writers that are gone into one part. The new part is in place
        before the old files go, so a crash in between leaves duplicates (which ``load`` drops), never a loss.
        A live writer's journal is left alone."""
        parts = self.parts()
        journals = [j for j in self.journals() if not _in_use(j)]
        if not journals and len(parts) <= 1:
            return
        merged = self._read([*parts, *journals])
        if merged is not None:
            self.append(merged)
        for p in [*parts, *journals]:
            p.unlink(missing_ok=True)

    def clear(self) -> None:
        storage.remove_tree(self.directory)


class StoreWriter:
    """Rows stored one by one as they are finished (the module docstring says how durably).

    ``add`` is cheap (a JSON line appended and flushed, locally) and may be called from an event loop; a
    background thread fsyncs the journal and folds it into Parquet parts. ``close`` (or leaving the ``with``
    block, also on an error) folds what is left; a fold that failed in the background is logged and tried
    again, and one that fails at the end raises. ``stored`` counts the rows added.
    """

    def __init__(self, store: GenerationCheckpoint, schema: Mapping[str, pl.DataType], fold_rows: int | None = None,
                 fold_s: float | None = None) -> None:
        self.store, self.schema = store, dict(schema)
        unknown = {n: str(t) for n, t in self.schema.items() if str(t) not in _DTYPES}
        if unknown:
            raise ValueError(f"generation store {store.directory}: columns of types a journal cannot hold: {unknown}")
        self.local = storage.is_local(store.directory)
        self.fold_rows = fold_rows or (FOLD_ROWS if self.local else OBJECT_STORE_FOLD_ROWS)
        self.fold_s = fold_s or (FOLD_S if self.local else OBJECT_STORE_FOLD_S)
        self.stored = 0
        self._lock = threading.Lock()  # pending rows and the open journal
        self._folding = threading.Lock()  # one fold at a time
        self._pending: list[dict] = []  # rows not yet in a Parquet part
        self._journal: _Journal | None = None
        self._kept: list[_Journal] = []  # journals of a failed fold: their rows are pending again
        self._since = time.monotonic()  # when the oldest pending row came
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._background, name=f"store-writer {store.directory}", daemon=True)
        self._thread.start()

    def add(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store ``rows`` (dicts with the schema's columns) now."""
        if not rows:
            return
        if self._closed:
            raise RuntimeError(f"generation store {self.store.directory}: the writer is closed")
        with self._lock:
            # Pending first, the journal next: an interrupt raised in between (Ctrl-C lands wherever the main thread
            # is) leaves a row pending that the journal lacks, which the fold stores, never a journaled row that
            # is not pending, which the fold would drop with its journal.
            if not self._pending:
                self._since = time.monotonic()
            self._pending.extend(dict(r) for r in rows)
            self.stored += len(rows)
            if self.local:
                if self._journal is None:
                    self._journal = _Journal(Path(self.store.directory), self.schema)
                self._journal.write(rows)
            if len(self._pending) >= self.fold_rows:
                self._wake.set()

    def frame(self, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
        return pl.DataFrame(list(rows), schema=self.schema, orient="row")

    def fold(self) -> None:
        """The pending rows as one Parquet part; then their journal goes."""
        with self._folding:
            with self._lock:
                rows, journal, kept = self._pending, self._journal, self._kept
                self._pending, self._journal, self._kept = [], None, []
            try:
                if rows:
                    self.store.append(self.frame(rows), stamp=journal.stamp if journal else None)
            except BaseException:
                with self._lock:  # nothing lost: the rows are pending again, their journals kept
                    self._pending[:0] = rows
                    self._kept = [*kept, *([journal] if journal else []), *self._kept]
                raise
            for done in [*kept, *([journal] if journal else [])]:
                done.discard()

    def _due(self) -> bool:
        with self._lock:
            return bool(self._pending) and (len(self._pending) >= self.fold_rows
                                            or time.monotonic() - self._since >= self.fold_s)

    def _background(self) -> None:
        while not self._closed:
            self._wake.wait(SYNC_S)
            self._wake.clear()
            if self._closed:
                return
            try:
                with self._lock:
                    journal = self._journal
                if journal is not None:  # outside the lock: add() never waits for the disk
                    journal.sync()
                if self._due():
                    self.fold()
            except Exception as exc:  # noqa: BLE001  (kept: the rows are in the journal or pending)
                log.warning("generation store %s: folding rows into a Parquet part failed (%s: %s); they stay "
                            "stored and folding is tried again", self.store.directory, type(exc).__name__, exc)

    def close(self) -> None:
        """Fold what is left (raises if that fails: the rows then stay in the journal, locally)."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join()
        try:
            self.fold()
        finally:
            with self._lock:
                for journal in [*self._kept, *([self._journal] if self._journal else [])]:
                    journal.close()

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self.close()
        except Exception as exc:
            if exc_type is None:
                raise
            # The error that ended the block is the one raised; this one is said, not lost.
            log.error("generation store %s: the last fold failed too (%s: %s); the rows stay in the journal",
                      self.store.directory, type(exc).__name__, exc)
