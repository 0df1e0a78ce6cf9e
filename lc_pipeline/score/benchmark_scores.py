"""The ``benchmark_scores`` table: each benchmark's published table for one model, from its task files.

Per (benchmark, length level): one row per task (its headline metric, the FIRST metric the task declares),
one row per group (``aggregation.group``) of each table (``aggregation.table``), and one overall row per
table, aggregated as the benchmark's ``headline.overall`` says (tasks/spec.py ``Headline``):

- ``mean_of_groups``: a group's score is the mean of its task scores weighted by ``aggregation.weight``;
  the overall is the unweighted mean of the group scores. HELMET (spec helmet.md §6: category = mean of
  its datasets, HELMET average = mean of the categories) and LongBench (spec released_benchmarks.md
  "LongBench v1": category = mean of its tasks, "Avg" = mean of the six categories, English and Chinese
  tables apart, code completion (table ``all``) in both).
- ``mean_of_tasks``: groups as above; the overall is the unweighted mean of the task scores (LV-Eval's
  level score, spec lveval.md §9: "the unweighted arithmetic mean of the 11 dataset scores").
- ``mean_of_instances``: every cell (task, group, overall) is the mean over its scored instances, a
  micro-average (Loong, spec loong.md §7.6: "never average task means").

A task score is ``scale`` (100) x the mean of its instances' scores, not rounded (LongBench's and
LV-Eval's tables round to 2 decimals for display only). A table is one of the ``table`` values of the
tasks present; a task of table ``all`` counts in every table of its benchmark (alone, its table is
``all``). Only ``plain`` instances count: LV-Eval's CFI / KPR variants are an ablation
(score/lveval_ablation.py). Tasks that declare no metric (judge-only) have no row here: they are
counted in :attr:`BenchmarkTable.judge_only`, never dropped silently. Loong's own numbers (judge score
and perfect rate) come from judge_scores; here Loong's rows are its first declared metric. Pure: no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import length_order
from lc_pipeline.tasks.catalog import TaskCatalog
from lc_pipeline.tasks.registry import METRICS
from lc_pipeline.tasks.spec import Headline, TaskSpec

ALL_TABLES = "all"  # aggregation.table of a task counted in every table of its benchmark
PLAIN = "plain"
LEVELS = ("task", "group", "overall")
COLUMNS = ("model", *schemas.BENCHMARK_SCORES.names())  # `model` is the partition column of the stored table


class BenchmarkTable(NamedTuple):
    """A model's benchmark tables and what was left out of them, and why."""

    table: pl.DataFrame  # ``model`` + BENCHMARK_SCORES columns
    judge_only: dict[str, int]  # "benchmark/task" -> plain instances of a task with no metric (judge-only)
    variant_rows: int  # metric_scores rows of LV-Eval variant instances (cfi, kpr, ...), not counted
    unscored: dict[str, int]  # "benchmark/task" -> plain instances with no score of the task's headline metric


def headline_metric(spec: TaskSpec) -> str | None:
    """The metric_scores label of the task's headline metric (its first declared), or None when it has none."""
    if not spec.metrics:
        return None
    return METRICS.get(spec.metrics[0].name, where=f"task {spec.qualified_name}, field metrics").label


def _mean(values: list[float], weights: list[float] | None = None) -> float:
    weights = weights or [1.0] * len(values)
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


def _plain_instances(instances: pl.DataFrame, length_from: pl.DataFrame) -> pl.DataFrame:
    needed = ["instance_id", "benchmark", "task"]
    missing = [c for c in needed if c not in instances.columns]
    if missing:
        raise ValueError(f"benchmark_scores: instances frame lacks column(s) {missing}")
    if "length" in instances.columns:
        out = instances.select(*needed, "length", *(["variant"] if "variant" in instances.columns else []))
    elif "length" in length_from.columns:
        out = instances.select(*needed, *(["variant"] if "variant" in instances.columns else [])).join(
            length_from.select("instance_id", "length").unique(), on="instance_id", how="left")
    else:
        raise ValueError("benchmark_scores: neither instances nor metric_scores has a `length` column")
    if "variant" not in out.columns:
        out = out.with_columns(variant=pl.lit(PLAIN))
    return out.with_columns(pl.col("variant").fill_null(PLAIN))


def benchmark_table(scores: pl.DataFrame, instances: pl.DataFrame, catalog: TaskCatalog, model: str) -> BenchmarkTable:
    """One model's BENCHMARK_SCORES rows (plus ``model``) from its ``metric_scores`` and the ``instances``.

    ``scores``: METRIC_SCORES rows of one model (``instance_id, metric, score``; ``length`` when
    ``instances`` lacks it). ``instances``: ``instance_id, benchmark, task, length`` and ``variant``
    (every length may be there; only those scored count). A score whose instance is missing is a
    ValueError naming it (the scores are stale).
    """
    for col in ("instance_id", "metric", "score"):
        if col not in scores.columns:
            raise ValueError(f"benchmark_scores: metric_scores frame lacks column {col!r}")
    inst = _plain_instances(instances, scores)
    joined = scores.select("instance_id", "metric", "score").join(
        inst.rename({"task": "inst_task"}), on="instance_id", how="left")
    lost = joined.filter(pl.col("benchmark").is_null())
    if lost.height:
        raise ValueError(f"benchmark_scores: {lost.height} metric_scores rows have no instance (e.g. instance_id "
                         f"{lost['instance_id'][0]!r}); rebuild metric_scores")
    variant_rows = joined.filter(pl.col("variant") != PLAIN).height
    joined = joined.filter(pl.col("variant") == PLAIN)

    specs: dict[tuple[str, str], TaskSpec] = {}
    for benchmark, task in inst.select("benchmark", "task").unique().sort("benchmark", "task").iter_rows():
        try:
            specs[(benchmark, task)] = catalog.resolve(benchmark, task)
        except ValueError as exc:
            raise ValueError(f"benchmark_scores: instances of {benchmark}/{task}: {exc}") from exc
    labels = {key: headline_metric(spec) for key, spec in specs.items()}

    plain_counts = inst.filter(pl.col("variant") == PLAIN).group_by("benchmark", "task").len()
    judge_only = {f"{b}/{t}": n for b, t, n in plain_counts.sort("benchmark", "task").iter_rows()
                  if labels[(b, t)] is None}

    # Per (benchmark, task, length): the headline metric's instance scores.
    wanted = pl.DataFrame(
        [(b, t, lab) for (b, t), lab in labels.items() if lab is not None],
        schema={"benchmark": pl.String, "inst_task": pl.String, "metric": pl.String}, orient="row")
    headline = joined.join(wanted, on=["benchmark", "inst_task", "metric"], how="inner")
    unscored_ids = inst.filter(pl.col("variant") == PLAIN).join(
        headline.select("instance_id").unique(), on="instance_id", how="anti")
    unscored = {f"{b}/{t}": n for b, t, n in unscored_ids.group_by("benchmark", "task").len()
                .sort("benchmark", "task").iter_rows() if labels[(b, t)] is not None}

    cells = (headline.group_by("benchmark", "length", "inst_task", "metric")
             .agg(mean=pl.col("score").mean(), total=pl.col("score").sum(), n=pl.len())
             .rename({"inst_task": "task"}))
    rows: list[dict] = []
    for benchmark in sorted(cells["benchmark"].unique().to_list()):
        head = catalog.headlines.get(benchmark, Headline())
        of_bench = cells.filter(pl.col("benchmark") == benchmark)
        for length in length_order(of_bench["length"].unique().to_list()):
            tasks = of_bench.filter(pl.col("length") == length).sort("task").to_dicts()
            rows += _benchmark_rows(benchmark, length, tasks, specs, head)
    frame = schemas.conform(pl.DataFrame(rows, schema=schemas.BENCHMARK_SCORES), "benchmark_scores")
    table = frame.select(pl.lit(model, dtype=pl.String).alias("model"), pl.all())
    return BenchmarkTable(table, judge_only, variant_rows, unscored)


def _benchmark_rows(benchmark: str, length: str, tasks: list[dict], specs: Mapping[tuple[str, str], TaskSpec],
                    head: Headline) -> list[dict]:
    """The task, group and overall rows of one benchmark at one length (``tasks``: one cell per task)."""
    agg = {t["task"]: specs[(benchmark, t["task"])].aggregation for t in tasks}
    named = sorted({a.table for a in agg.values()} - {ALL_TABLES}) or [ALL_TABLES]
    scale = head.scale

    def row(table: str, level: str, task: str | None, group: str | None, metric: str, score: float, n: int) -> dict:
        return {"benchmark": benchmark, "table": table, "level": level, "task": task,
                "category": group, "length": length, "metric": metric, "score": score, "n": n,
                "aggregation": head.overall}

    out: list[dict] = []
    for table in named:
        members = [t for t in tasks if agg[t["task"]].table in (table, ALL_TABLES)]
        if not members:
            continue
        metric = "+".join(sorted({t["metric"] for t in members}))  # one label, or the mix a group averages
        groups: dict[str, list[dict]] = {}
        for t in members:
            groups.setdefault(agg[t["task"]].group, []).append(t)
        for group, of_group in groups.items():
            for t in of_group:
                out.append(row(table, "task", t["task"], group, t["metric"], scale * t["mean"], t["n"]))
        group_scores: list[float] = []
        for group, of_group in groups.items():
            if head.overall == "mean_of_instances":
                score = scale * sum(t["total"] for t in of_group) / sum(t["n"] for t in of_group)
            else:
                score = scale * _mean([t["mean"] for t in of_group], [agg[t["task"]].weight for t in of_group])
            group_scores.append(score)
            label = "+".join(sorted({t["metric"] for t in of_group}))
            out.append(row(table, "group", None, group, label, score, sum(t["n"] for t in of_group)))
        if head.overall == "mean_of_groups":
            overall = _mean(group_scores)
        elif head.overall == "mean_of_tasks":
            overall = scale * _mean([t["mean"] for t in members])
        else:
            overall = scale * sum(t["total"] for t in members) / sum(t["n"] for t in members)
        out.append(row(table, "overall", None, None, metric, overall, sum(t["n"] for t in members)))
    return out
