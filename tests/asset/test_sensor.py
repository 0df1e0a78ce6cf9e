"""The partitions sensor: a model added to the registry gets its partition and one run per built length."""

from __future__ import annotations

import dataclasses

import dagster as dg
from conftest import settings_for

from lc_pipeline.definitions import MODEL_JOB, build_pipeline
from lc_pipeline.generate.registry import ModelRegistry


def test_new_model_in_registry_gets_partition_and_runs(tmp_path, tiny_config_file):
    settings = settings_for(tmp_path, tiny_config_file)
    pipeline = build_pipeline(settings)
    sensor = pipeline.defs.resolve_sensor_def("benchmark_partitions_sensor")
    with dg.instance_for_test() as instance:
        # First tick: the config's source and model become partitions; no instances yet, so no runs.
        first = sensor(dg.build_sensor_context(instance=instance, definitions=pipeline.defs))
        added = {(r.partitions_def_name, tuple(r.partition_keys)) for r in first.dynamic_partitions_requests}
        assert added == {("source", ("demo",)), ("model", ("smollm2-135m",))}
        assert first.run_requests == []
        instance.add_dynamic_partitions("source", ["demo"])
        instance.add_dynamic_partitions("model", ["smollm2-135m"])

        # Nothing new: the sensor skips.
        assert isinstance(sensor(dg.build_sensor_context(instance=instance, definitions=pipeline.defs)), dg.SkipReason)

        # Instances exist for 1k only; a model is registered.
        instance.report_runless_asset_event(dg.AssetMaterialization("instances", partition="1k"))
        registry = ModelRegistry(settings.models_file)
        registry.add(dataclasses.replace(registry.get("smollm2-135m"), slug="smollm2-135m-w1536", max_model_len=1536))
        tick = sensor(dg.build_sensor_context(instance=instance, definitions=pipeline.defs))
        assert [tuple(r.partition_keys) for r in tick.dynamic_partitions_requests] == [("smollm2-135m-w1536",)]
        assert [str(r.partition_key) for r in tick.run_requests] == ["1k|smollm2-135m-w1536"]
        assert pipeline.defs.resolve_job_def(MODEL_JOB).partitions_def is not None
