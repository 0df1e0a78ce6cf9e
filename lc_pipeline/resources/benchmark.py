"""The active benchmark config as a resource, so every asset of a run reads the same one."""

from __future__ import annotations

import dagster as dg

from lc_pipeline.config import BenchmarkConfig, load_config


class BenchmarkResource(dg.ConfigurableResource):
    """``config``: a YAML path or a packaged config name (``demo``, ``default``)."""

    config: str = "demo"

    def load(self) -> BenchmarkConfig:
        return load_config(self.config)
