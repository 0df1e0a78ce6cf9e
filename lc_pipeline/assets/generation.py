"""generations: model outputs per (length, model) partition, resumable after a crash."""


import json

import dagster as dg
import polars as pl
from tqdm import tqdm

from lc_pipeline import schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.fingerprints import short_id, stage_fingerprint
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, LakeResource, ModelsResource

# Rows are flushed to the checkpoint every this many model batches.
FLUSH_EVERY_BATCHES = 2


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="generation",
        kinds={"parquet"},
        description="Model outputs with prompt token counts, truncation flag, finish reason, latency and settings",
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
        sampling = json.dumps(generator.sampling_params(), sort_keys=True)
        insts = instances.sort("instance_id")
        gen_ids = [short_id(i, slug, spec.fingerprint(), sampling) for i in insts["instance_id"]]
        wanted = dict(zip(gen_ids, insts["instance_id"]))

        checkpoint = GenerationCheckpoint(lake.checkpoint_dir("generations", dims))
        previous = checkpoint.load()
        done = previous.filter(pl.col("generation_id").is_in(gen_ids)) if previous is not None else schemas.empty("generations")
        if done.height:
            context.log.info(f"resuming: {done.height} of {len(gen_ids)} generations found in {checkpoint.directory}")
        done_ids = set(done["generation_id"])
        todo = [(g, wanted[g]) for g in gen_ids if g not in done_ids]
        prompts = dict(insts.select("instance_id", "prompt").iter_rows())
        max_new = dict(insts.select("instance_id", "max_new_tokens").iter_rows())

        chunk = max(1, spec.batch_size * FLUSH_EVERY_BATCHES)
        with tqdm(total=len(gen_ids), initial=done.height, desc=f"generate {dims['length']} {slug}", unit="prompt") as bar:
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                requests = [GenerationRequest(key=g, prompt=prompts[i], max_new_tokens=max_new[i]) for g, i in part]
                results = generator.generate(requests, progress=bar.update)
                rows = pl.DataFrame(
                    {
                        "generation_id": [r.key for r in results],
                        "instance_id": [wanted[r.key] for r in results],
                        "output": [r.output for r in results],
                        "prompt_tokens": [r.prompt_tokens for r in results],
                        "original_prompt_tokens": [r.original_prompt_tokens for r in results],
                        "truncated": [r.truncated for r in results],
                        "completion_tokens": [r.completion_tokens for r in results],
                        "finish_reason": [r.finish_reason for r in results],
                        "latency_s": [r.latency_s for r in results],
                        "backend": [generator.backend] * len(results),
                        "model_id": [generator.model_id] * len(results),
                        "sampling_params": [sampling] * len(results),
                    }
                )
                checkpoint.append(schemas.conform(rows, "generations"))
                context.log.info(f"{min(start + chunk, len(todo))}/{len(todo)} new generations checkpointed")

        everything = checkpoint.load()
        everything = everything if everything is not None else schemas.empty("generations")
        out = schemas.conform(
            everything.filter(pl.col("generation_id").is_in(gen_ids)).sort("instance_id"), "generations"
        )
        if out.height != len(gen_ids):
            raise dg.Failure(f"generations {dims}: expected {len(gen_ids)} rows, have {out.height}")
        yield dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("generations", config, spec.fingerprint()),
                "model": slug,
                "backend": generator.backend,
                "model_id": generator.model_id,
                "generations": out.height,
                "reused_from_checkpoint": done.height,
                "truncated": int(out["truncated"].sum()),
                "mean_prompt_tokens": float(out["prompt_tokens"].mean()),
                "mean_latency_s": float(out["latency_s"].mean()),
                "finish_reasons": dg.MetadataValue.json(dict(out.group_by("finish_reason").len().iter_rows())),
                "preview": preview(out.select("instance_id", "prompt_tokens", "truncated", "output")),
            },
        )
        # The IO manager has written the partition by the time the generator resumes here.
        checkpoint.clear()

    return [generations]
