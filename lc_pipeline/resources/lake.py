"""The lake's root, for artifacts that are not tables (checkpoints of unfinished partitions)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from lc_pipeline import storage
from lc_pipeline.resources.parquet_io import partition_segments


class LakeResource(dg.ConfigurableResource):
    base_dir: str  # a folder or a bucket URL (lc_pipeline.storage)

    def checkpoint_dir(self, asset: str, dims: dict[str, str]) -> Path:
        # Kept outside the table folders so DuckDB globs over tables never see partial parts.
        return storage.lake_path(self.base_dir).joinpath("_checkpoints", asset, *partition_segments(dims))
