"""Dagster Definitions: assets, checks, resources, sensor and the per-model job.

``build_pipeline(settings)`` builds everything for one config and lake (tests build their
own with a tiny config); the module-level ``defs`` is what ``dagster dev`` / ``lcp ui`` load,
configured from the environment (see :mod:`lc_pipeline.settings`).
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from lc_pipeline.assets import generation, instances, lveval, minilongbench, retrieval, scoring, sources
from lc_pipeline.assets import judge as judge_assets
from lc_pipeline.config import BenchmarkConfig, load_config
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import (
    BenchmarkResource,
    EmbedderResource,
    HiveParquetIOManager,
    LakeResource,
    ModelsResource,
    TokenizerResource,
    VectorIndexResource,
)
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.sensors import build_partitions_sensor
from lc_pipeline.settings import Settings

MODEL_JOB = "model_partitions_job"


@dataclass(frozen=True)
class Pipeline:
    settings: Settings
    config: BenchmarkConfig
    partitions: Partitions
    assets: list
    resources: dict
    defs: dg.Definitions


def build_pipeline(settings: Settings) -> Pipeline:
    config = load_config(settings.config)
    parts = Partitions(config.lengths)
    assets = [
        *sources.build(parts),
        *retrieval.build(parts),
        *lveval.build(parts),
        *instances.build(parts),
        *generation.build(parts),
        *scoring.build(parts),
        *judge_assets.build(parts),
        *minilongbench.build(parts),
    ]
    lake = str(settings.lake_dir)
    resources = {
        "io_manager": HiveParquetIOManager(base_dir=lake),
        "lake": LakeResource(base_dir=lake),
        "benchmark": BenchmarkResource(config=settings.config),
        "tokenizer": TokenizerResource(name=config.tokenizer),
        "embedder": EmbedderResource(model=config.embedding_model),
        "vector_index": VectorIndexResource(path=str(settings.lake_dir / "passage_index" / "index.faiss")),
        "models": ModelsResource(registry_path=str(settings.models_file)),
        # Judge server and model from $OPENAI_BASE_URL / $LCP_JUDGE_MODEL (or set them here); key from the env.
        "judge": JudgeResource(cache_path=str(settings.lake_dir / "_cache" / "judge.sqlite")),
    }
    # Everything a new model needs: its generations and scores, never anything upstream.
    model_job = dg.define_asset_job(
        MODEL_JOB,
        selection=dg.AssetSelection.assets("generations", "metric_scores"),
        partitions_def=parts.length_x_model,
        description="Generate and score one (length, model) partition",
    )
    defs = dg.Definitions(
        assets=assets,
        resources=resources,
        jobs=[model_job],
        sensors=[build_partitions_sensor(settings.config, str(settings.models_file), model_job)],
    )
    return Pipeline(settings, config, parts, assets, resources, defs)


defs = build_pipeline(Settings.from_env()).defs
