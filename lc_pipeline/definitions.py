"""Dagster Definitions: assets, checks, resources, sensor and the per-model job.

``build_pipeline(settings)`` builds everything for one config and lake (tests build their
own with a tiny config); the module-level ``defs`` is what ``dagster dev`` / ``lcp ui`` load,
configured from the environment (see :mod:`lc_pipeline.settings`).

The lake may be a folder or a bucket URL; the executor is chosen by ``LCP_EXECUTOR``
(``multiprocess``, the default; ``k8s``: dagster-k8s' ``k8s_job_executor``, a pod per step;
``celery``: dagster-celery's ``celery_executor``), with its config from the YAML file named
by ``LCP_EXECUTOR_CONFIG`` (``deploy/<profile>/executor.yaml``; see docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from lc_pipeline.assets import benchmarks as benchmark_assets
from lc_pipeline.assets import citations as citation_assets
from lc_pipeline.assets import (
    generation,
    instances,
    lveval,
    minilongbench,
    prompt_guard,
    reports,
    retrieval,
    scoring,
    sources,
    versions,
)
from lc_pipeline.assets import judge as judge_assets
from lc_pipeline.config import BenchmarkConfig, ConfigError, settings_config
from lc_pipeline.generate.backends import capabilities
from lc_pipeline.generate.registry import ModelRegistry
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
from lc_pipeline.resources.nli import NLIResource
from lc_pipeline.resources.parquet_io import with_column_schemas
from lc_pipeline.sensors import build_partitions_sensor
from lc_pipeline.settings import Settings
from lc_pipeline.yaml_files import read_yaml

MODEL_JOB = "model_partitions_job"
EXECUTORS = ("multiprocess", "k8s", "celery")
GENERATION_STEP = "generations"  # the step key of the generations asset (one partition per run)
GPU_RESOURCE = "nvidia.com/gpu"


def load_executor_config(path: Path | None) -> dict:
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LCP_EXECUTOR_CONFIG: {path} does not exist")
    # The same strict reading as configs (UTF-8, no duplicate keys, aliases bounded; file and line named).
    data = read_yaml(path, "LCP_EXECUTOR_CONFIG", ConfigError) or {}
    if not isinstance(data, dict):
        raise TypeError(f"LCP_EXECUTOR_CONFIG {path}: expected a mapping of executor settings, got {type(data).__name__}")
    # Run-config shape (`execution: config: ...`), which dagster-celery workers read from the same file.
    if "execution" in data:
        data = (data["execution"] or {}).get("config") or {}
        if not isinstance(data, dict):
            raise TypeError(f"LCP_EXECUTOR_CONFIG {path}: execution.config must be a mapping")
    return data


def generation_step_gpus(executor_config: dict) -> int | None:
    """GPUs the k8s executor requests for a generation pod (its ``nvidia.com/gpu`` limit), if set."""
    step = (executor_config.get("per_step_k8s_config") or {}).get(GENERATION_STEP) or {}
    limits = ((step.get("container_config") or {}).get("resources") or {}).get("limits") or {}
    return int(limits[GPU_RESOURCE]) if GPU_RESOURCE in limits else None


def check_gpus_cover_tensor_parallel(executor_config: dict, registry: ModelRegistry, source: str) -> None:
    """A vLLM model with tensor_parallel_size N needs N GPUs in its generation pod: a smaller
    request would only fail hours later, on the cluster, so it is refused when the code loads."""
    gpus = generation_step_gpus(executor_config)
    if gpus is None:
        return
    for slug in registry.names():
        spec = registry.get(slug)
        if capabilities(spec.backend).reads("tensor_parallel_size") and spec.tensor_parallel_size > gpus:
            raise ValueError(
                f"{source}: per_step_k8s_config.{GENERATION_STEP} requests {gpus} GPU(s) per generation pod, but model "
                f"{slug!r} has tensor_parallel_size {spec.tensor_parallel_size}; raise {GPU_RESOURCE} to at least that"
            )


def build_executor(settings: Settings) -> dg.ExecutorDefinition:
    """The executor profile of ``settings`` with its YAML config applied (validated by Dagster)."""
    name = settings.executor
    if name not in EXECUTORS:
        raise ValueError(f"LCP_EXECUTOR={name!r}: expected one of {list(EXECUTORS)}")
    config = load_executor_config(settings.executor_config)
    source = str(settings.executor_config or "executor config")
    if name == "multiprocess":
        executor = dg.multiprocess_executor
    elif name == "k8s":
        try:
            from dagster_k8s import k8s_job_executor
        except ImportError as exc:
            raise ImportError("LCP_EXECUTOR=k8s needs dagster-k8s: pip install 'lc_pipeline[k8s]'") from exc
        check_gpus_cover_tensor_parallel(config, ModelRegistry(settings.models_file), source)
        executor = k8s_job_executor
    else:
        try:
            from dagster_celery import celery_executor
        except ImportError as exc:
            raise ImportError("LCP_EXECUTOR=celery needs dagster-celery: pip install 'lc_pipeline[celery]'") from exc
        executor = celery_executor
    if not config:
        return executor
    # `configured` checks the config only when a run starts; a typo must fail `definitions validate`.
    # (validate_config is what dagster-celery's worker CLI uses too; env: values resolve at run time.)
    from dagster._config import validate_config

    checked = validate_config(executor.config_schema.config_type, config)
    if not checked.success:
        raise dg.DagsterInvalidConfigError(f"{source}: invalid config for the {name} executor", checked.errors, config)
    return executor.configured(config, name=f"{executor.name}_lcp")


@dataclass(frozen=True)
class Pipeline:
    settings: Settings
    config: BenchmarkConfig
    partitions: Partitions
    assets: list
    resources: dict
    defs: dg.Definitions
    # ``assets`` with the generations asset outside the gpu pool: what the runner materializes for an imported
    # model's generations (no model is called; issue 31), never part of ``defs``.
    unpooled_assets: list = dataclasses.field(default_factory=list)


def _serves(asset, released: bool) -> bool:
    specs = list(getattr(asset, "specs", ()))
    return not specs or any(versions.serves(spec, released) for spec in specs)


def asset_names(asset: dg.AssetsDefinition) -> set[str]:
    return {key.to_user_string() for key in asset.keys}


@contextlib.contextmanager
def quiet_partition_mapping_warnings() -> Iterator[None]:
    """Without the BetaWarning Dagster gives each time a ``MultiToSingleDimensionPartitionMapping`` is made (the
    (length, model) -> model mappings, five of them): it repeated ten times on every command that loads the graph.
    The mapping is what these assets mean; tests cover it. Other warnings pass."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*MultiToSingleDimensionPartitionMapping")
        yield


def all_assets(parts: Partitions) -> list:
    """Every asset of every kind of config; each declares which configs it serves (its ``lcp/serves`` tag,
    assets/versions.py): a benchmark run as released builds its instances from the records alone and ranks the
    published tables, so the construction inputs and LongScore's assets serve constructed configs only, and
    ``instances`` and ``leaderboard`` have one definition each for either kind."""
    return [
        *sources.build(parts),
        *retrieval.build(parts),
        *lveval.build(parts),
        *instances.build(parts),
        *generation.build(parts),
        *prompt_guard.build(parts),  # blocking check on each generations partition
        *scoring.build(parts),
        *benchmark_assets.build(parts),
        *judge_assets.build(parts),
        *citation_assets.build(parts),
        *reports.build(parts),
        *minilongbench.build(parts),
    ]


def declared_specs(lengths: tuple[str, ...] = ("all",)) -> dict[str, dg.AssetSpec]:
    """Every asset's spec (its declared code version, hashed config fields, configs served), by name; where a
    released and a constructed definition share a name, the constructed one (they declare the same version)."""
    with quiet_partition_mapping_warnings():
        built = all_assets(Partitions(list(lengths)))
    out: dict[str, dg.AssetSpec] = {}
    for asset in built:
        for spec in getattr(asset, "specs", ()):
            name = spec.key.to_user_string()
            if name not in out or versions.serves(spec, released=False):
                out[name] = spec
    return out


def declared_fingerprint(asset: str, config: BenchmarkConfig, added: str | None = None) -> str:
    """The data version ``asset`` records under ``config`` (``added``: what its ``lcp/adds`` name, e.g. a model's
    settings fingerprint), from its declarations alone."""
    return versions.fingerprint(declared_specs(tuple(config.lengths))[asset], config, added)


def build_pipeline(settings: Settings) -> Pipeline:
    config = settings_config(settings)
    parts = Partitions(config.lengths)
    released = config.released is not None
    with quiet_partition_mapping_warnings():
        assets = [a for a in all_assets(parts) if _serves(a, released)]
    assets = with_column_schemas(assets)  # each table's columns, described, in the UI before a run
    lake = settings.lake_url  # a folder or a bucket URL: every resource below takes either
    resources = {
        "io_manager": HiveParquetIOManager(base_dir=lake),
        "lake": LakeResource(base_dir=lake),
        "benchmark": BenchmarkResource(config=settings.config, tasks=list(settings.tasks), limit=settings.limit),
        "tokenizer": TokenizerResource(name=config.tokenizer, fallback=config.tokenizer_fallback),
        "embedder": EmbedderResource(model=config.embedding_model),
        "vector_index": VectorIndexResource(path=f"{lake}/passage_index/index.faiss"),
        "models": ModelsResource(registry_path=str(settings.models_file)),
        # Judge server and model from $OPENAI_BASE_URL / $LCP_JUDGE_MODEL (or set them here); key from the env.
        # Its reply cache is SQLite: beside the tables, or node-local when the lake is a bucket.
        "judge": JudgeResource(cache_path=str(settings.judge_cache_path)),
        # The NLI judge of citation metrics: backend and model from $LCP_NLI_BACKEND / $LCP_NLI_MODEL (or set
        # here); none set, citation_scores fails on a task with citation metrics, saying so. Verdicts cached.
        "nli": NLIResource(cache_path=str(settings.judge_cache_path.with_name("nli.sqlite"))),
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
        executor=build_executor(settings),
    )
    with quiet_partition_mapping_warnings():
        unpooled_generations = with_column_schemas(generation.build(parts, pool=None))
    unpooled = [a for a in assets if "generations" not in asset_names(a)] + unpooled_generations
    return Pipeline(settings, config, parts, assets, resources, defs, unpooled)


defs = build_pipeline(Settings.from_env()).defs
