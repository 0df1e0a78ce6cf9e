"""The ``benchmark_scores`` table: each benchmark's published table for one model, from its task files.

Per (benchmark, length level): one row per task, one row per group (``aggregation.group``) of each table
(``aggregation.table``), and one overall row per table, aggregated as the benchmark's ``headline.overall``
says (tasks/spec.py ``Headline``):

- ``mean_of_groups``: a group's score is the mean of its task scores weighted by ``aggregation.weight``;
  the overall is the unweighted mean of the group scores. HELMET (spec helmet.md §6: category = mean of
  its datasets, HELMET average = mean of the categories) and LongBench (spec released_benchmarks.md
  "LongBench v1": category = mean of its tasks, "Avg" = mean of the six categories, English and Chinese
  tables apart, code completion (table ``all``) in both).
- ``mean_of_tasks``: groups as above; the overall is the unweighted mean of the task scores (LV-Eval's
  level score, spec lveval.md §9: "the unweighted arithmetic mean of the 11 dataset scores").
- ``mean_of_instances``: every cell (task, group, overall) is the mean over its scored instances, a
  micro-average (Loong, spec loong.md §7.6: "never average task means").

Where a task's scores come from (:func:`score_source`): its headline metric (the FIRST metric it declares,
from ``metric_scores``), or its judge rubric (from ``judge_scores``) when the task declares a rubric and
either no metric or a headline ``source: judge`` (Loong's 1-100 score, loong.md §7; HELMET's NarrativeQA
and summarization judges, helmet.md §6). A judge-scored cell is the mean of the verdicts parsed ok (a
reply the judge could not score is left out of the score, loong.md §7.4) and has two more rows: the
``scoring_success`` (share of the cell's verdicts parsed ok; Loong's repo reports it) and, for a rubric
that marks a top score (Loong's 100), the ``perfect_rate`` (share of the ok verdicts at the top, loong.md
§7.5: "num(score == 100) / num(effective)"); both are shares in [0, 1] over the cell's judged instances,
whatever the headline's aggregation. Group and overall rows have them too when they hold judged tasks.

A headline ``breakdown: [field, ...]`` adds, per table and length, the overall computed again on the
instances whose released record has each value of each field (``instances.record_fields``; LongBench
v2's easy / hard / short / medium / long, released_benchmarks.md), as rows of level ``breakdown`` with
``category`` = ``"<field>=<value>"``.

A task score is ``scale`` (100) x the mean of its instances' scores, rounded to ``headline.round`` decimals
where the authors' scorers round before averaging (LongBench's and LV-Eval's ``round(100 * mean, 2)``), else
not rounded. A table is one of the ``table`` values of the tasks the run has or expects; a task of table
``all`` counts in every table of its benchmark (alone, its table is ``all``). A group or overall row that
lacks one of its parts is null and names them (``missing_groups``; :func:`benchmark_table`). Loong's headline
(``across_lengths: micro_over_items``) adds rows of length :data:`ALL_LENGTHS` over every set: its Table 3
and overall over all items. Rows are computed per instance ``protocol``.
Only ``plain`` instances count: LV-Eval's CFI / KPR variants are an ablation (benchmarks/lveval/ablation.py).
Nothing is dropped silently: instances of a judge-scored task with no verdict (the judge has not run)
are counted in :attr:`BenchmarkTable.unjudged`, those of a metric-scored task with no score (or of a task
with neither metric nor rubric) in :attr:`BenchmarkTable.unscored`.

Every score row carries a seeded 95% bootstrap interval (``ci_low``, ``ci_high``: instances resampled within each
task cell, the row recomputed with its aggregation's weights, :func:`cell_weights`; issue 21, score/confidence.py)
and, given the model's generations, the shares of its instances skipped and truncated and their ``status_counts``;
skipped and invalid instances (schemas.NOT_SCORED) count there, not in the score. Pure: no Dagster.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import length_order
from lc_pipeline.score import confidence
from lc_pipeline.tasks.catalog import ANY_TASK, TaskCatalog
from lc_pipeline.tasks.registry import METRICS
from lc_pipeline.tasks.spec import Aggregation, Headline, TaskSpec

ALL_TABLES = "all"  # aggregation.table of a task counted in every table of its benchmark
# The length of the rows over every length (headline across_lengths: micro_over_items): brackets are refused in a
# Dagster partition key, so no config's length can be named so.
ALL_LENGTHS = "[all]"
OURS = "ours"  # the protocol of instances that do not say theirs (instances without a protocol column)
PLAIN = "plain"
LEVELS = ("task", "group", "overall", "breakdown", "component")
SCORING_SUCCESS = "scoring_success"  # metric label of a cell's share of judge verdicts parsed ok
PERFECT_RATE = "perfect_rate"  # metric label of a cell's share of ok verdicts at the rubric's top score
JUDGE_OK = "ok"  # score/judge.py's parse_status of a verdict that was read
COLUMNS = ("model", *schemas.BENCHMARK_SCORES.names())  # `model` is the partition column of the stored table
_UNSET = "__unset__"  # an instance's record has no value for a breakdown field


class BenchmarkTable(NamedTuple):
    """A model's benchmark tables and what was left out of them, and why."""

    table: pl.DataFrame  # ``model`` + BENCHMARK_SCORES columns
    unjudged: dict[str, int]  # "benchmark/task" -> plain instances of a judge-scored task with no verdict
    variant_rows: int  # metric_scores rows of LV-Eval variant instances (cfi, kpr, ...), not counted
    unscored: dict[str, int]  # "benchmark/task" -> plain instances of a metric-scored task with no headline score
    breakdown_missing: dict[str, int]  # "benchmark/field" -> plain scored instances whose record lacks the field
    # "benchmark/task" -> plain instances whose reply the official protocol leaves out of results and denominator
    # (metric_scores.left_out_by_protocol: LongBench v2's empty reply); their rows count them in status_counts.
    left_out: Mapping[str, int] = MappingProxyType({})


def headline_metric(spec: TaskSpec) -> str | None:
    """The metric_scores label of the task's headline metric (its first declared), or None when it has none;
    ``"a+b+c"`` for a task scored as the mean of its metrics (``aggregation.score: mean_of_metrics``)."""
    labels = metric_labels(spec)
    if not labels:
        return None
    return "+".join(labels) if spec.aggregation.score == "mean_of_metrics" else labels[0]


def metric_labels(spec: TaskSpec) -> list[str]:
    """The labels (metric_scores / citation_scores ``metric``) of the task's metrics, in declared order, once each."""
    labels: list[str] = []
    for ref in spec.metrics:
        label = METRICS.get(ref.name, where=f"task {spec.qualified_name}, field metrics").label
        if label not in labels:
            labels.append(label)
    return labels


def score_source(spec: TaskSpec, headline: Headline) -> str | None:
    """Where the task's cells come from: ``"judge"`` (judge_scores: a rubric, and no metric or a headline
    ``source: judge``), ``"metric"`` (its first declared metric) or None (neither: it cannot be scored)."""
    if spec.rubric and (not spec.metrics or headline.source == "judge"):
        return "judge"
    return "metric" if spec.metrics else None


def instance_specs(instances: pl.DataFrame, catalog: TaskCatalog) -> dict[tuple[str, str], TaskSpec]:
    """The TaskSpec of each (benchmark, task) in ``instances``, in sorted order; a task the catalog does not
    know is a ValueError naming it (the instances are stale, or the config lost a task file)."""
    specs: dict[tuple[str, str], TaskSpec] = {}
    for benchmark, task in instances.select("benchmark", "task").unique().sort("benchmark", "task").iter_rows():
        try:
            specs[(benchmark, task)] = catalog.resolve(benchmark, task)
        except ValueError as exc:
            raise ValueError(f"benchmark_scores: instances of {benchmark}/{task}: {exc}") from exc
    return specs


def judged_tasks(instances: pl.DataFrame, catalog: TaskCatalog) -> list[str]:
    """``benchmark/task`` of the tasks in ``instances`` whose cells come from judge_scores (sorted): the
    asset reads judge_scores only when there is one, so a benchmark without a judge needs no judge server."""
    return [f"{b}/{t}" for (b, t), spec in instance_specs(instances, catalog).items()
            if score_source(spec, catalog.headlines.get(b, Headline())) == "judge"]


def nli_tasks(instances: pl.DataFrame, catalog: TaskCatalog) -> list[str]:
    """``benchmark/task`` of the tasks in ``instances`` with a metric that an NLI judge computes (``Metric.needs
    == "nli"``: ALCE's citation recall and precision), sorted: their rows are in ``citation_scores``, not in
    ``metric_scores``, and the asset reads them only when there is such a task."""
    return [f"{b}/{t}" for (b, t), spec in instance_specs(instances, catalog).items()
            if any(getattr(METRICS.get(ref.name, where=f"task {spec.qualified_name}, field metrics"), "needs", "")
                   for ref in spec.metrics)]


def with_citation_scores(scores: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """metric_scores rows (``instance_id, metric, score`` and ``length`` when present) with the citation_scores
    rows appended as metric rows (``citation_rec``, ``citation_prec``). A null citation score (an ASQA output
    with no sentence: ALCE's scorer skips the example) stays null: the instance has the metric, scored by
    nothing, so it counts in its task's other metrics and not in that one's mean (:func:`scored_instances`,
    fidelity review HE6)."""
    keep = [c for c in ("instance_id", "metric", "score", "length") if c in scores.columns]
    extra = citations.select([c for c in keep if c in citations.columns])
    return pl.concat([scores.select(keep).with_columns(pl.col("score").cast(pl.Float64)),
                      extra.with_columns(pl.col("score").cast(pl.Float64))], how="diagonal_relaxed")


def _mean(values: list[float], weights: list[float] | None = None) -> float:
    weights = weights or [1.0] * len(values)
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


def _plain_instances(instances: pl.DataFrame, length_from: pl.DataFrame) -> pl.DataFrame:
    needed = ["instance_id", "benchmark", "task"]
    missing = [c for c in needed if c not in instances.columns]
    if missing:
        raise ValueError(f"benchmark_scores: instances frame lacks column(s) {missing}")
    extra = [c for c in ("variant", "record_fields", "protocol") if c in instances.columns]
    if "length" in instances.columns:
        out = instances.select(*needed, "length", *extra)
    elif "length" in length_from.columns:
        out = instances.select(*needed, *extra).join(
            length_from.select("instance_id", "length").unique(), on="instance_id", how="left")
    else:
        raise ValueError("benchmark_scores: neither instances nor metric_scores has a `length` column")
    if "variant" not in out.columns:
        out = out.with_columns(variant=pl.lit(PLAIN))
    if "record_fields" not in out.columns:
        out = out.with_columns(record_fields=pl.lit("{}"))
    if "protocol" not in out.columns:
        out = out.with_columns(protocol=pl.lit(OURS))
    return out.with_columns(pl.col("variant").fill_null(PLAIN), pl.col("record_fields").fill_null("{}"),
                            pl.col("protocol").fill_null(OURS))


_INSTANCE_ROWS = {"instance_id": pl.String, "metric": pl.String, "score": pl.Float64, "judged": pl.Boolean,
                  "perfect": pl.Boolean}


def _judge_rows(judgments: pl.DataFrame | None, inst: pl.DataFrame, judge_keys: pl.DataFrame) -> pl.DataFrame:
    """One row per verdict on a plain instance of a judge-scored task: metric ``judge:<rubric>``, score (null
    unless parsed ok), perfect. A verdict whose instance is missing is a ValueError (stale judge_scores)."""
    if judgments is None or judge_keys.is_empty():
        return pl.DataFrame(schema=_INSTANCE_ROWS)
    for col in ("instance_id", "rubric", "score", "parse_status"):
        if col not in judgments.columns:
            raise ValueError(f"benchmark_scores: judge_scores frame lacks column {col!r}")
    verdicts = judgments.select(
        "instance_id", "rubric", "score", "parse_status",
        (pl.col("perfect") if "perfect" in judgments.columns else pl.lit(None)).cast(pl.Boolean).alias("perfect"))
    known = verdicts.join(inst.select("instance_id", "benchmark", "task", "variant"), on="instance_id", how="left")
    lost = known.filter(pl.col("benchmark").is_null())
    if lost.height:
        raise ValueError(f"benchmark_scores: {lost.height} judge_scores rows have no instance (e.g. instance_id "
                         f"{lost['instance_id'][0]!r}); rebuild judge_scores")
    mine = known.filter(pl.col("variant") == PLAIN).join(judge_keys, on=["benchmark", "task"], how="inner")
    twice = mine.group_by("instance_id").len().filter(pl.col("len") > 1)
    if twice.height:
        raise ValueError(f"benchmark_scores: instance {twice['instance_id'][0]!r} has {twice['len'][0]} judge "
                         "verdicts in judge_scores (expected one per instance)")
    ok = pl.col("parse_status") == JUDGE_OK
    return mine.select(
        "instance_id", ("judge:" + pl.col("rubric")).alias("metric"),
        pl.when(ok).then(pl.col("score").cast(pl.Float64)).alias("score"),
        pl.lit(True).alias("judged"), pl.when(ok).then(pl.col("perfect")).alias("perfect"))

def _headline_rows(read: pl.DataFrame, n_parts: pl.DataFrame, plain: pl.DataFrame) -> pl.DataFrame:
    """One row per instance that has every part of its task's headline (``read``: instance_id, benchmark, task,
    headline, metric, score; a null score is a part scored by nothing), its ``score`` the instance's share of the
    task's score.

    A task scored by one metric: the instance's score (null when the metric scored nothing: the cell does not count
    the instance). A task scored by the mean of its metrics
    (``mean_of_metrics``): each metric is averaged over the instances it scores, then the metrics' means are averaged,
    as HELMET's Cite averages ASQA's STR-EM over every example and its citation recall / precision over the examples
    with a sentence (``eval_alce.py`` skips the others; fidelity review HE6); a metric no instance of the cell has a
    score for counts 0, as ``eval_alce.py`` reports it. Written per instance so that a cell's mean is that number:
    ``sum_k x_ik * N / n_k / K`` over the metrics k the instance has a score for (N the cell's instances, n_k those
    metric k scores; a cell is one task at one length and protocol). When every instance has every metric this is
    the mean of its metrics, as before."""
    rows = (read.group_by("instance_id", "benchmark", "task", "headline")
            .agg(n=pl.col("metric").n_unique())
            .join(n_parts, on=["benchmark", "task"], how="inner")
            .filter(pl.col("n") == pl.col("n_parts"))
            .join(plain.select("instance_id", "length", "protocol"), on="instance_id", how="inner"))
    cell = ["benchmark", "task", "length", "protocol"]
    parts = (read.join(rows.select("instance_id", *cell[2:], "n_parts", big_n=pl.len().over(cell)),
                       on="instance_id", how="inner")
             .with_columns(n_k=pl.col("score").count().over([*cell, "metric"])))
    shares = (parts.filter(pl.col("score").is_not_null())
              .group_by("instance_id")
              .agg(score=(pl.col("score") * pl.col("big_n") / pl.col("n_k") / pl.col("n_parts")).sum()))
    single = read.join(rows.filter(pl.col("n_parts") == 1).select("instance_id"), on="instance_id", how="semi")
    return (rows.join(shares, on="instance_id", how="left")
            .with_columns(pl.when(pl.col("n_parts") == 1)
                          .then(pl.col("instance_id").replace_strict(single["instance_id"], single["score"],
                                                                     default=None, return_dtype=pl.Float64))
                          .otherwise(pl.col("score").fill_null(0.0)).alias("score"))
            .select("instance_id", pl.col("headline").alias("metric"), "score",
                    judged=pl.lit(False), perfect=pl.lit(None, pl.Boolean)))


class Scored(NamedTuple):
    """A model's scored plain instances: what :func:`benchmark_table` aggregates and score/compare.py pairs."""

    plain: pl.DataFrame  # plain instances: instance_id, benchmark, task, length, variant, record_fields, protocol
    rows: pl.DataFrame  # one per scored (or judged) plain instance: instance_id, metric, score, judged, perfect + plain's
    components: pl.DataFrame  # the metric rows of tasks scored by the mean of their metrics (instance_id, metric, ...)
    specs: dict[tuple[str, str], TaskSpec]
    heads: dict[str, Headline]
    sources: dict[tuple[str, str], str | None]
    labels: dict[tuple[str, str], str]  # (benchmark, task) -> its cells' metric label (headline or judge:<rubric>)
    unparsable: pl.DataFrame  # instance_id of instances whose headline metric row says the output did not parse
    variant_rows: int


def scored_instances(scores: pl.DataFrame, instances: pl.DataFrame, catalog: TaskCatalog,
                     judgments: pl.DataFrame | None = None) -> Scored:
    """The scored plain instances of one model (see :func:`benchmark_table` for the frames); a score or verdict
    whose instance is missing is a ValueError naming it (the scores are stale)."""
    for col in ("instance_id", "metric", "score"):
        if col not in scores.columns:
            raise ValueError(f"benchmark_scores: metric_scores frame lacks column {col!r}")
    inst = _plain_instances(instances, scores)
    lost = scores.select("instance_id").join(inst.select("instance_id"), on="instance_id", how="anti")
    if lost.height:
        raise ValueError(f"benchmark_scores: {lost.height} metric_scores rows have no instance (e.g. instance_id "
                         f"{lost['instance_id'][0]!r}); rebuild metric_scores")
    variant_rows = scores.join(inst.filter(pl.col("variant") != PLAIN).select("instance_id"),
                               on="instance_id", how="semi").height

    specs = instance_specs(inst, catalog)
    heads = {b: catalog.headlines.get(b, Headline()) for b, _ in specs}
    sources = {key: score_source(spec, heads[key[0]]) for key, spec in specs.items()}
    labels = {key: headline_metric(spec) for key, spec in specs.items() if sources[key] == "metric"}

    plain = inst.filter(pl.col("variant") == PLAIN)
    keys_schema = {"benchmark": pl.String, "task": pl.String}
    # A task scored by the mean of its metrics reads every one of them (its components).
    parts = {key: (metric_labels(specs[key]) if specs[key].aggregation.score == "mean_of_metrics" else [lab])
             for key, lab in labels.items()}
    wanted = pl.DataFrame([(b, t, part, lab) for (b, t), lab in labels.items() for part in parts[(b, t)]],
                          schema={**keys_schema, "metric": pl.String, "headline": pl.String}, orient="row")
    status = pl.col("status") if "status" in scores.columns else pl.lit(None, pl.String)
    read = (scores.select("instance_id", "metric", pl.col("score").cast(pl.Float64), status.alias("status"))
            .join(plain.select("instance_id", "benchmark", "task"), on="instance_id", how="inner")
            .join(wanted, on=["benchmark", "task", "metric"], how="inner"))
    unparsable = read.filter(pl.col("status") == "unparsable").select("instance_id").unique()
    read = read.drop("status")
    n_parts = pl.DataFrame([(b, t, len(p)) for (b, t), p in parts.items()],
                           schema={**keys_schema, "n_parts": pl.Int64}, orient="row")
    metric_rows = _headline_rows(read, n_parts, plain)
    components = read.filter(pl.col("metric") != pl.col("headline")).join(
        plain.select("instance_id", "length", "protocol"), on="instance_id", how="inner")
    judge_keys = pl.DataFrame([k for k, s in sources.items() if s == "judge"], schema=keys_schema, orient="row")
    judge_rows = _judge_rows(judgments, inst, judge_keys)
    rows = pl.concat([metric_rows, judge_rows]).join(plain, on="instance_id", how="inner")
    cell_labels = {key: (labels[key] if source == "metric" else f"judge:{specs[key].rubric}")
                   for key, source in sources.items() if source is not None}
    return Scored(plain, rows, components, specs, heads, sources, cell_labels, unparsable, variant_rows)


STATUS_KEYS = ("answered", "empty", "cut", "unparsable", "skipped", "invalid")  # status_counts' keys, in this order


def instance_statuses(scored: Scored, generations: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per plain instance with a generation row: ``status`` (GENERATIONS.status, or ``unparsable`` when its headline
    metric row says so) and ``truncated``, beside the plain instance columns; None without generations. A
    generation row without ``status`` (a store older than the column) gets the status partition.py derives."""
    if generations is None:
        return None
    for col in ("instance_id", "output", "finish_reason", "truncated"):
        if col not in generations.columns and not (col in ("output", "finish_reason") and "status" in generations.columns):
            raise ValueError(f"benchmark_scores: generations frame lacks column {col!r}")
    derived = (pl.when(pl.col("output").str.strip_chars() == "").then(pl.lit("empty"))
               .when(pl.col("finish_reason") == "length").then(pl.lit("cut")).otherwise(pl.lit("answered")))
    if "status" not in generations.columns:
        status = derived
    elif {"output", "finish_reason"} <= set(generations.columns):
        status = pl.col("status").fill_null(derived)
    else:
        status = pl.col("status")
    gens = (generations.select("instance_id", status.alias("status"), pl.col("truncated").fill_null(False))
            .unique("instance_id", keep="first", maintain_order=True))
    unknown = gens.filter(~pl.col("status").is_in(STATUS_KEYS))
    if unknown.height:
        raise ValueError(f"benchmark_scores: generation of instance {unknown['instance_id'][0]!r} has status "
                         f"{unknown['status'][0]!r}; expected one of {list(schemas.GENERATION_STATUSES)}")
    return (scored.plain.join(gens, on="instance_id", how="inner")
            .with_columns(status=pl.when(pl.col("instance_id").is_in(scored.unparsable["instance_id"].implode()))
                          .then(pl.lit("unparsable")).otherwise(pl.col("status"))))


def selected_tasks(config: Any, catalog: TaskCatalog) -> dict[str, tuple[str, ...]]:
    """{benchmark: the tasks its headline expects} for a config run as released: ``released.tasks`` when the
    config selects some (LongBench-E's 13), else every task the benchmark's task files declare (the catch-all
    ``*`` aside). {} for a config not run as released: :func:`benchmark_table` then expects the tasks its
    instances hold."""
    released = getattr(config, "released", None)
    if released is None:
        return {}
    tasks = tuple(released.tasks) or tuple(t.name for t in catalog.tasks(released.benchmark) if t.name != ANY_TASK)
    return {released.benchmark: tasks}


def benchmark_table(scores: pl.DataFrame, instances: pl.DataFrame, catalog: TaskCatalog, model: str,
                    judgments: pl.DataFrame | None = None, generations: pl.DataFrame | None = None, *,
                    draws: int = confidence.DRAWS,
                    selected: Mapping[str, Sequence[str]] | None = None) -> BenchmarkTable:
    """One model's BENCHMARK_SCORES rows (plus ``model``) from its ``metric_scores``, ``judge_scores``,
    ``generations`` and the ``instances``.

    ``scores``: METRIC_SCORES rows of one model (``instance_id, metric, score``, ``status`` when known;
    ``length`` when ``instances`` lacks it). ``judgments``: JUDGE_SCORES rows of the model (``instance_id,
    rubric, score, parse_status``, ``perfect``), or None when the judge has not run; only verdicts on
    judge-scored tasks count. ``instances``: ``instance_id, benchmark, task, length``, ``variant`` and
    ``record_fields`` (every length may be there; only those scored count). ``generations``: GENERATIONS rows of
    the model (``instance_id, status, truncated``) for the shares and ``status_counts``, or None (then they are
    null). A score or verdict whose instance is missing is a ValueError naming it (the scores are stale).

    Intervals (``ci_low``, ``ci_high``; score/confidence.py): a stratified percentile bootstrap, ``draws``
    resamples of the instances within each task cell (a cell's instances in instance_id order, its draws seeded
    from the cell: benchmark, length, task, metric and, for a breakdown row, the field value, never the model:
    two models scored on the same instances get the same resamples), each row recomputed from its cells' resampled
    means exactly as the row is computed (:func:`cell_weights`); judge cells resample their parsed verdicts. A row
    whose every cell has one instance has no interval (null: one instance says nothing about its spread; the
    bootstrap would claim the zero-width [x, x]); a row with some larger cells gets one, the single-instance
    cells held fixed. Rate rows (scoring_success, perfect_rate) have none.

    Shares: over the row's plain instances that have a generation row (a task row: its task's; group, overall:
    the tasks of the group / table; breakdown: those of the field value; rate rows: their cell's), the shares
    skipped and truncated and ``status_counts`` (JSON, every key of :data:`STATUS_KEYS`). Instances not sent or
    invalid (schemas.NOT_SCORED) have no metric row: they count there, not in the score; a task whose every
    instance at a length is such still gets its rows (score null, n 0), so the shares show.

    Missing groups (fidelity audit LB4, HE7, X3): the headline expects, per benchmark, the tasks of ``selected``
    (:func:`selected_tasks`: the run's selection) or, for a benchmark not in it, every task its plain instances
    hold (at any length), at every length its plain instances have; and per table every group its task files
    declare for that table. A task it expects without a score at a length gets a null task row (n 0); a group
    row with such a task, and an overall row with such a group (mean_of_groups: a declared group absent or null;
    otherwise: such a task), is null and names them in ``missing_groups`` (never the mean of what is there). A
    run that selects only some tasks of a group has the group over those (LongBench-E's table is over its 13);
    one that leaves a whole declared group out has a null overall naming it. Breakdown rows are the overall of
    the instances of their value, without this rule.

    Protocol: rows are computed per instance ``protocol`` (instances.protocol; "ours" when absent) and say it:
    instances of two protocols are never averaged together. An official instance whose reply its protocol leaves out
    (metric_scores.left_out_by_protocol: LongBench v2's empty reply, V2-4) has no metric row and counts as not sent:
    out of the score and of ``n``, in the rows' ``status_counts`` (``empty``), in :attr:`BenchmarkTable.left_out`.

    ``headline.round`` rounds task scores before their groups and the overall average them;
    ``headline.across_lengths: micro_over_items`` adds the rows of length :data:`ALL_LENGTHS` (each task, group
    and the overall over every item of every length; a task row there is null naming ``length=<level>`` for a
    length at which the task has instances but no score).
    """
    s = scored_instances(scores, instances, catalog, judgments)
    statuses = instance_statuses(s, generations)
    rows, plain, sources = s.rows, s.plain, s.sources
    dropped = _left_out(plain, generations)
    unsent = (statuses.filter(pl.col("status").is_in(schemas.NOT_SCORED)
                              | pl.col("instance_id").is_in(dropped["instance_id"].implode()))
              if statuses is not None else plain.clear())

    def left_out(source: str | None) -> dict[str, int]:
        missing = (plain.join(rows.select("instance_id"), on="instance_id", how="anti")
                   .join(unsent.select("instance_id"), on="instance_id", how="anti"))
        counts = missing.group_by("benchmark", "task").len().sort("benchmark", "task")
        return {f"{b}/{t}": n for b, t, n in counts.iter_rows() if sources[(b, t)] == source}

    unjudged = left_out("judge")
    unscored = {**left_out("metric"), **left_out(None)}

    out: list[dict] = []
    breakdown_missing: dict[str, int] = {}
    for benchmark in sorted(set(rows["benchmark"].unique().to_list()) | set(unsent["benchmark"].unique().to_list())):
        head = s.heads[benchmark]
        of_bench = rows.filter(pl.col("benchmark") == benchmark)
        population = None if statuses is None else statuses.filter(pl.col("benchmark") == benchmark)
        built = plain.filter(pl.col("benchmark") == benchmark)
        chosen = tuple((selected or {}).get(benchmark, ()))
        specs = dict(s.specs)
        labels = dict(s.labels)
        for task in chosen:
            if (benchmark, task) not in specs:  # selected, but no instance of it was built
                spec = catalog.resolve(benchmark, task)
                specs[(benchmark, task)] = spec
                source = score_source(spec, head)
                if source is not None:
                    labels[(benchmark, task)] = (headline_metric(spec) if source == "metric"
                                                 else f"judge:{spec.rubric}")
        declared: dict[str, set[str]] = {}
        for spec in catalog.tasks(benchmark):
            if spec.name != ANY_TASK:
                declared.setdefault(spec.aggregation.table, set()).add(spec.aggregation.group)
        for field in head.breakdown:
            def value_of(frame: pl.DataFrame, field: str = field) -> pl.DataFrame:
                return frame.with_columns(pl.col("record_fields").map_elements(
                    lambda text: _field_value(text, field), return_dtype=pl.String).alias(f"field:{field}"))
            of_bench = value_of(of_bench)
            population = None if population is None else value_of(population)
            unset = of_bench.filter(pl.col(f"field:{field}") == _UNSET).select("instance_id").n_unique()
            if unset:
                breakdown_missing[f"{benchmark}/{field}"] = unset
        of_unsent = unsent.filter(pl.col("benchmark") == benchmark)
        for protocol in sorted(set(built["protocol"].to_list()) | set(of_unsent["protocol"].to_list())):
            mine = of_bench.filter(pl.col("protocol") == protocol)
            people = None if population is None else population.filter(pl.col("protocol") == protocol)
            parts = s.components.filter((pl.col("benchmark") == benchmark) & (pl.col("protocol") == protocol))
            built_p = built.filter(pl.col("protocol") == protocol)
            expected = chosen or tuple(sorted(set(built_p["task"].to_list())))
            lengths = length_order(sorted(set(built_p["length"].to_list())
                                          | set(of_unsent.filter(pl.col("protocol") == protocol)["length"].to_list())))
            common = {"specs": specs, "head": head, "labels": labels, "draws": draws, "expected": expected,
                      "declared": declared, "protocol": protocol}
            for length in lengths:
                at = None if people is None else people.filter(pl.col("length") == length)
                out += _benchmark_rows(benchmark, length, mine.filter(pl.col("length") == length), population=at,
                                       **common)
                out += _component_rows(benchmark, length, parts.filter(pl.col("length") == length), specs, head, at,
                                       draws, protocol)
            if head.across_lengths == "micro_over_items" and lengths:
                # Every task at every length it has instances at: a length where it has none scored is a gap.
                have = set(mine.filter(pl.col("score").is_not_null()).select("task", "length").unique().iter_rows())
                gaps: dict[str, list[str]] = {}
                for length in lengths:
                    for task in sorted(set(built_p.filter(pl.col("length") == length)["task"].to_list())):
                        if (task, length) not in have:
                            gaps.setdefault(task, []).append(f"length={length}")
                out += _benchmark_rows(benchmark, ALL_LENGTHS, mine, population=people, gaps=gaps, **common)
                out += _component_rows(benchmark, ALL_LENGTHS, parts, specs, head, people, draws, protocol)
    frame = schemas.conform(pl.DataFrame(out, schema=schemas.BENCHMARK_SCORES), "benchmark_scores")
    table = frame.select(pl.lit(model, dtype=pl.String).alias("model"), pl.all())
    left = {f"{b}/{t}": n for b, t, n in dropped.group_by("benchmark", "task").len().sort("benchmark", "task").iter_rows()}
    return BenchmarkTable(table, unjudged, s.variant_rows, unscored, breakdown_missing, left)


def _left_out(plain: pl.DataFrame, generations: pl.DataFrame | None) -> pl.DataFrame:
    """The plain instances (instance_id, benchmark, task) whose reply their official protocol leaves out of the
    authors' results (metric_scores.left_out_by_protocol; fidelity review V2-4)."""
    empty = pl.DataFrame(schema={"instance_id": pl.String, "benchmark": pl.String, "task": pl.String})
    if generations is None or "output" not in generations.columns or plain.is_empty():
        return empty
    from lc_pipeline.score.metric_scores import left_out_by_protocol

    official = plain.filter(pl.col("protocol").str.starts_with("official"))
    if official.is_empty():
        return empty
    joined = official.select("instance_id", "benchmark", "task", "protocol").join(
        generations.select("instance_id", "output").unique("instance_id", keep="first"), on="instance_id", how="inner")
    keep = [left_out_by_protocol(b, t, p, o) for b, t, p, o in joined.select("benchmark", "task", "protocol",
                                                                              "output").iter_rows()]
    return joined.filter(pl.Series(keep, dtype=pl.Boolean)).select("instance_id", "benchmark", "task")


def _shares(population: pl.DataFrame | None) -> dict:
    """skipped_share, truncated_share and status_counts of the instances in ``population`` (null when unknown)."""
    if population is None or population.is_empty():
        return {}
    counts = dict.fromkeys(STATUS_KEYS, 0)
    for status, k in population.group_by("status").len().iter_rows():
        counts[status] = int(k)
    total = population.height
    return {"skipped_share": counts["skipped"] / total, "truncated_share": int(population["truncated"].sum()) / total,
            "status_counts": json.dumps(counts)}


def _component_rows(benchmark: str, length: str, components: pl.DataFrame,
                    specs: Mapping[tuple[str, str], TaskSpec], head: Headline,
                    population: pl.DataFrame | None = None, draws: int = confidence.DRAWS,
                    protocol: str = OURS) -> list[dict]:
    """Rows of level ``component``: each metric of a task scored by the mean of its metrics, on its own (HELMET's
    six Cite numbers: ASQA STR-EM, citation recall, citation precision, QAMPARI rec-5, ...), x the scale, over the
    instances it scores (``n``; an ASQA output without a sentence has no citation scores: HE6), 0 when it scores none
    (as ``eval_alce.py``), with its bootstrap interval (the component's instances resampled) and the task's shares."""
    out = []
    stats = (components.group_by("task", "metric")
             .agg(pl.col("score").mean().fill_null(0.0), n=pl.col("score").count(),
                  values=pl.col("score").sort_by("instance_id").drop_nulls())
             .sort("task", "metric"))
    for task, metric, score, n, values in stats.iter_rows():
        agg = specs[(benchmark, task)].aggregation
        low = high = None
        if n >= 2:
            rng = confidence.rng_for("benchmark_scores", benchmark, length, task, metric, "component")
            low, high = confidence.percentile_interval(
                head.scale * confidence.bootstrap_mean_draws(values, draws, rng))
        shares = _shares(None if population is None else population.filter(pl.col("task") == task))
        out.append({"benchmark": benchmark, "table": agg.table, "level": "component", "task": task,
                    "category": agg.group, "length": length, "metric": metric, "score": head.scale * score,
                    "n": int(n), "aggregation": head.overall, "ci_low": low, "ci_high": high, **shares,
                    "protocol": protocol, "missing_groups": []})
    return out


def _field_value(text: str, field: str) -> str:
    try:
        fields = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"benchmark_scores: instances.record_fields is not JSON ({exc}): {text[:80]!r}") from None
    value = fields.get(field) if isinstance(fields, dict) else None
    return _UNSET if value is None or value == "" else str(value)


class Cell(NamedTuple):
    """One task's instances at one length: sum and count of the scores read, verdicts, perfect verdicts, and the
    scores themselves in instance_id order (what the bootstrap resamples)."""

    task: str
    metric: str
    total: float
    n: int  # scores read (metric rows; judge verdicts parsed ok)
    verdicts: int  # judge verdicts, parsed or not (0 for a metric-scored task)
    perfect: int  # ok verdicts at the rubric's top
    marks_perfect: bool  # the rubric marks a top score (Loong)
    values: tuple[float, ...] = ()  # the n scores, in instance_id order

    @property
    def mean(self) -> float:
        return self.total / self.n


def cells_of(rows: pl.DataFrame) -> list[Cell]:
    """The cells of ``rows`` (one per scored or judged instance: task, metric, score, judged, perfect, instance_id)."""
    stats = (rows.group_by("task", "metric")
             .agg(total=pl.col("score").sum(), n=pl.col("score").count(), verdicts=pl.col("judged").sum(),
                  perfect=pl.col("perfect").fill_null(False).sum(), marks=pl.col("perfect").is_not_null().any(),
                  values=pl.col("score").sort_by("instance_id").drop_nulls())
             .sort("task", "metric"))
    return [Cell(t, m, float(total), int(n), int(v), int(p), bool(marks), tuple(values))
            for t, m, total, n, v, p, marks, values in stats.iter_rows()]


def cell_weights(cells: list[Cell], head: Headline, agg: Mapping[str, Aggregation],
                 level: str) -> list[tuple[Cell, float]]:
    """``(cell, weight)`` of the scored cells of a group (``level="group"``) or of an overall / breakdown row
    (``"overall"``), such that the row's score is ``head.scale * sum(weight * cell mean)``: the linear form of the
    headline's aggregation (mean_of_instances: n / total; a group otherwise: aggregation.weight normalized;
    mean_of_tasks: 1 / tasks; mean_of_groups: each group's weights / groups). The bootstrap and score/compare.py
    recompute rows with these weights."""
    scored = [c for c in cells if c.n]
    if not scored:
        return []
    if head.overall == "mean_of_instances":
        total = sum(c.n for c in scored)
        return [(c, c.n / total) for c in scored]
    if level == "group":
        total = sum(agg[c.task].weight for c in scored)
        return [(c, agg[c.task].weight / total) for c in scored]
    if head.overall == "mean_of_tasks":
        return [(c, 1.0 / len(scored)) for c in scored]
    groups: dict[str, list[Cell]] = {}
    for c in scored:
        groups.setdefault(agg[c.task].group, []).append(c)
    return [(c, w / len(groups)) for of_group in groups.values() for c, w in cell_weights(of_group, head, agg, "group")]


def _benchmark_rows(benchmark: str, length: str, rows: pl.DataFrame, specs: Mapping[tuple[str, str], TaskSpec],
                    head: Headline, population: pl.DataFrame | None = None,
                    labels: Mapping[tuple[str, str], str] | None = None, draws: int = confidence.DRAWS, *,
                    expected: Collection[str] = (), declared: Mapping[str, Collection[str]] | None = None,
                    gaps: Mapping[str, Sequence[str]] | None = None, protocol: str = OURS) -> list[dict]:
    """The task, group, overall and breakdown rows of one benchmark at one length (``rows``: one per scored
    instance: task, metric, score, judged, perfect, record_fields and a ``field:<name>`` per breakdown field;
    ``population``: the plain instances with a generation, their ``status`` and ``truncated``, for the shares).

    ``expected``: the tasks the headline expects (each gets a row, null without a score); ``declared``: per table,
    the groups its task files declare (a mean_of_groups overall expects each); ``gaps``: per task, the
    ``length=<level>`` it has no score at (rows of :data:`ALL_LENGTHS`: the task's row is null, naming them)."""
    gaps = gaps or {}
    unsent_tasks = set() if population is None else set(
        population.filter(pl.col("status").is_in(schemas.NOT_SCORED))["task"].unique().to_list())
    # A task with no scored instance whose instances were not sent (or were invalid), or one the headline
    # expects, still gets its rows.
    empty_tasks = (unsent_tasks | set(expected)) - set(rows["task"].unique().to_list())
    agg = {t: specs[(benchmark, t)].aggregation for t in set(rows["task"].unique().to_list()) | empty_tasks}
    named = sorted({a.table for a in agg.values()} - {ALL_TABLES}) or [ALL_TABLES]
    resampled: dict[tuple[str, str, str], np.ndarray] = {}

    def cell_draws(c: Cell, subset: str) -> np.ndarray:
        key = (c.task, c.metric, subset)  # a task in every table ("all") has the same draws in each
        if key not in resampled:
            rng = confidence.rng_for("benchmark_scores", benchmark, length, c.task, c.metric, subset)
            resampled[key] = confidence.bootstrap_mean_draws(c.values, draws, rng)
        return resampled[key]

    def interval(weighted: list[tuple[Cell, float]], subset: str = "") -> tuple[float | None, float | None]:
        if not weighted or all(c.n < 2 for c, _ in weighted):
            return None, None
        return confidence.percentile_interval(head.scale * sum(w * cell_draws(c, subset) for c, w in weighted))

    def shares(tasks: set[str], field: str | None = None, value: str | None = None) -> dict:
        if population is None:
            return {}
        mine = population.filter(pl.col("task").is_in(sorted(tasks)))
        return _shares(mine if field is None else mine.filter(pl.col(field) == value))

    def row(table: str, level: str, task: str | None, group: str | None, metric: str, score: float | None, n: int,
            ci: tuple[float | None, float | None] = (None, None), extra: dict | None = None,
            missing: Sequence[str] = ()) -> dict:
        return {"benchmark": benchmark, "table": table, "level": level, "task": task,
                "category": group, "length": length, "metric": metric, "score": score, "n": n,
                "aggregation": head.overall, "ci_low": ci[0], "ci_high": ci[1], **(extra or {}),
                "protocol": protocol, "missing_groups": list(missing)}

    def rates(table: str, level: str, task: str | None, group: str | None, cells: list[Cell], extra: dict) -> list[dict]:
        verdicts = sum(c.verdicts for c in cells)
        if not verdicts:
            return []
        ok = sum(c.n for c in cells if c.verdicts)
        out = [row(table, level, task, group, SCORING_SUCCESS, ok / verdicts, verdicts, extra=extra)]
        marked = [c for c in cells if c.marks_perfect]
        if marked and sum(c.n for c in marked):
            out.append(row(table, level, task, group, PERFECT_RATE,
                           sum(c.perfect for c in marked) / sum(c.n for c in marked), sum(c.n for c in marked),
                           extra=extra))
        return out

    def groups_of(cells: list[Cell]) -> dict[str, list[Cell]]:
        groups: dict[str, list[Cell]] = {}
        for c in cells:
            groups.setdefault(agg[c.task].group, []).append(c)
        return groups

    def task_score(c: Cell) -> float:
        if head.round is None:
            return head.scale * c.mean
        return round(head.scale * c.total / c.n, head.round)  # the authors' round(100 * total / n, 2)

    def group_score(of_group: list[Cell]) -> float | None:
        scored = [c for c in of_group if c.n]
        if not scored:
            return None
        if head.overall == "mean_of_instances":
            return head.scale * sum(c.total for c in scored) / sum(c.n for c in scored)
        if head.round is None:
            return head.scale * _mean([c.mean for c in scored], [agg[c.task].weight for c in scored])
        return _mean([task_score(c) for c in scored], [agg[c.task].weight for c in scored])

    def overall_score(cells: list[Cell]) -> float | None:
        scored = [c for c in cells if c.n]
        if not scored:
            return None
        if head.overall == "mean_of_groups":
            return _mean([s for s in map(group_score, groups_of(scored).values()) if s is not None])
        if head.overall == "mean_of_tasks":
            if head.round is None:
                return head.scale * _mean([c.mean for c in scored])
            return _mean([task_score(c) for c in scored])
        return head.scale * sum(c.total for c in scored) / sum(c.n for c in scored)

    def incomplete(cells: list[Cell]) -> list[str]:
        """The tasks of ``cells`` without a score (or, over every length, without one at some length)."""
        return sorted({c.task for c in cells if not c.n or gaps.get(c.task)})

    def overall_missing(table: str, cells: list[Cell]) -> list[str]:
        if head.overall != "mean_of_groups":
            return incomplete(cells)
        groups = groups_of(cells)
        wanted = set(groups) | set((declared or {}).get(table, ())) | set((declared or {}).get(ALL_TABLES, ()))
        return sorted(g for g in wanted if g not in groups or incomplete(groups[g]))

    def label(cells: list[Cell]) -> str:
        return "+".join(sorted({c.metric for c in cells if c.metric}))  # one label, or the mix a group averages

    out: list[dict] = []
    for table in named:
        in_table = rows.filter(pl.col("task").replace_strict(
            {t: a.table in (table, ALL_TABLES) for t, a in agg.items()}, return_dtype=pl.Boolean))
        members = cells_of(in_table)
        empty = [Cell(t, (labels or {}).get((benchmark, t), ""), 0.0, 0, 0, 0, False)
                 for t in sorted(empty_tasks) if agg[t].table in (table, ALL_TABLES)]
        if empty:
            members = sorted([*members, *empty], key=lambda c: (c.task, c.metric))
        if not members:
            continue
        groups = groups_of(members)
        for group, of_group in groups.items():
            for c in of_group:
                extra = shares({c.task})
                if c.n and not gaps.get(c.task):
                    out.append(row(table, "task", c.task, group, c.metric, task_score(c), c.n,
                                   interval([(c, 1.0)]), extra))
                else:  # no score (not sent, not judged, not run), or none at some length: a null row says so
                    out.append(row(table, "task", c.task, group, c.metric, None, c.n, extra=extra,
                                   missing=gaps.get(c.task, ())))
                out += rates(table, "task", c.task, group, [c], extra)
        for group, of_group in groups.items():
            missing = incomplete(of_group)
            score = None if missing else group_score(of_group)
            extra = shares({c.task for c in of_group})
            out.append(row(table, "group", None, group, label(of_group), score, sum(c.n for c in of_group),
                           (None, None) if score is None else interval(cell_weights(of_group, head, agg, "group")),
                           extra, missing))
            out += rates(table, "group", None, group, of_group, extra)
        missing = overall_missing(table, members)
        overall = None if missing else overall_score(members)
        extra = shares({c.task for c in members})
        out.append(row(table, "overall", None, None, label(members), overall, sum(c.n for c in members),
                       (None, None) if overall is None else interval(cell_weights(members, head, agg, "overall")),
                       extra, missing))
        out += rates(table, "overall", None, None, members, extra)
        for field in head.breakdown:
            column = f"field:{field}"
            for value in sorted(set(in_table[column].to_list()) - {_UNSET}):
                cells = cells_of(in_table.filter(pl.col(column) == value))
                category = f"{field}={value}"
                score = overall_score(cells)
                extra = shares({c.task for c in cells}, column, value)
                if score is not None:
                    out.append(row(table, "breakdown", None, category, label(cells), score, sum(c.n for c in cells),
                                   interval(cell_weights(cells, head, agg, "overall"), category), extra))
                out += rates(table, "breakdown", None, category, cells, extra)
    return out


PER_LENGTH_HOOK = "LEADERBOARD_PER_LENGTH"  # a benchmark module's flag: its published tables are per length


def per_length_leaderboard(benchmark: str) -> bool:
    """Whether ``benchmark`` publishes a table per length partition rather than one number over them (its protocol
    module's ``LEADERBOARD_PER_LENGTH``, found by convention: LongBench-E's buckets, fidelity review LB5)."""
    import importlib

    from lc_pipeline.config import has_official_protocol, protocol_module

    if not has_official_protocol(benchmark):
        return False
    return bool(getattr(importlib.import_module(protocol_module(benchmark)), PER_LENGTH_HOOK, False))


def benchmark_leaderboard(tables: pl.DataFrame, n_unpaired: Mapping[str, int] | None = None) -> pl.DataFrame:
    """LEADERBOARD rows of a benchmark run as released, from every model's benchmark_scores (``model`` column):
    one row per (model, benchmark, table, protocol) as metric ``"<benchmark>/<table>"`` (``longbench/en``,
    ``lveval/all``), ``scores_by_length`` each length partition's overall, ranked among the models of the same
    metric and protocol (rows of two protocols are never ranked together). Its score (``old_metric``): the table's
    overall of length :data:`ALL_LENGTHS` where the benchmark has one (headline ``across_lengths:
    micro_over_items``: Loong's overall over all items), else the mean over the length partitions of the table's
    overall row (one partition for LongBench, the level scores' mean for LV-Eval); null when an overall behind it
    is null, ``missing_groups`` naming ``<group>@<length>``. The rates (Loong's perfect_rate, scoring_success) and
    the breakdown rows stay in benchmark_scores; there is no LongScore (no base lengths): base_ability and
    long_score are null. A benchmark that publishes a table per length (:func:`per_length_leaderboard`: LongBench-E's
    0-4k / 4-8k / 8k+) has, when its table has several length partitions, one row per partition instead, metric
    ``"<benchmark>/<table>@<length>"``, scored, ranked and counted on that partition alone (LB5).

    ``ci_low`` / ``ci_high``: the [all] row's own interval, or the interval of that mean from the overall rows'
    own intervals. The partitions hold different records, so their bootstrap errors are independent and each
    side's half width is the quadrature sum of the partitions' half widths over their count
    (confidence.interval_of_mean; exact with one partition, a normal approximation of the mean's bootstrap with
    several); null when a partition has no interval. ``skipped_share`` / ``truncated_share`` / ``invalid_share``:
    over the overall rows' instances of every partition (their status_counts); null when they are not known.
    ``n_unpaired``: the model's instances left out of its rows (``n_unpaired[model]``, 0 when not given): the
    caller pairs the models first, computing every model's tables on their common instances
    (score/lake_tables.paired_tables). A table written before the ``protocol`` and
    ``missing_groups`` columns reads as protocol "ours", nothing missing."""
    overall = tables.filter((pl.col("level") == "overall") & ~pl.col("metric").is_in([SCORING_SUCCESS, PERFECT_RATE]))
    if overall.is_empty():
        return schemas.empty("leaderboard")
    for column, dtype in (("ci_low", pl.Float64), ("ci_high", pl.Float64), ("truncated_share", pl.Float64),
                          ("status_counts", pl.String), ("missing_groups", schemas.StrList)):
        if column not in overall.columns:  # a table written before these columns existed
            overall = overall.with_columns(pl.lit(None, dtype).alias(column))
    if "protocol" not in overall.columns:
        overall = overall.with_columns(protocol=pl.lit(OURS))
    overall = overall.with_columns(pl.col("protocol").fill_null(OURS))
    rows = []
    groups = []
    for (model, benchmark, table, protocol), grp in overall.group_by("model", "benchmark", "table", "protocol",
                                                                     maintain_order=True):
        lengths = length_order(grp.filter(pl.col("length") != ALL_LENGTHS)["length"].unique())
        if len(lengths) > 1 and per_length_leaderboard(benchmark):  # one published table per length
            groups += [(model, f"{benchmark}/{table}@{lv}", protocol, grp.filter(pl.col("length") == lv))
                       for lv in lengths]
        else:
            groups.append((model, f"{benchmark}/{table}", protocol, grp))
    for model, metric, protocol, grp in groups:
        per = grp.filter(pl.col("length") != ALL_LENGTHS)
        micro = grp.filter(pl.col("length") == ALL_LENGTHS)
        by_length = {lv: per.filter(pl.col("length") == lv)["score"][0] for lv in length_order(per["length"])}
        missing = [f"{g}@{lv}" for lv, score, groups in per.select("length", "score", "missing_groups").iter_rows()
                   if score is None for g in (groups or [f"length={lv}"])]
        if micro.height:
            head = micro.row(0, named=True)
            score, low, high, n = head["score"], head["ci_low"], head["ci_high"], head["n"]
            missing = [f"{g}@{ALL_LENGTHS}" for g in head["missing_groups"] or []] if score is None else []
        else:
            values = list(by_length.values())
            complete = bool(values) and all(v is not None for v in values)
            score = sum(values) / len(values) if complete else None
            low, high = (confidence.interval_of_mean(per["score"].to_list(), per["ci_low"].to_list(),
                                                     per["ci_high"].to_list()) if complete else (None, None))
            n = int(per["n"].sum())
        rows.append({"model": model, "metric": metric, "base_ability": None,
                     "old_metric": score, "long_score": None,
                     "scores_by_length": json.dumps(by_length), "n_instances": int(n),
                     "ci_low": low, "ci_high": high, **_pooled_shares(per), "n_unpaired": int((n_unpaired or {}).get(model, 0)),
                     "protocol": protocol, "missing_groups": missing})
    out = pl.DataFrame(rows, schema_overrides={"base_ability": pl.Float64, "long_score": pl.Float64,
                                               "old_metric": pl.Float64,
                                               "ci_low": pl.Float64, "ci_high": pl.Float64,
                                               "skipped_share": pl.Float64, "truncated_share": pl.Float64,
                                               "invalid_share": pl.Float64, "missing_groups": schemas.StrList})
    nulls = {c: pl.lit(None, schemas.LEADERBOARD[c]) for c in schemas.LEADERBOARD if c not in out.columns}
    out = out.with_columns(**{c: v for c, v in nulls.items() if not c.startswith("rank_")})
    out = out.with_columns(
        rank_old_metric=pl.col("old_metric").rank("min", descending=True).over("metric", "protocol").cast(pl.Int32),
        rank_long_score=pl.lit(None, pl.Int32))
    return schemas.conform(out, "leaderboard").sort("metric", "protocol", "rank_old_metric", nulls_last=True)


def _pooled_shares(overall_rows: pl.DataFrame) -> dict:
    """The skipped, truncated and invalid shares over the instances of a table's overall rows (every length)."""
    counts = dict.fromkeys(STATUS_KEYS, 0)
    truncated = 0.0
    known = False
    for text, share in overall_rows.select("status_counts", "truncated_share").iter_rows():
        if text is None:
            continue
        known = True
        row = json.loads(text)
        for key, k in row.items():
            counts[key] = counts.get(key, 0) + int(k)
        truncated += (share or 0.0) * sum(int(k) for k in row.values())
    total = sum(counts.values())
    if not known or not total:
        return {"skipped_share": None, "truncated_share": None, "invalid_share": None}
    return {"skipped_share": counts["skipped"] / total, "truncated_share": round(truncated) / total,
            "invalid_share": counts["invalid"] / total}
