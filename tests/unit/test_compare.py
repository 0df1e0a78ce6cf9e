"""Two models compared on their common instances (score/compare.py): the scores are the benchmark's overall on
those instances, the difference's interval comes from the same resamples for both models and the p-value from a
seeded paired sign-flip test; identical models differ by 0 with p = 1, a clearly better one has p < 0.05, and
the instances one model has and the other lacks are counted, not compared."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from lc_pipeline.score import confidence
from lc_pipeline.score.benchmark_scores import benchmark_table, scored_instances
from lc_pipeline.score.compare import COLUMNS, compare_models
from lc_pipeline.tasks.catalog import load_catalog

CATALOG = load_catalog()
TASKS = ("loogle_SD_mixup", "cmrc_mixup")  # LV-Eval: the level score is the mean of the task scores
N = 20
IDS = [f"{t}-{k:02d}" for t in TASKS for k in range(N)]
INSTANCES = pl.DataFrame({"instance_id": IDS, "benchmark": "lveval", "task": [i.rsplit("-", 1)[0] for i in IDS],
                          "length": "16k"})


def model(values, drop: tuple[str, ...] = ()):
    scores = pl.DataFrame({"instance_id": IDS, "metric": "lveval", "score": [float(v) for v in values]})
    scores = scores.filter(~pl.col("instance_id").is_in(list(drop)))
    return scores, scored_instances(scores, INSTANCES, CATALOG)


def noisy(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(size=len(IDS)).round(2)


def test_identical_models_differ_by_zero_with_p_one():
    _, a = model(noisy(1))
    [row] = compare_models(a, a).to_dicts()
    assert (row["diff"], row["ci_low"], row["ci_high"], row["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert (row["n_common"], row["only_a"], row["only_b"]) == (2 * N, 0, 0)


def test_a_clearly_better_model_has_a_small_p_value_and_an_interval_above_zero():
    _, a = model(np.clip(noisy(1) + 0.3, 0, 1))
    _, b = model(noisy(1))
    [row] = compare_models(a, b).to_dicts()
    assert row["diff"] > 0 and 0 < row["ci_low"] <= row["diff"] <= row["ci_high"]
    assert row["p_value"] < 0.05 and row["p_value"] >= 1 / (confidence.DRAWS + 1)


def test_each_score_is_the_benchmarks_overall_on_the_common_instances():
    scores_a, a = model(noisy(1))
    _, b = model(noisy(2), drop=("cmrc_mixup-03", "loogle_SD_mixup-07"))
    [row] = compare_models(a, b).to_dicts()
    assert (row["n_common"], row["only_a"], row["only_b"]) == (2 * N - 2, 2, 0)
    common = scores_a.filter(~pl.col("instance_id").is_in(["cmrc_mixup-03", "loogle_SD_mixup-07"]))
    overall = benchmark_table(common, INSTANCES, CATALOG, "a").table.filter(pl.col("level") == "overall")
    assert row["score_a"] == pytest.approx(overall["score"][0])
    assert row["diff"] == pytest.approx(row["score_a"] - row["score_b"])
    assert (row["benchmark"], row["table"], row["length"], row["metric"]) == ("lveval", "all", "16k", "lveval")


def test_the_bootstrap_and_the_test_are_seeded():
    _, a = model(noisy(1))
    _, b = model(noisy(2))
    first, again = compare_models(a, b, seed=7), compare_models(a, b, seed=7)
    assert first.equals(again) and first.columns == list(COLUMNS)
    other = compare_models(a, b, seed=8)
    assert other["diff"].equals(first["diff"])
    assert (other["ci_low"][0], other["p_value"][0]) != (first["ci_low"][0], first["p_value"][0])


def test_a_length_only_one_model_has_is_reported_without_a_comparison():
    _, a = model(noisy(1))
    _, b = model(noisy(2), drop=tuple(IDS))
    [row] = compare_models(a, b).to_dicts()
    assert (row["n_common"], row["only_a"], row["only_b"]) == (0, 2 * N, 0)
    assert row["diff"] is None and row["p_value"] is None
