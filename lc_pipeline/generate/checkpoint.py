"""The generation store: finished rows on disk, keyed by cache key, written in atomic chunks.

Every flushed chunk is one Parquet part, written to a temp file and renamed, so a process
killed at any moment leaves only whole parts (plus, at worst, an ignored temp file). The
store is also the cache: rows stay after the partition is written, so a rerun with the same
prompts, model settings and sampling parameters finds every row and generates nothing.
``compact`` folds the parts into one after a finished partition.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import polars as pl

KEY = "cache_key"


class GenerationCheckpoint:
    def __init__(self, directory: Path, key: str = KEY):
        self.directory = Path(directory)
        self.key = key

    def parts(self) -> list[Path]:
        # Names start with a nanosecond timestamp: sorted = oldest first, so "last" wins below.
        return sorted(self.directory.glob("part-*.parquet")) if self.directory.exists() else []

    def load(self) -> pl.DataFrame | None:
        parts = self.parts()
        if not parts:
            return None
        frames = [pl.read_parquet(p) for p in parts]
        return pl.concat(frames, how="diagonal_relaxed").unique(self.key, keep="last", maintain_order=True)

    def append(self, rows: pl.DataFrame) -> Path:
        """Write ``rows`` as one new part, atomically. Unique names: concurrent writers never collide."""
        if self.key not in rows.columns:
            raise ValueError(f"checkpoint {self.directory}: rows have no {self.key!r} column")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.directory / f".{path.name}.tmp"
        rows.write_parquet(tmp)
        with open(tmp, "rb") as fh:  # durable before it becomes visible
            os.fsync(fh.fileno())
        os.replace(tmp, path)
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
        shutil.rmtree(self.directory, ignore_errors=True)
