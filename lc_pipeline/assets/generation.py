"""generations: model outputs per (length, model) partition, resumable after a crash, cached."""

import dagster as dg
import polars as pl
from tqdm import tqdm

from lc_pipeline.assets.common import preview
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import INSTANCE_FIELDS
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import (
    chunk_size,
    generate_partition,
    plan_partition,
)
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource
from lc_pipeline.tasks.catalog import catalog_for

# Generation steps of all runs share this pool; its size is the number of GPUs
# (`lcp` sets it, see runner.configure_gpu_pool), so two steps never fight over one device.
GPU_POOL = "gpu"
# Steps that load a model: on dagster-celery they go to the workers of the "gpu" queue (CPU workers
# listen on "dagster"); on k8s their pods get GPUs from deploy/k8s/executor.yaml (docs/deployment.md).
GPU_STEP_TAGS = {"dagster-celery/queue": "gpu"}


def build(parts: Partitions, pool: str | None = GPU_POOL) -> list:
    """The generations asset; ``pool=None``: the same asset outside the ``gpu`` pool, which ``lcp`` materializes
    for a model that calls no model (imported predictions: a lookup), so it never waits for a GPU slot."""
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="generation", **declared("2", INSTANCE_FIELDS, adds=("model",)),
        kinds={"parquet"},
        pool=pool,
        op_tags=GPU_STEP_TAGS if pool else {},
        description="Model outputs with prompt token counts, truncation (applied + policy; skip: not sent), status "
        "(answered / empty / cut / skipped / invalid), what was fed, finish reason, latency, backend and sampling "
        "settings; every answer stored as it arrives (the generation store), so a killed run resumes with only "
        "the missing ones",
    )
    def generations(
        context: dg.AssetExecutionContext,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        lake: LakeResource,
    ):
        config = benchmark.load()
        dims = context.partition_key.keys_by_dimension
        slug = dims["model"]
        spec = models.spec(slug)
        generator = models.generator(slug)
        plan = plan_partition(instances, spec, generator, models.policies(), catalog_for(config))
        # Kept after the partition is written: it is also the cache an unchanged rerun reads.
        store = GenerationCheckpoint(lake.checkpoint_dir("generations", dims))
        # A vLLM engine (or server) stays up for the model's next partition: the runner releases it when it is done
        # with the model, the process's exit otherwise (resources/generator.py).
        with tqdm(total=len(plan.items), desc=f"generate {dims['length']} {slug}", unit="prompt") as bar:
            outcome = generate_partition(
                plan, generator, store, chunk_size(spec), progress=bar.update,
                on_stored=lambda done, total: context.log.info(f"{done}/{total} new generations stored"),
            )
        store.compact()
        out = outcome.rows
        if outcome.reused:
            context.log.info(f"{outcome.reused} of {len(plan.items)} generations reused from {store.directory}")
        yield versioned(
            out, own_fingerprint(context, config, spec.fingerprint()),
            metadata={
                "model": slug,
                "backend": generator.backend,
                "model_id": generator.model_id,
                "sampling_params_hash": plan.sampling_params_hash,
                "generations": out.height,
                "generated": outcome.generated,
                "reused_from_store": outcome.reused,
                "truncated": int(out["truncated"].sum()),
                # Fit to the model's window and why rows have no score (schemas.GENERATIONS status).
                "skipped": int((out["status"] == "skipped").sum()),
                "skipped_share": float((out["status"] == "skipped").mean() or 0.0),
                "truncated_share": float(out["truncated"].mean() or 0.0),
                "statuses": dg.MetadataValue.json(dict(sorted(out.group_by("status").len().iter_rows()))),
                "truncation_policies": dg.MetadataValue.json(dict(out.group_by("truncation_policy").len().iter_rows())),
                # Over the prompts sent: a skipped row fed nothing (prompt_tokens 0).
                "mean_prompt_tokens": float(out.filter(pl.col("status") != "skipped")["prompt_tokens"].mean() or 0.0),
                "completion_tokens": int(out["completion_tokens"].sum()),
                "mean_latency_s": float(out["latency_s"].mean() or 0.0),
                "finish_reasons": dg.MetadataValue.json(dict(out.group_by("finish_reason").len().iter_rows())),
                "preview": preview(out.select("instance_id", "prompt_tokens", "truncated", "output")),
            },
        )

    return [generations]
