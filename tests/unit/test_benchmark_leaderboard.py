"""The leaderboard of a benchmark run as released ranks each published table's overall score: one row per
(model, benchmark, table, protocol), the mean of the table's overall over its length partitions (null, naming
what is missing, when one of them is null; Loong's: its overall over all items, tests/unit/test_loong_aggregation),
each partition's in scores_by_length; Loong's rates and the breakdown rows stay in benchmark_scores; there is no
LongScore; rows of two protocols are ranked apart."""

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
    rows = [overall("a", "mine", "en", lv, float(i), 1) for i, lv in enumerate(lengths)]
    board = benchmark_leaderboard(pl.DataFrame(rows))
    assert list(json.loads(board["scores_by_length"][0])) == ["0-4k", "4-8k", "8k+"]


def test_a_null_overall_at_any_length_leaves_the_row_null_and_named_not_the_mean_of_the_rest():
    rows = [overall("a", "helmet", "all", "8k", 50.0, 10), {**overall("a", "helmet", "all", "16k", None, 8),
                                                              "missing_groups": ["LongQA", "Summ"]},
            overall("b", "helmet", "all", "8k", 40.0, 10), overall("b", "helmet", "all", "16k", 30.0, 10)]
    board = benchmark_leaderboard(pl.DataFrame(rows))
    a, b = (board.filter(pl.col("model") == m).to_dicts()[0] for m in ("a", "b"))
    assert (a["old_metric"], a["rank_old_metric"], a["ci_low"]) == (None, None, None)  # not 50.0
    assert a["missing_groups"] == ["LongQA@16k", "Summ@16k"]
    assert json.loads(a["scores_by_length"]) == {"8k": 50.0, "16k": None}
    assert (b["old_metric"], b["rank_old_metric"], b["missing_groups"]) == (35.0, 1, [])


def test_rows_of_two_protocols_are_ranked_apart_and_say_which():
    ours = [overall("a", "lveval", "all", "16k", 40.0, 10), overall("b", "lveval", "all", "16k", 50.0, 10)]
    official = [{**overall("a", "lveval", "all", "16k", 45.0, 10), "protocol": "official@25aebcb"}]
    board = benchmark_leaderboard(pl.DataFrame([{**r, "protocol": "ours"} for r in ours] + official))
    got = {(r["protocol"], r["model"]): (r["old_metric"], r["rank_old_metric"]) for r in board.iter_rows(named=True)}
    assert got == {("ours", "a"): (40.0, 2), ("ours", "b"): (50.0, 1), ("official@25aebcb", "a"): (45.0, 1)}
    assert benchmark_leaderboard(pl.DataFrame(ours))["protocol"].to_list() == ["ours", "ours"]  # an older table
