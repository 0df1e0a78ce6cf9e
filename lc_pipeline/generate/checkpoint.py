"""Append-only checkpoint of finished generations, so a killed run resumes where it stopped.

Each flushed batch is one Parquet part written atomically; on restart the parts are read
back and rows whose ``generation_id`` is still wanted are reused instead of regenerated.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import polars as pl


class GenerationCheckpoint:
    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def parts(self) -> list[Path]:
        return sorted(self.directory.glob("part-*.parquet")) if self.directory.exists() else []

    def load(self) -> pl.DataFrame | None:
        parts = self.parts()
        if not parts:
            return None
        return pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed").unique(
            "generation_id", keep="last", maintain_order=True
        )

    def append(self, rows: pl.DataFrame) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"part-{len(self.parts()):06d}.parquet"
        tmp = self.directory / f".{path.name}.{uuid.uuid4().hex}.tmp"
        rows.write_parquet(tmp)
        os.replace(tmp, path)
        return path

    def clear(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
