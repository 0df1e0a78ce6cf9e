"""The leaderboard of a benchmark run as released ranks each published table's overall score: one row per
(model, benchmark, table), the mean of the table's overall over its length partitions, each partition's in
scores_by_length; Loong's rates and the breakdown rows stay in benchmark_scores; there is no LongScore."""

from __future__ import annotations

import json

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.benchmark_scores import PERFECT_RATE, SCORING_SUCCESS, benchmark_leaderboard


def overall(model: str, benchmark: str, table: str, length: str, score: float, n: int, metric: str = "m",
            level: str = "overall") -> dict:
    return {"model": model, "benchmark": benchmark, "table": table, "level": level, "task": None, "category": None,
            "length": length, "metric": metric, "score": score, "n": n, "aggregation": "mean_of_tasks"}


def test_each_models_table_overall_is_ranked_and_averaged_over_its_partitions():
    rows = [overall("a", "lveval", "all", "16k", 40.0, 10), overall("a", "lveval", "all", "32k", 20.0, 10),
            overall("b", "lveval", "all", "16k", 50.0, 10), overall("b", "lveval", "all", "32k", 30.0, 10),
            overall("a", "longbench", "en", "all", 44.0, 100), overall("a", "longbench", "zh", "all", 41.5, 60),
            # Loong's rates and a breakdown row are not the table's score
            overall("a", "loong", "all", "set1", 55.0, 4, "judge:loong"),
            overall("a", "loong", "all", "set1", 0.75, 4, SCORING_SUCCESS),
            overall("a", "loong", "all", "set1", 0.25, 3, PERFECT_RATE),
            overall("a", "longbench", "en", "all", 99.0, 5, level="breakdown")]
    board = benchmark_leaderboard(pl.DataFrame(rows))
    assert board.schema == schemas.LEADERBOARD
    got = {(r["metric"], r["model"]): (r["old_metric"], r["rank_old_metric"], r["n_instances"])
           for r in board.iter_rows(named=True)}
    assert got == {("lveval/all", "a"): (30.0, 2, 20), ("lveval/all", "b"): (40.0, 1, 20),
                   ("longbench/en", "a"): (44.0, 1, 100), ("longbench/zh", "a"): (41.5, 1, 60),
                   ("loong/all", "a"): (55.0, 1, 4)}
    lveval_b = board.filter((pl.col("metric") == "lveval/all") & (pl.col("model") == "b"))
    assert json.loads(lveval_b["scores_by_length"][0]) == {"16k": 50.0, "32k": 30.0}
    assert board["base_ability"].is_null().all() and board["long_score"].is_null().all()
    assert board["rank_long_score"].is_null().all()


def test_no_tables_make_an_empty_leaderboard():
    empty = pl.DataFrame([overall("a", "loong", "all", "set1", 0.5, 2, SCORING_SUCCESS)])
    assert benchmark_leaderboard(empty).is_empty()


@pytest.mark.parametrize("lengths", [["8k+", "0-4k", "4-8k"]])
def test_partitions_are_listed_in_the_benchmarks_order(lengths):
    rows = [overall("a", "longbench", "en", lv, float(i), 1) for i, lv in enumerate(lengths)]
    board = benchmark_leaderboard(pl.DataFrame(rows))
    assert list(json.loads(board["scores_by_length"][0])) == ["0-4k", "4-8k", "8k+"]
