"""The generation store: finished rows on disk, keyed by cache key, written in atomic chunks.

Every flushed chunk is one Parquet part, written to a temp file and renamed, so a process
killed at any moment leaves only whole parts (plus, at worst, an ignored temp file). The
store is also the cache: rows stay after the partition is written, so a rerun with the same
prompts, model settings and sampling parameters finds every row and generates nothing.
``compact`` folds the parts into one after a finished partition.

The directory may be on an object store (a ``UPath``, see :mod:`lc_pipeline.storage`): there
a part is one PUT, atomic by itself, and unique part names keep writers from colliding.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import polars as pl

from lc_pipeline import storage

KEY = "cache_key"


class GenerationCheckpoint:
    def __init__(self, directory: str | Path, key: str = KEY):
        self.directory = storage.lake_path(directory)
        self.key = key

    def parts(self) -> list[Path]:
        # Names start with a nanosecond timestamp: sorted = oldest first, so "last" wins below.
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob("part-*.parquet"), key=lambda p: p.name)

    def load(self) -> pl.DataFrame | None:
        parts = self.parts()
        if not parts:
            return None
        frames = [storage.read_parquet(p) for p in parts]
        return pl.concat(frames, how="diagonal_relaxed").unique(self.key, keep="last", maintain_order=True)

    def append(self, rows: pl.DataFrame) -> Path:
        """Write ``rows`` as one new part, atomically. Unique names: concurrent writers never collide."""
        if self.key not in rows.columns:
            raise ValueError(f"checkpoint {self.directory}: rows have no {self.key!r} column")
        path = self.directory / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        # Local: temp file, fsync, rename (durable before it becomes visible); object store: one PUT.
        storage.write_parquet(rows, path)
        return path

    def compact(self) -> None:
        """Fold all parts into one. The new part is in place before the old ones go, so a
        crash in between leaves duplicates (which ``load`` drops), never a loss."""
        parts = self.parts()
        if len(parts) <= 1:
            return
        merged = self.load()
        assert merged is not None
        self.append(merged)
        for p in parts:
            p.unlink(missing_ok=True)

    def clear(self) -> None:
        storage.remove_tree(self.directory)
