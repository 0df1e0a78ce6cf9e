"""A model's published tables from what the lake holds, and the leaderboard's pairing of them (the lake's
partitions read through a lake_files.SideInputReader, which holds an asset to the side inputs it declares: no
Dagster).

:func:`model_table` is the ``benchmark_scores`` asset's computation (score/benchmark_scores.benchmark_table over the
model's metric_scores with its judge verdicts, citation rows and generations read from the lake);
:func:`paired_tables` recomputes every model's tables on the instances all of them were run on, as the
leaderboard ranks them (issue 31); :func:`current_instances` is the config's instances in the lake.
"""

from __future__ import annotations

import polars as pl

from lc_pipeline.lake_files import LENGTH_DIM, SideInputReader
from lc_pipeline.score.benchmark_scores import (
    benchmark_table,
    judged_tasks,
    nli_tasks,
    selected_tasks,
    with_citation_scores,
)
from lc_pipeline.tasks.catalog import catalog_for


def model_table(reads: SideInputReader, config, slug: str, metric_scores: pl.DataFrame, instances: pl.DataFrame,
                only: set[str] | None = None, log=lambda message: None):
    """``slug``'s published tables (score/benchmark_scores.benchmark_table) from its metric_scores and the instances,
    with its judge verdicts, citation rows and generations read from the lake; ``only``: those instance ids alone
    (every frame restricted to them: the leaderboard's common instances). Returns (the BenchmarkTable, what was
    read: judged, cited, judgments, citations, generations)."""
    catalog = catalog_for(config)
    if only is not None:
        ids = sorted(only)
        instances = instances.filter(pl.col("instance_id").is_in(ids))
        metric_scores = metric_scores.filter(pl.col("instance_id").is_in(ids))
    lengths = instances["length"].unique().to_list()
    judgments = citations = None
    judged = judged_tasks(instances, catalog)
    if judged:
        judgments = reads.judge_scores(slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
        if only is not None:
            judgments = judgments.filter(pl.col("instance_id").is_in(ids))
        log(f"judge-scored tasks {judged}: {judgments.height} verdicts of {slug} in the lake")
    cited = nli_tasks(instances, catalog)
    if cited:  # ALCE's citation metrics: NLI-judged rows of citation_scores
        citations = reads.model_partitions("citation_scores", slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
        if only is not None:
            citations = citations.filter(pl.col("instance_id").is_in(ids))
        log(f"tasks with NLI metrics {cited}: {citations.height} citation_scores rows of {slug}")
        metric_scores = with_citation_scores(metric_scores, citations)
    # The model's generations (status, truncated) for the shares and status_counts of every row.
    generations = reads.model_partitions("generations", slug).filter(pl.col(LENGTH_DIM).is_in(lengths))
    if only is not None:
        generations = generations.filter(pl.col("instance_id").is_in(ids))
    result = benchmark_table(metric_scores, instances, catalog, slug, judgments, generations,
                             selected=selected_tasks(config, catalog))
    return result, {"judged": judged, "cited": cited, "judgments": judgments, "citations": citations,
                    "generations": generations}


def current_instances(reads: SideInputReader, config) -> pl.DataFrame | None:
    """The config's instances in the lake (every length partition there, with ``length``), None when none is."""
    return reads.length_partitions("instances", config.lengths)


def paired_tables(reads: SideInputReader, config, tables: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every model's benchmark_scores (``tables``, with ``model``) on the instances every one of them was run on
    (issue 31; the README's "rows on the common instances"): the config's current instances that each model has a
    generation of. When every model covers exactly those, the stored tables are used; otherwise each model's
    tables are computed again on the common instances (:func:`model_table` with ``only``). Returns (tables,
    {model: n_unpaired}): the instances of the model left out, those some other model lacks and those no longer
    among the current instances (records removed from the data since it ran)."""
    instances = current_instances(reads, config)
    models = sorted(tables["model"].unique().to_list())
    if instances is None or not models:
        return tables, dict.fromkeys(models, 0)
    current = set(instances["instance_id"].to_list())
    covered = {m: set(reads.model_partitions("generations", m).filter(
        pl.col(LENGTH_DIM).is_in(list(config.lengths)))["instance_id"].to_list()) for m in models}
    common = set.intersection(current, *covered.values())
    unpaired = {m: len(covered[m] - common) for m in models}
    if all(covered[m] == common for m in models):
        return tables, unpaired
    frames = []
    for m in models:
        scores = reads.model_partitions("metric_scores", m).filter(
            pl.col(LENGTH_DIM).is_in(list(config.lengths)))
        result, _ = model_table(reads, config, m, scores, instances, only=common)
        frames.append(result.table.with_columns(model=pl.lit(m)))
    return pl.concat(frames, how="diagonal_relaxed"), unpaired
