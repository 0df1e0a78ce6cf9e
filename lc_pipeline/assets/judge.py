"""judge_scores: LLM-judge verdicts per (length, model) partition (rubrics in score/judge.py)."""

from pathlib import Path

import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas, storage
from lc_pipeline.assets.common import FINGERPRINT_KEY, plot_metadata, preview
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import LENGTH_DIM, MODEL_DIM, Partitions
from lc_pipeline.progress import Progress
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.resources.parquet_io import FILE_NAME, partition_path, read_partition
from lc_pipeline.score.judge import judge_frame, judge_summary, plan_judgments, rubric_fingerprint
from lc_pipeline.score.per_model import without_dropped
from lc_pipeline.tasks.catalog import catalog_for

TABLE = "judge_scores"


def judge_fingerprint(model: str, decoding: dict, overrides: dict, *extra: str) -> str:
    from lc_pipeline.fingerprints import short_id

    # The rubric texts, and which task gets which rubric (task files): a change there re-judges.
    return short_id(model, sorted(decoding.items()), sorted(overrides.items()), rubric_fingerprint(), *extra)


def read_judge_scores(lake_dir: str | Path, model: str | None = None, *, respect_drops: bool = True) -> pl.DataFrame:
    """Every materialized judge_scores partition (of ``model`` only, when given) with its ``length`` and
    ``model`` columns (empty when the judge never ran: judging is optional, the leaderboard must not need it).

    Drops (100-LongBench's prior-knowledge filter, spec 100longbench.md §5.4; score/per_model.py): with
    ``respect_drops``, the rows of the items a model's ``prior_knowledge`` partition marks ``dropped`` are
    left out, as long_scores leaves out their metric rows: every score made from these rows (the
    leaderboard's ``judge:<rubric>`` rows, the headline) is made without them. The judge_scores table
    itself keeps them (what the judge said about each generation stays auditable)."""
    frames = []
    lake = storage.lake_path(lake_dir)
    table = lake / TABLE
    for path in sorted(table.glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={model or '*'}/{FILE_NAME}"), key=str):
        dims = dict(part.split("=", 1) for part in (path.parent.parent.name, path.parent.name))
        frames.append(read_partition(path, dims))
    if not frames:
        return pl.DataFrame(schema={**schemas.JUDGE_SCORES, LENGTH_DIM: pl.String, MODEL_DIM: pl.String})
    out = pl.concat(frames, how="diagonal_relaxed")
    if not respect_drops:
        return out
    kept = []
    for (slug,), rows in out.group_by(MODEL_DIM, maintain_order=True):
        pk = partition_path(lake, "prior_knowledge", {MODEL_DIM: slug})
        kept.append(without_dropped(rows, storage.read_parquet(pk, columns=["item_id", "dropped"]))
                    if pk.exists() else rows)
    return pl.concat(kept)


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="judge",
        kinds={"parquet", "openai"},
        description=(
            "LLM-judge verdicts per generation (HELMET long QA / summarization, Loong 1-100, 100-LongBench QA / "
            "summary rubrics): raw reply, parsed fields, value, score in [0, 1] and parse status; replies cached by "
            "(judge model, rubric version, question), so a rerun asks the server nothing it has answered. Items the "
            "prior-knowledge filter drops stay here (auditable) and are left out of every score made from these rows"
        ),
    )
    def judge_scores(
        context: dg.AssetExecutionContext,
        generations: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
        judge: JudgeResource,
    ):
        config = benchmark.load()
        dims = context.partition_key.keys_by_dimension
        slug = dims[MODEL_DIM]
        try:
            client = judge.client()
            judgments = plan_judgments(
                generations.select(schemas.GENERATIONS.names()), instances.select(schemas.INSTANCES.names()),
                client.model, client.decoding, judge.rubric_overrides, catalog_for(config),
            )
        except ValueError as exc:
            raise dg.Failure(f"judge_scores {dims[LENGTH_DIM]}|{slug}: {exc}", allow_retries=False) from exc
        calls = [c for j in judgments for c in j.calls.values()]
        context.log.info(f"judge {client.model!r} at {client.server()}: {len(judgments)} judgments, {len(calls)} questions")
        with Progress(context.log, len({c.key for c in calls}), f"judge {dims[LENGTH_DIM]} {slug}", unit="call") as bar:
            replies = client.ask(calls, progress=bar.update)
        out = judge_frame(judgments, replies, client.model)
        summary = judge_summary(out)
        if summary["parse_failures"]:
            context.log.warning(f"{summary['parse_failures']} of {out.height} judge replies could not be parsed")
        fp = judge_fingerprint(client.model, client.decoding, dict(judge.rubric_overrides),
                               *sorted(f"{t.qualified_name}:{t.rubric}" for t in catalog_for(config)))
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint(TABLE, config, models.spec(slug).fingerprint() + fp),
                "judge_model": client.model,
                "judge_server": client.server(),
                "server_calls": client.calls,
                "cache_hits": client.cache_hits,
                **{k: (dg.MetadataValue.json(v) if isinstance(v, dict) else v) for k, v in summary.items()
                   if v is not None},
                "rubrics": dg.MetadataValue.json(dict(sorted(out.group_by("rubric").len().iter_rows()))),
                "preview": preview(out.select("task", "rubric", "parse_status", "value", "score", "raw")),
                **plot_metadata(context, "judge_parse_rate", lambda: plots.judge_parse_rate(
                    out.with_columns(length=pl.lit(dims[LENGTH_DIM]), model=pl.lit(slug)))),
            },
        )

    return [judge_scores]
