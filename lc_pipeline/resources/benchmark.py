"""The active benchmark config as a resource, so every asset of a run reads the same one."""

from __future__ import annotations

import dagster as dg

from lc_pipeline.config import BenchmarkConfig, RunSelection, load_config


class BenchmarkResource(dg.ConfigurableResource):
    """``config``: a YAML path or a packaged config name (``demo``, ``default``); ``tasks`` / ``limit``: run only
    part of it (config.RunSelection: ``lcp run --tasks / --limit``)."""

    config: str = "demo"
    tasks: list[str] = []
    limit: int | None = None

    def load(self) -> BenchmarkConfig:
        only = RunSelection(tasks=tuple(self.tasks), limit=self.limit) if self.tasks or self.limit is not None else None
        return load_config(self.config, only=only)
