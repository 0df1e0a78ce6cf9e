"""The lake's root, for artifacts that are not tables (checkpoints of unfinished partitions)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


class LakeResource(dg.ConfigurableResource):
    base_dir: str

    def checkpoint_dir(self, asset: str, dims: dict[str, str]) -> Path:
        # Kept outside the table folders so DuckDB globs over tables never see partial parts.
        return Path(self.base_dir, "_checkpoints", asset, *[f"{k}={dims[k]}" for k in sorted(dims)])
