"""judge_scores: LLM-judge verdicts per (length, model) partition (rubrics in score/judge.py)."""


import dagster as dg
import polars as pl

from lc_pipeline import plots, schemas
from lc_pipeline.assets.common import plot_metadata, preview
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import INSTANCE_FIELDS
from lc_pipeline.partitions import LENGTH_DIM, MODEL_DIM, Partitions
from lc_pipeline.progress import Progress
from lc_pipeline.resources import BenchmarkResource, ModelsResource
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score.judge import (
    OURS,
    ask_judgments,
    judge_frame,
    judge_summary,
    plan_judgments,
    rubric_fingerprint,
)
from lc_pipeline.tasks.catalog import catalog_for

TABLE = "judge_scores"


def judge_fingerprint(model: str, decoding: dict, overrides: dict, *extra: str) -> str:
    from lc_pipeline.fingerprints import short_id

    # The rubric texts, and which task gets which rubric (task files): a change there re-judges.
    return short_id(model, sorted(decoding.items()), sorted(overrides.items()), rubric_fingerprint(), *extra)


def build(parts: Partitions) -> list:
    @dg.asset(
        partitions_def=parts.length_x_model,
        group_name="judge", **declared("2", INSTANCE_FIELDS, adds=("model",), runs="judged"),
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
            protocol = judge.resolved_protocol(config)
            judgments = plan_judgments(
                generations.select(schemas.GENERATIONS.names()), instances.select(schemas.INSTANCES.names()),
                client.model, client.decoding, judge.rubric_overrides, catalog_for(config), protocol=protocol,
            )
        except (ValueError, RuntimeError) as exc:  # RuntimeError: the authors' files (OfficialFileError)
            raise dg.Failure(f"judge_scores {dims[LENGTH_DIM]}|{slug}: {exc}", allow_retries=False) from exc
        calls = [c for j in judgments for c in j.calls.values()]
        context.log.info(f"judge {client.model!r} at {client.server()} (protocol {protocol}): {len(judgments)} "
                         f"judgments, {len(calls)} questions")
        with Progress(context.log, len({c.key for c in calls}), f"judge {dims[LENGTH_DIM]} {slug}", unit="call") as bar:
            first = [True]

            def ask(batch):  # the first round shows progress; tries after it (official rubrics) only count
                shown, first[0] = first[0], False
                return client.ask(batch, progress=bar.update if shown else None)

            replies = ask_judgments(judgments, ask)
        out = judge_frame(judgments, replies, client.model)
        summary = judge_summary(out)
        if summary["parse_failures"]:
            context.log.warning(f"{summary['parse_failures']} of {out.height} judge replies could not be parsed")
        # Official rubrics: their versions name the authors' commit, their settings are their own (ours: unchanged).
        official = sorted({f"{j.rubric.name}:{j.rubric.version}:{sorted(j.rubric.settings.key().items())}"
                           for j in judgments if j.rubric.settings is not None})
        fp = judge_fingerprint(client.model, client.decoding, dict(judge.rubric_overrides),
                               *sorted(f"{t.qualified_name}:{t.rubric}" for t in catalog_for(config)),
                               *([f"protocol:{protocol}", *official] if protocol != OURS else []))
        return versioned(
            out, own_fingerprint(context, config, models.spec(slug).fingerprint() + fp),
            metadata={
                "judge_model": client.model,
                "judge_protocol": protocol,
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
