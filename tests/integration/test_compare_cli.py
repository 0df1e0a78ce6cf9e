"""`lcp compare` reads two models' scores from the lake and prints, per benchmark x table x length, their scores on
the common instances, the difference with its seeded paired bootstrap interval and the permutation p-value; the
same command prints the same numbers twice; a model without scores in the lake is named in the error. (A lake of
hand-written partitions: the numbers are known; the real two-model run is in test_cli.py's round trip.)"""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline import schemas
from lc_pipeline.cli import main
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

TASKS = ("single_hop_qa", "multi_hop_qa")  # the demo's qa benchmark: the overall is the mean of its tasks
N = 10


@pytest.fixture
def lake(tmp_path, monkeypatch):
    root = tmp_path / "lake"
    for var, value in {"LCP_CONFIG": "demo", "LCP_LAKE": str(root), "LCP_MODELS": str(tmp_path / "models.yaml"),
                       "DAGSTER_HOME": str(tmp_path / ".dagster")}.items():
        monkeypatch.setenv(var, value)
    ids = [f"{t}-{k}" for t in TASKS for k in range(N)]
    instances = pl.DataFrame({"instance_id": ids, "benchmark": "qa", "task": [i.rsplit("-", 1)[0] for i in ids],
                              "variant": "plain", "record_fields": "{}"})
    write_parquet_atomic(instances, partition_path(root, "instances", {"length": "1k"}))
    for model, right in (("model-a", 8), ("model-b", 3)):  # per task: A right on 8 of 10, B on 3
        scores = pl.DataFrame({"instance_id": ids, "metric": "subem",
                               "score": [float(int(i.rsplit("-", 1)[1]) < right) for i in ids]})
        write_parquet_atomic(scores, partition_path(root, "metric_scores", {"length": "1k", "model": model}))
    return root


def compare(*args: str):
    return CliRunner().invoke(main, ["results", "compare", *args], catch_exceptions=False)


def test_compare_prints_scores_difference_interval_and_p_value_the_same_twice(lake):
    out = compare("model-a", "model-b", "--format", "json")
    assert out.exit_code == 0, out.output
    [row] = json.loads(out.output)
    assert (row["model_a"], row["model_b"]) == ("model-a", "model-b")  # a row read alone says which is which
    assert (row["benchmark"], row["length"], row["n_common"], row["only_a"], row["only_b"]) == ("qa", "1k", 20, 0, 0)
    assert (row["score_a"], row["score_b"], row["diff"]) == pytest.approx((80.0, 30.0, 50.0))
    assert 0 < row["ci_low"] < 50 < row["ci_high"] <= 100 and row["p_value"] < 0.01
    assert compare("model-a", "model-b", "--format", "json").output == out.output  # seeded
    other = json.loads(compare("model-a", "model-b", "--format", "json", "--seed", "1").output)[0]
    assert other["diff"] == row["diff"] and other["ci_low"] < 50 < other["ci_high"]  # other draws, same difference
    table = compare("model-a", "model-b", "--draws", "200")
    assert "ci_low" in table.output and "p_value" in table.output and "(1 rows)" in table.output
    assert "model_a" not in table.output  # the table's header line names them once


def test_a_model_without_scores_in_the_lake_is_named(lake):
    out = CliRunner().invoke(main, ["results", "compare", "model-a", "nobody"])
    assert out.exit_code != 0 and "model 'nobody' has no metric_scores partition" in out.output
    write_parquet_atomic(schemas.empty("metric_scores").select("instance_id"),
                         partition_path(lake, "generations", {"length": "2k", "model": "model-a"}))
    out = CliRunner().invoke(main, ["results", "compare", "model-a", "model-b"])
    assert "model 'model-a' has generations but no metric_scores at length(s) ['2k']" in out.output
