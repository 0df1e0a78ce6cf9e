"""Small helpers shared by the asset modules (sources as inputs, metadata, fingerprints, plots, check results)."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.instance_checks import CheckResult
from lc_pipeline.plots import markdown_image

FINGERPRINT_KEY = "lcp/fingerprint"
# Every partition of source_items / source_documents as one input (the config picks its sources).
ALL_SOURCES = dg.AssetIn(partition_mapping=dg.AllPartitionMapping(), metadata={"allow_missing_partitions": True})


def configured_sources(df: pl.DataFrame, config: BenchmarkConfig, table: str) -> pl.DataFrame:
    """Rows of the config's sources only; a configured source with no rows is an error, not a gap — except
    documents of a source whose items bring their own contexts (sources.loader.own_context_kinds(): ALCE's passages
    and ICL's labelled texts live in the items; such a source may have no document at all)."""
    from lc_pipeline.sources.loader import own_context_kinds

    wanted = [s.name for s in config.sources]
    present = set(df.get_column("source").unique().to_list())
    may_lack = {s.name for s in config.sources if s.kind in own_context_kinds()} if table == "source_documents" else set()
    missing = [s for s in wanted if s not in present and s not in may_lack]
    if missing:
        raise dg.Failure(f"{table}: sources {missing} of config {config.name!r} have no rows: not materialized yet, "
                         "the source read none (its step's metadata notes say what it read, e.g. a folder without its "
                         "documents), or every record was rejected (the rejected_records table says why; `lcp sources "
                         "validate` checks the files)", allow_retries=False)
    return df.filter(pl.col("source").is_in(wanted))


def source_frames(config: BenchmarkConfig, source_items: pl.DataFrame, source_documents: pl.DataFrame
                  ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(items, documents) of the config's sources, with their schemas' columns."""
    items = configured_sources(source_items, config, "source_items").select(schemas.SOURCE_ITEMS.names())
    documents = configured_sources(source_documents, config, "source_documents").select(
        schemas.SOURCE_DOCUMENTS.names()
    )
    return items, documents


def preview(df: pl.DataFrame, n: int = 5, width: int = 80) -> dg.MetadataValue:
    """A markdown preview with long strings cut, so the UI stays readable."""
    shown = df.head(n).with_columns(
        [pl.col(c).cast(pl.String).str.slice(0, width) for c, t in df.schema.items() if t in (pl.String, pl.Categorical)]
    )
    header = "| " + " | ".join(shown.columns) + " |"
    sep = "| " + " | ".join("---" for _ in shown.columns) + " |"
    rows = ["| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in r) + " |" for r in shown.iter_rows()]
    return dg.MetadataValue.md("\n".join([header, sep, *rows]))


def json_metadata(meta: dict) -> dict:
    """Metadata of plain values as Dagster's: lists and dicts shown as JSON."""
    return {k: dg.MetadataValue.json(v) if isinstance(v, (list, dict)) else v for k, v in meta.items()}


def plot_metadata(context: dg.AssetExecutionContext, name: str, make: Callable[[], bytes]) -> dict:
    """``{name: markdown with the PNG inline}``: the UI shows it on the materialization.

    A plot that fails is logged and shown as text instead: a figure never costs the data.
    """
    try:
        return {name: dg.MetadataValue.md(markdown_image(make(), name))}
    except Exception as exc:  # noqa: BLE001  (any plotting bug; the error is logged and shown)
        context.log.warning(f"plot {name} failed: {type(exc).__name__}: {exc}")
        return {name: dg.MetadataValue.text(f"plot failed: {type(exc).__name__}: {exc}")}


def check_result(result: CheckResult) -> dg.AssetCheckResult:
    """A pure check's verdict as Dagster's: passed, the number of violations, its extra metadata and
    the first five problems."""
    return dg.AssetCheckResult(check_name=result.name, passed=result.passed, metadata={
        "violations": len(result.problems), **result.extra, "examples": dg.MetadataValue.json(result.problems[:5])})


def _long_score_number(v: float | None) -> dg.MetadataValue:
    # An undefined LongScore (zero Base Ability) is shown as such, not as 0.
    return dg.MetadataValue.text("undefined (Base Ability is 0)") if v is None else dg.MetadataValue.float(float(v))


def long_scores_metadata(context, out: pl.DataFrame, kept: pl.DataFrame, dropped: int, headline_note: str,
                         fingerprint: str, slug: str) -> dict:
    """long_scores' metadata: LongScore and the old metric per metric, what prior knowledge left out, the
    headline's task -> score source (or why there are no headline rows), a preview and two plots."""
    from lc_pipeline import plots
    from lc_pipeline.score.longscore import HEADLINE
    from lc_pipeline.score.per_model import overall_scores

    overall = overall_scores(out)
    return {
        FINGERPRINT_KEY: fingerprint,
        **{f"long_score_{m}": _long_score_number(v) for m, v in overall.select("metric", "long_score").iter_rows()},
        **{f"old_metric_{m}": _long_score_number(v) for m, v in overall.select("metric", "score").iter_rows()},
        "undefined_long_scores": int(out["long_score"].null_count()),
        "items_left_out_by_prior_knowledge": dropped,
        ("headline_sources" if (out["metric"] == HEADLINE).any() else "headline_unavailable"): headline_note,
        "preview": preview(out.filter(pl.col("task") == "overall"), n=20),
        **plot_metadata(context, "score_vs_length", lambda: plots.score_vs_length(
            plots.mean_scores(kept), overall.with_columns(model=pl.lit(slug)), title=slug)),
        **plot_metadata(context, "depth_x_length", lambda: plots.depth_length_heatmap(kept)),
    }
