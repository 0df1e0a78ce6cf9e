"""`lcp report` shows each benchmark score with its bootstrap interval and, below each table, what happened to the
overall's generations (commands/report.py over benchmark_scores rows)."""

from __future__ import annotations

import polars as pl

from lc_pipeline.commands.report import benchmark_pivots, generation_statuses
from lc_pipeline.score.benchmark_scores import benchmark_table
from lc_pipeline.tasks.catalog import load_catalog

IDS = [f"i{k}" for k in range(5)]


def table() -> pl.DataFrame:
    instances = pl.DataFrame({"instance_id": IDS, "benchmark": "lveval", "task": "cmrc_mixup", "length": "16k"})
    scores = pl.DataFrame({"instance_id": IDS[:4], "metric": "lveval", "score": [1.0, 0.0, 1.0, 1.0]})
    generations = pl.DataFrame({"instance_id": IDS, "status": ["answered", "answered", "cut", "answered", "skipped"],
                                "truncated": [False, True, False, False, False]})
    return benchmark_table(scores, instances, load_catalog(), "m", generations=generations).table


def test_scores_read_with_their_interval_and_the_generations_below():
    scores = table()
    [(_, _, _, pivot)] = benchmark_pivots(scores, intervals=True)
    overall = dict(pivot.select("level", "m / 16k").rows())["overall"]
    low, high = scores.filter(pl.col("level") == "overall").select("ci_low", "ci_high").row(0)
    assert overall == f"75.00 [{low:.1f}, {high:.1f}]"
    [(_, _, _, plain)] = benchmark_pivots(scores)  # without intervals, as before
    assert dict(plain.select("level", "m / 16k").rows())["overall"] == "75.00"
    statuses = generation_statuses(scores)[("lveval", "all")]
    assert statuses.rows() == [("m", "16k", 4, "20.0%", "20.0%", 3, 0, 1, 0, 1, 0)]
