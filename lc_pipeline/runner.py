"""Materialize the graph from the command line, one run per partition, reusing finished work.

``lcp demo`` and ``lcp backfill`` use this. Every run goes into the persistent Dagster
instance (``DAGSTER_HOME``), so the UI shows the same history afterwards. A partition is
reused, not re-run, when its latest materialization carries the current stage fingerprint
(:mod:`lc_pipeline.fingerprints`) and its Parquet file is on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import polars as pl

from lc_pipeline.assets.common import FINGERPRINT_KEY
from lc_pipeline.definitions import Pipeline
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.generate.registry import validate_model_slug
from lc_pipeline.partitions import MODEL_DIM, SOURCE_DIM, length_model_key, validate_source_name
from lc_pipeline.resources.parquet_io import partition_path


class Runner:
    def __init__(
        self,
        pipeline: Pipeline,
        instance: dg.DagsterInstance,
        echo: Callable[[str], None] = print,
        log_level: str = "WARNING",
    ):
        self.pipeline = pipeline
        # Dagster's console logger prints every engine event at DEBUG; the CLI shows its own
        # progress lines instead (the UI keeps the full event log either way).
        self.run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}}
        self.config = pipeline.config
        self.instance = instance
        self.echo = echo
        self.lake = pipeline.settings.lake_dir
        self.ran: list[str] = []
        self.reused: list[str] = []

    # -- partitions -------------------------------------------------------------------
    def register_sources(self) -> list[str]:
        names = [validate_source_name(s.name) for s in self.config.sources]
        self._add_dynamic(SOURCE_DIM, names)
        return names

    def register_models(self, slugs: list[str]) -> None:
        for s in slugs:
            validate_model_slug(s)
            self.pipeline.resources["models"].spec(s)  # unknown model -> clear error before any run
        self._add_dynamic(MODEL_DIM, slugs)

    def _add_dynamic(self, name: str, keys: list[str]) -> None:
        new = [k for k in keys if not self.instance.has_dynamic_partition(name, k)]
        if new:
            self.instance.add_dynamic_partitions(name, new)

    # -- freshness --------------------------------------------------------------------
    def is_fresh(self, asset: str, partition_key: str | None, dims: dict[str, str], fingerprint: str) -> bool:
        flt = dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(asset), asset_partitions=[partition_key] if partition_key else None
        )
        records = self.instance.fetch_materializations(flt, limit=1).records
        if not records:
            return False
        meta = records[0].asset_materialization.metadata
        recorded = meta.get(FINGERPRINT_KEY)
        if recorded is None or getattr(recorded, "value", recorded) != fingerprint:
            return False
        path = partition_path(Path(self.lake), asset, dims)
        return path.exists()

    def step(
        self,
        label: str,
        assets: list[str],
        fingerprints: dict[str, str],
        partition_key: str | dg.MultiPartitionKey | None = None,
        dims: dict[str, str] | None = None,
        force: bool = False,
    ) -> bool:
        """Materialize ``assets`` for one partition unless all of them are fresh. True if it ran."""
        pk = str(partition_key) if partition_key is not None else None
        if not force and all(self.is_fresh(a, pk, dims or {}, fingerprints[a]) for a in assets):
            self.echo(f"  = {label}: up to date, reused")
            self.reused.append(label)
            return False
        self.echo(f"  > {label} ...")
        t0 = time.perf_counter()
        result = dg.materialize(
            self.pipeline.assets,
            selection=assets,
            partition_key=pk,
            resources=self.pipeline.resources,
            instance=self.instance,
            run_config=self.run_config,
            tags={"lcp/command": "cli"},
        )
        failed = [c for c in result.get_asset_check_evaluations() if not c.passed]
        if failed:
            raise RuntimeError(f"{label}: asset checks failed: {[c.check_name for c in failed]}")
        self.echo(f"  + {label}: done in {time.perf_counter() - t0:.1f}s (run {result.run_id[:8]})")
        self.ran.append(label)
        return True

    # -- stages ------------------------------------------------------------------------
    def build_benchmark(self) -> None:
        """Sources, retrieval and instances for every configured length."""
        cfg = self.config
        self.echo(f"benchmark {cfg.name!r}: lengths {list(cfg.lengths)}, lake {self.lake}")
        for name in self.register_sources():
            fps = {a: stage_fingerprint(a, cfg) for a in ("source_documents", "source_items", "rejected_records")}
            self.step(f"sources [{name}]", list(fps), fps, name, {SOURCE_DIM: name})
        for asset in ("passages", "passage_index", "hard_negatives"):
            self.step(asset, [asset], {asset: stage_fingerprint(asset, cfg)})
        for level in cfg.lengths:
            fp = {"instances": stage_fingerprint("instances", cfg)}
            self.step(f"instances [{level}]", ["instances"], fp, level, {"length": level})

    def missing_instances(self) -> list[str]:
        return [lv for lv in self.config.lengths if not partition_path(Path(self.lake), "instances", {"length": lv}).exists()]

    def evaluate_model(self, slug: str, lengths: list[str] | None = None) -> None:
        """Only this model's partitions: generations + metric_scores per length, then its long_scores."""
        cfg = self.config
        self.register_models([slug])
        missing = self.missing_instances()
        if missing:
            raise RuntimeError(f"instances for lengths {missing} are not built yet; run `lcp demo` (or build) first")
        spec_fp = self.pipeline.resources["models"].spec(slug).fingerprint()
        fps = {a: stage_fingerprint(a, cfg, spec_fp) for a in ("generations", "metric_scores", "long_scores")}
        for level in lengths or cfg.lengths:
            key = length_model_key(level, slug)
            dims = {"length": level, MODEL_DIM: slug}
            self.step(f"generations + metric_scores [{level}|{slug}]", ["generations", "metric_scores"],
                      fps, key, dims)
        self.step(f"long_scores [{slug}]", ["long_scores"], fps, slug, {MODEL_DIM: slug})

    def leaderboard(self) -> pl.DataFrame:
        # Always re-run: it is cheap and must reflect every model evaluated so far.
        self.step("leaderboard", ["leaderboard"], {"leaderboard": ""}, force=True)
        return pl.read_parquet(partition_path(Path(self.lake), "leaderboard", {}))

    def demo(self, models: list[str] | None = None) -> pl.DataFrame:
        self.build_benchmark()
        for slug in models or list(self.config.models):
            self.evaluate_model(slug)
        return self.leaderboard()
