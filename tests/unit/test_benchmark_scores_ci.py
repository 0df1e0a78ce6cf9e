"""benchmark_scores' intervals and shares (score/benchmark_scores.py, score/confidence.py): every score row has a
seeded percentile-bootstrap interval that resamples instances within each task cell and recomputes the row as the
row is computed, the same for every model scored on the same instances; a row of single-instance cells and the
judge's rate rows have none. The shares count the generations' statuses over the row's instances (skipped and
invalid ones have no score but count there; a task whose instances were all skipped still gets its rows). The
released leaderboard derives its mean's interval from the lengths' intervals and pools their shares."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from lc_pipeline.score import confidence
from lc_pipeline.score.benchmark_scores import benchmark_leaderboard, benchmark_table
from lc_pipeline.tasks.catalog import load_catalog

CATALOG = load_catalog()
# LV-Eval (mean of tasks): two tasks with six instances each, and one with a single instance.
LVEVAL = [("loogle_SD_mixup", [1, 0, 1, 1, 0, 1]), ("cmrc_mixup", [0.2, 0.4, 0.1, 0.9, 0.5, 0.0]),
          ("hotpotwikiqa_mixup", [0.7])]


def lveval_frames(cells=LVEVAL, length: str = "16k") -> tuple[pl.DataFrame, pl.DataFrame]:
    ids, tasks, values = [], [], []
    for task, scores in cells:
        for k, v in enumerate(scores):
            ids.append(f"{task}-{k:02d}")
            tasks.append(task)
            values.append(float(v))
    instances = pl.DataFrame({"instance_id": ids, "benchmark": "lveval", "task": tasks, "length": length})
    return pl.DataFrame({"instance_id": ids, "metric": "lveval", "score": values}), instances


def row(table: pl.DataFrame, **where) -> dict:
    [out] = table.filter(*(pl.col(k).is_null() if v is None else pl.col(k) == v for k, v in where.items())).to_dicts()
    return out


def test_every_score_row_has_an_interval_around_its_score_and_the_same_one_twice():
    scores, instances = lveval_frames()
    table = benchmark_table(scores, instances, CATALOG, "m").table
    for level, task in (("task", "loogle_SD_mixup"), ("task", "cmrc_mixup"), ("overall", None)):
        r = row(table, level=level, task=task)
        assert r["ci_low"] < r["score"] < r["ci_high"], r
    again = benchmark_table(scores, instances, CATALOG, "m").table
    assert again.select("ci_low", "ci_high").equals(table.select("ci_low", "ci_high"))


def test_the_overall_interval_is_the_rows_own_aggregation_recomputed_on_each_cells_resamples():
    scores, instances = lveval_frames()
    overall = row(benchmark_table(scores, instances, CATALOG, "m", draws=500).table, level="overall")
    # mean_of_tasks: each draw is the mean of the three task means, each task resampled on its own (instance_id
    # order, seeded by the cell, not by the model); the one-instance task stays fixed.
    means = [confidence.bootstrap_mean_draws(np.array(v, float), 500,
                                             confidence.rng_for("benchmark_scores", "lveval", "16k", t, "lveval", ""))
             for t, v in LVEVAL]
    low, high = confidence.percentile_interval(100 * sum(means) / 3)
    assert (overall["ci_low"], overall["ci_high"]) == pytest.approx((low, high))
    # LV-Eval rounds each task score to 2 decimals first (headline round: 2); the interval is of the unrounded
    assert overall["score"] == pytest.approx((66.67 + 35.0 + 70.0) / 3)


def test_two_models_scored_on_the_same_instances_get_the_same_resamples():
    scores, instances = lveval_frames()
    a = benchmark_table(scores, instances, CATALOG, "model-a").table
    b = benchmark_table(scores, instances, CATALOG, "model-b").table
    assert a.drop("model").equals(b.drop("model"))


def test_a_row_of_single_instance_cells_and_the_judges_rates_have_no_interval():
    scores, instances = lveval_frames([("loogle_SD_mixup", [1]), ("cmrc_mixup", [0.5])])
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert table["ci_low"].is_null().all() and table["ci_high"].is_null().all()
    instances = pl.DataFrame({"instance_id": ["a", "b", "c"], "benchmark": "loong", "task": "comparison",
                              "length": "set1"})
    judge = pl.DataFrame({"instance_id": ["a", "b", "c"], "rubric": "loong", "score": [1.0, 0.5, None],
                          "parse_status": ["ok", "ok", "no_score"], "perfect": [True, False, None]})
    no_scores = pl.DataFrame(schema={"instance_id": pl.String, "metric": pl.String, "score": pl.Float64})
    loong = benchmark_table(no_scores, instances, CATALOG, "m", judge).table
    verdict = row(loong, level="overall", metric="judge:loong", length="set1")
    assert verdict["n"] == 2 and verdict["ci_low"] == pytest.approx(50) and verdict["ci_high"] == pytest.approx(100)
    rates = loong.filter(pl.col("metric").is_in(["scoring_success", "perfect_rate"]))
    assert rates.height == 12 and rates["ci_low"].is_null().all()  # set1 and over every set ([all]): 6 each


def generations(statuses: dict[str, str], truncated: set[str] = frozenset()) -> pl.DataFrame:
    return pl.DataFrame({"instance_id": list(statuses), "status": list(statuses.values()),
                         "truncated": [i in truncated for i in statuses], "output": "x", "finish_reason": "stop"})


def test_shares_count_the_rows_instances_statuses_and_unsent_instances_count_there_not_in_the_score():
    scores, instances = lveval_frames([("loogle_SD_mixup", [1, 0, 1, 1]), ("cmrc_mixup", [0.5, 0.5])])
    statuses = {"loogle_SD_mixup-00": "answered", "loogle_SD_mixup-01": "cut", "loogle_SD_mixup-02": "answered",
                "loogle_SD_mixup-03": "empty", "cmrc_mixup-00": "answered", "cmrc_mixup-01": "answered",
                "cmrc_mixup-02": "skipped", "cmrc_mixup-03": "invalid"}  # the last two have no metric row
    instances = pl.concat([instances, pl.DataFrame({"instance_id": ["cmrc_mixup-02", "cmrc_mixup-03"],
                                                    "benchmark": "lveval", "task": "cmrc_mixup", "length": "16k"})])
    scores = scores.with_columns(status=pl.when(pl.col("instance_id") == "loogle_SD_mixup-02")
                                 .then(pl.lit("unparsable")).otherwise(pl.lit("answered")))
    result = benchmark_table(scores, instances, CATALOG, "m", generations=generations(statuses, {"cmrc_mixup-00"}))
    cmrc = row(result.table, level="task", task="cmrc_mixup")
    assert cmrc["score"] == pytest.approx(50) and cmrc["n"] == 2
    assert (cmrc["skipped_share"], cmrc["truncated_share"]) == (0.25, 0.25)
    assert json.loads(cmrc["status_counts"]) == {"answered": 2, "empty": 0, "cut": 0, "unparsable": 0,
                                                 "skipped": 1, "invalid": 1}
    overall = row(result.table, level="overall")
    assert json.loads(overall["status_counts"]) == {"answered": 3, "empty": 1, "cut": 1, "unparsable": 1,
                                                    "skipped": 1, "invalid": 1}
    assert overall["skipped_share"] == 1 / 8 and overall["truncated_share"] == 1 / 8
    assert result.unscored == {}  # not sent is not missing
    # Without generations the shares are unknown, the scores the same.
    bare = benchmark_table(scores, instances, CATALOG, "m").table
    assert bare["skipped_share"].is_null().all() and bare["status_counts"].is_null().all()
    assert bare["score"].equals(result.table["score"])


def test_a_task_whose_every_instance_was_skipped_still_shows_its_rows():
    scores, instances = lveval_frames([("loogle_SD_mixup", [1, 0])], length="16k")
    skipped = pl.DataFrame({"instance_id": ["s0", "s1"], "benchmark": "lveval", "task": "loogle_SD_mixup",
                            "length": "32k"})
    result = benchmark_table(scores, pl.concat([instances, skipped]), CATALOG, "m",
                             generations=generations({"loogle_SD_mixup-00": "answered", "loogle_SD_mixup-01": "answered",
                                                      "s0": "skipped", "s1": "skipped"}))
    at32 = result.table.filter(pl.col("length") == "32k")
    assert set(at32["level"]) == {"task", "group", "overall"}
    assert at32["score"].is_null().all() and (at32["n"] == 0).all() and (at32["skipped_share"] == 1.0).all()
    assert row(result.table, length="16k", level="overall")["skipped_share"] == 0.0


def overall_row(model: str, length: str, score: float, ci: tuple, counts: dict | None = None,
                truncated: float | None = None) -> dict:
    return {"model": model, "benchmark": "lveval", "table": "all", "level": "overall", "task": None,
            "category": None, "length": length, "metric": "lveval", "score": score, "n": 10,
            "aggregation": "mean_of_tasks", "ci_low": ci[0], "ci_high": ci[1], "truncated_share": truncated,
            "status_counts": None if counts is None else json.dumps(counts)}


def test_the_released_leaderboard_interval_and_shares_come_from_its_lengths():
    one = benchmark_leaderboard(pl.DataFrame([overall_row("a", "16k", 40.0, (30.0, 52.0))]))
    assert (one["ci_low"][0], one["ci_high"][0]) == (30.0, 52.0)  # one length: its own interval
    two = benchmark_leaderboard(pl.DataFrame([
        overall_row("a", "16k", 40.0, (34.0, 48.0), {"answered": 8, "skipped": 2}, 0.1),
        overall_row("a", "32k", 20.0, (12.0, 26.0), {"answered": 5, "invalid": 5}, 0.0)]))
    r = two.row(0, named=True)
    assert r["old_metric"] == 30.0
    assert r["ci_low"] == pytest.approx(30 - np.hypot(6, 8) / 2) and r["ci_high"] == pytest.approx(30 + np.hypot(8, 6) / 2)
    assert (r["skipped_share"], r["invalid_share"], r["truncated_share"], r["n_unpaired"]) == (0.1, 0.25, 0.05, 0)
    unknown = benchmark_leaderboard(pl.DataFrame([overall_row("a", "16k", 40.0, (None, None))]))
    assert unknown["ci_low"].is_null().all() and unknown["skipped_share"].is_null().all()
