"""Loong's published tables from a model's benchmark_scores rows (the numbers are computed by
score/benchmark_scores.py, as Loong's task file's headline says: ``overall: mean_of_instances``,
``source: judge``, ``across_lengths: micro_over_items``).

- :func:`table3`: the paper's Table 3, each task over all sets and the overall over all items, micro-averaged
  (what the authors' ``step4_cal_metric`` prints as its "All metrics" and per-level lines): Avg score (0-100),
  Perfect Rate (0-1) and the scoring success rate, from the rows of length ``[all]``.
- :func:`set_table`: per set (the config's length partitions), the same three numbers per task and overall.
"""

from __future__ import annotations

import polars as pl

from lc_pipeline.score.benchmark_scores import ALL_LENGTHS, PERFECT_RATE, SCORING_SUCCESS

OVERALL = "Overall"  # the label of the overall row in these tables
COLUMNS = {"model": pl.String, "protocol": pl.String, "length": pl.String, "task": pl.String,
           "avg_score": pl.Float64, "perfect_rate": pl.Float64, "scoring_success": pl.Float64, "n": pl.Int64,
           "missing_groups": pl.List(pl.String)}


def _table(scores: pl.DataFrame, benchmark: str, at_all: bool) -> pl.DataFrame:
    needed = ("model", "benchmark", "level", "task", "length", "metric", "score", "n")
    lacking = [c for c in needed if c not in scores.columns]
    if lacking:
        raise ValueError(f"loong tables: benchmark_scores frame lacks column(s) {lacking}")
    rows = scores.filter((pl.col("benchmark") == benchmark) & pl.col("level").is_in(["task", "overall"])
                         & ((pl.col("length") == ALL_LENGTHS) == at_all))
    if "protocol" not in rows.columns:
        rows = rows.with_columns(protocol=pl.lit("ours"))
    if "missing_groups" not in rows.columns:
        rows = rows.with_columns(missing_groups=pl.lit(None, pl.List(pl.String)))
    rows = rows.with_columns(task=pl.col("task").fill_null(OVERALL),
                             what=pl.col("metric").replace({PERFECT_RATE: "perfect_rate",
                                                            SCORING_SUCCESS: "scoring_success"}))
    keys = ["model", "protocol", "length", "task"]
    score = rows.filter(~pl.col("what").is_in(["perfect_rate", "scoring_success"])).select(
        *keys, avg_score=pl.col("score"), n=pl.col("n"), missing_groups=pl.col("missing_groups"))
    rates = [rows.filter(pl.col("what") == what).select(*keys, pl.col("score").alias(what))
             for what in ("perfect_rate", "scoring_success")]
    out = score
    for rate in rates:
        out = out.join(rate, on=keys, how="left")
    out = out.with_columns(last=pl.col("task") == OVERALL).sort("model", "protocol", "length", "last", "task")
    return out.select(list(COLUMNS)).cast(COLUMNS)  # type: ignore[arg-type]


def table3(scores: pl.DataFrame, benchmark: str = "loong") -> pl.DataFrame:
    """Table 3: per (model, protocol) one row per task over all sets and an ``Overall`` row over all items
    (:data:`COLUMNS`, length ``[all]``); a task or overall whose cells lack a set is null and names it
    (``missing_groups``: ``length=<set>`` or the tasks)."""
    return _table(scores, benchmark, at_all=True)


def set_table(scores: pl.DataFrame, benchmark: str = "loong") -> pl.DataFrame:
    """Per set: one row per task and an ``Overall`` row (:data:`COLUMNS`), as the authors' per-set lines."""
    return _table(scores, benchmark, at_all=False)
