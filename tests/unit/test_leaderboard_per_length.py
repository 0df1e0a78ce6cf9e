"""LB5: a benchmark that publishes a table per length (LongBench-E's buckets: benchmarks/longbench/protocol.py
``LEADERBOARD_PER_LENGTH``) gets a leaderboard row per length partition, ranked within it; one averaged over its
lengths (LV-Eval's levels) keeps one row."""

from __future__ import annotations

import json

import polars as pl

from lc_pipeline.score.benchmark_scores import (
    benchmark_leaderboard,
    per_length_leaderboard,
)


def overall(model: str, benchmark: str, length: str, score: float, n: int) -> dict:
    return {"model": model, "benchmark": benchmark, "table": "en", "level": "overall", "task": None,
            "category": None, "length": length, "metric": "longbench", "score": score, "n": n,
            "aggregation": "mean_of_groups"}


def test_longbench_e_buckets_are_rows_of_their_own_and_lveval_levels_are_averaged():
    assert per_length_leaderboard("longbench") and not per_length_leaderboard("lveval")
    rows = [overall("a", "longbench", lv, s, n) for lv, s, n in (("8k+", 20.0, 5), ("0-4k", 40.0, 10), ("4-8k", 30.0, 8))]
    rows += [overall("b", "longbench", lv, s, 10) for lv, s in (("0-4k", 35.0), ("4-8k", 32.0), ("8k+", 10.0))]
    rows += [overall("a", "lveval", lv, s, 10) for lv, s in (("16k", 40.0), ("32k", 20.0))]
    board = benchmark_leaderboard(pl.DataFrame(rows))
    got = {(r["model"], r["metric"]): (r["old_metric"], r["rank_old_metric"], r["n_instances"],
                                       json.loads(r["scores_by_length"])) for r in board.iter_rows(named=True)}
    assert got == {
        ("a", "longbench/en@0-4k"): (40.0, 1, 10, {"0-4k": 40.0}), ("b", "longbench/en@0-4k"): (35.0, 2, 10, {"0-4k": 35.0}),
        ("a", "longbench/en@4-8k"): (30.0, 2, 8, {"4-8k": 30.0}), ("b", "longbench/en@4-8k"): (32.0, 1, 10, {"4-8k": 32.0}),
        ("a", "longbench/en@8k+"): (20.0, 1, 5, {"8k+": 20.0}), ("b", "longbench/en@8k+"): (10.0, 2, 10, {"8k+": 10.0}),
        ("a", "lveval/en"): (30.0, 1, 20, {"16k": 40.0, "32k": 20.0}),  # no "longbench/en" mean of 30.0 / 25.67
    }


def test_a_single_partition_keeps_the_tables_name():
    board = benchmark_leaderboard(pl.DataFrame([overall("a", "longbench", "all", 44.0, 100)]))
    assert board["metric"].to_list() == ["longbench/en"] and board["old_metric"].to_list() == [44.0]
