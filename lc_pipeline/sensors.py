"""Sensor that turns configured sources and registered models into dynamic partitions.

A model registered with `lcp add-model` (or listed in the benchmark config) gets its
``model`` partition here, and one run per length whose instances already exist; nothing
upstream is requested, so a new model costs only its own partitions.
"""

from __future__ import annotations

import dagster as dg

from lc_pipeline.config import load_config
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry, validate_model_slug
from lc_pipeline.partitions import MODEL_DIM, SOURCE_DIM, length_model_key, validate_source_name


def wanted_models(config_models, registry: ModelRegistry) -> list[str]:
    """Config models plus every model added to the registry file, validated, in a stable order."""
    added = [n for n in registry.names() if n not in BUILTIN_MODELS]
    names = list(dict.fromkeys([*config_models, *added]))
    return [validate_model_slug(n) for n in names]


def build_partitions_sensor(config_ref: str, models_file: str, job: dg.UnresolvedAssetJobDefinition):
    @dg.sensor(
        name="benchmark_partitions_sensor",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Adds source/model partitions from the config and model registry; launches a new model's runs",
    )
    def benchmark_partitions_sensor(context: dg.SensorEvaluationContext):
        config = load_config(config_ref)
        instance = context.instance
        sources = [validate_source_name(s.name) for s in config.sources]
        models = wanted_models(config.models, ModelRegistry(models_file))
        new_sources = [s for s in sources if s not in set(instance.get_dynamic_partitions(SOURCE_DIM))]
        known_models = set(instance.get_dynamic_partitions(MODEL_DIM))
        new_models = [m for m in models if m not in known_models]
        if not new_sources and not new_models:
            return dg.SkipReason("no new sources or models")
        built = instance.get_materialized_partitions(dg.AssetKey("instances"))
        lengths = [lv for lv in config.lengths if lv in built]
        requests = []
        if new_sources:
            requests.append(dg.AddDynamicPartitionsRequest(partitions_def_name=SOURCE_DIM, partition_keys=new_sources))
        if new_models:
            requests.append(dg.AddDynamicPartitionsRequest(partitions_def_name=MODEL_DIM, partition_keys=new_models))
        return dg.SensorResult(
            dynamic_partitions_requests=requests,
            run_requests=[
                dg.RunRequest(
                    run_key=f"new-model:{m}:{lv}",
                    partition_key=length_model_key(lv, m),
                    tags={"lcp/new_model": m},
                )
                for m in new_models
                for lv in lengths
            ],
        )

    return benchmark_partitions_sensor
