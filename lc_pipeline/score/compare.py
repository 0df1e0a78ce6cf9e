"""Two models compared on the instances both have a score on (``lcp compare``): per benchmark x table x length,
each model's score on the common instances (aggregated as the benchmark's headline says, the way
score/benchmark_scores.py makes its overall row), the difference A - B with a paired bootstrap interval and a
paired permutation test's p-value. Rows of two instance protocols (``protocol``: "ours", "official@<commit>")
are compared apart, never pooled. A benchmark whose headline says ``across_lengths: micro_over_items`` (Loong)
has a row of length ``[all]`` too: the overall over the common instances of every length.

- Pairing: an instance counts when both models have its headline score (a metric row, or a judge verdict parsed
  ok, on a plain instance); ``only_a`` / ``only_b`` count the instances one model has and the other lacks
  (skipped, invalid, not generated, not judged): they are left out of both scores.
- Interval: the instances of each task cell are resampled (instance_id order, ``draws`` times, seeded from
  ``seed`` and the cell, score/confidence.py), the SAME resample for both models, and the difference recomputed
  with the headline's weights (benchmark_scores.cell_weights); the 2.5th and 97.5th percentiles. A comparison
  whose every cell has one common instance has no interval.
- p-value: a paired sign-flip permutation test of the same statistic: under "no difference" each instance's two
  scores are exchangeable, so each draw flips the sign of every instance's A - B difference at random (seeded)
  and recomputes the weighted difference; p = (1 + #{|flipped| >= |observed|}) / (1 + draws), two-sided. Two
  identical models give 0 with p = 1. With ``draws`` flips the smallest p is 1 / (draws + 1).
- Rounding: where the headline rounds task scores (``headline.round``: LongBench, LV-Eval), each model's score is
  the mean of its rounded task scores, as benchmark_scores' overall is; the interval and the test are of the
  unrounded difference.
Pure: no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from lc_pipeline.config import length_order
from lc_pipeline.score import confidence
from lc_pipeline.score.benchmark_scores import ALL_LENGTHS, ALL_TABLES, Cell, Scored, cell_weights

COLUMNS = {"benchmark": pl.String, "protocol": pl.String, "table": pl.String, "length": pl.String,
           "metric": pl.String,
           "aggregation": pl.String, "n_common": pl.Int64, "only_a": pl.Int64, "only_b": pl.Int64,
           "score_a": pl.Float64, "score_b": pl.Float64, "diff": pl.Float64, "ci_low": pl.Float64,
           "ci_high": pl.Float64, "p_value": pl.Float64}


def _scored_rows(scored: Scored) -> pl.DataFrame:
    return (scored.rows.filter(pl.col("score").is_not_null())
            .select("instance_id", "benchmark", "protocol", "task", "length", "metric", "score"))


def compare_models(a: Scored, b: Scored, *, draws: int = confidence.DRAWS, seed: int = 0) -> pl.DataFrame:
    """The comparison table (:data:`COLUMNS`) of model A against model B from their scored instances
    (benchmark_scores.scored_instances of each, on the same instances and catalog)."""
    if draws < 1:
        raise ValueError(f"compare: draws must be at least 1, got {draws}")
    ra, rb = _scored_rows(a), _scored_rows(b)
    keys = ["instance_id", "protocol", "metric"]
    both = ra.join(rb.select(*keys, score_b=pl.col("score")), on=keys, how="inner").rename({"score": "score_a"})
    only_a = ra.join(rb, on=keys, how="anti")
    only_b = rb.join(ra, on=keys, how="anti")
    specs = {**b.specs, **a.specs}
    heads = {**b.heads, **a.heads}
    out = []
    cells_at = pl.concat([ra, rb]).select("benchmark", "protocol", "length").unique()
    for benchmark, protocol in sorted(cells_at.select("benchmark", "protocol").unique().iter_rows()):
        head = heads[benchmark]
        lengths = length_order(sorted(cells_at.filter(
            (pl.col("benchmark") == benchmark) & (pl.col("protocol") == protocol))["length"].to_list()))
        if head.across_lengths == "micro_over_items":  # the overall over every item, as benchmark_scores has it
            lengths = [*lengths, ALL_LENGTHS]
        for length in lengths:
            def at(frame: pl.DataFrame, benchmark=benchmark, protocol=protocol, length=length) -> pl.DataFrame:
                where = (pl.col("benchmark") == benchmark) & (pl.col("protocol") == protocol)
                return frame.filter(where if length == ALL_LENGTHS else where & (pl.col("length") == length))
            common, lone_a, lone_b = at(both), at(only_a), at(only_b)
            tasks = set(common["task"]) | set(lone_a["task"]) | set(lone_b["task"])
            agg = {t: specs[(benchmark, t)].aggregation for t in tasks}
            for table in sorted({g.table for g in agg.values()} - {ALL_TABLES}) or [ALL_TABLES]:
                mine = [t for t in sorted(tasks) if agg[t].table in (table, ALL_TABLES)]

                def count(frame: pl.DataFrame, mine: list[str] = mine) -> int:
                    return frame.filter(pl.col("task").is_in(mine)).height
                row = {"benchmark": benchmark, "protocol": protocol, "table": table, "length": length,
                       "aggregation": head.overall,
                       "only_a": count(lone_a), "only_b": count(lone_b),
                       **_paired(common.filter(pl.col("task").is_in(mine)), head, agg, benchmark, length, draws, seed)}
                out.append(row)
    return pl.DataFrame(out, schema=COLUMNS).select(list(COLUMNS))


def _paired(common: pl.DataFrame, head, agg: Mapping, benchmark: str, length: str, draws: int, seed: int) -> dict:
    """Scores, difference, interval and p-value of one table at one length on its common instances."""
    if common.is_empty():
        return {"metric": None, "n_common": 0}
    cells, pairs = [], []
    for (task, metric), rows in common.sort("task", "metric", "instance_id").group_by(
            "task", "metric", maintain_order=True):
        sa, sb = rows["score_a"].to_numpy(), rows["score_b"].to_numpy()
        cells.append(Cell(task, metric, float(sa.sum()), rows.height, 0, 0, False))
        pairs.append((sa, sb))
    by_cell = dict(zip(((c.task, c.metric) for c in cells), pairs, strict=True))
    weighted = cell_weights(cells, head, agg, "overall")

    def task_score(values: np.ndarray) -> float:
        if head.round is None or head.overall == "mean_of_instances":
            return head.scale * values.mean()
        return round(head.scale * float(values.sum()) / len(values), head.round)  # as benchmark_scores rounds

    score_a = sum(w * task_score(by_cell[(c.task, c.metric)][0]) for c, w in weighted)
    score_b = sum(w * task_score(by_cell[(c.task, c.metric)][1]) for c, w in weighted)
    diff = score_a - score_b
    resampled = np.zeros(draws)
    flipped = np.zeros(draws)
    for c, w in weighted:
        sa, sb = by_cell[(c.task, c.metric)]
        delta = head.scale * w * (sa - sb) / c.n
        resampled += confidence.resample_counts(
            c.n, draws, confidence.rng_for("compare", seed, benchmark, length, c.task, c.metric)) @ delta
        flipped += confidence.sign_flips(
            c.n, draws, confidence.rng_for("compare-flips", seed, benchmark, length, c.task, c.metric)) @ delta
    low, high = (confidence.percentile_interval(resampled) if any(c.n > 1 for c, _ in weighted) else (None, None))
    return {"metric": "+".join(sorted({c.metric for c in cells})), "n_common": common.height,
            "score_a": score_a, "score_b": score_b, "diff": diff, "ci_low": low, "ci_high": high,
            "p_value": confidence.permutation_p_value(diff, flipped)}
