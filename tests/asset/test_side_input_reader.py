"""An asset that reads a lake table instead of loading it as an input declares it, with its reason, and reads it
through a SideInputReader that holds it to that declaration (issue 32: every table an asset reads is a declared
input or an explicitly documented side input)."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline.assets.side_inputs import SIDE_INPUTS, SideInputs
from lc_pipeline.assets.versions import declared
from lc_pipeline.lake_files import SideInputReader, UndeclaredSideInput
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic


@pytest.fixture
def lake(tmp_path):
    """metric_scores of two models at one length, and one model's prior_knowledge dropping item q1."""
    base = tmp_path / "data_lake"
    for model, score in (("a", 1.0), ("b", 0.0)):
        write_parquet_atomic(pl.DataFrame({"instance_id": ["i1"], "item_id": ["q1"], "metric": ["f1"],
                                           "score": [score]}),
                             partition_path(base, "metric_scores", {"length": "1k", "model": model}))
    write_parquet_atomic(pl.DataFrame({"item_id": ["q1", "q2"], "dropped": [True, False]}),
                         partition_path(base, "prior_knowledge", {"model": "a"}))
    return base


def test_a_declared_table_is_read_with_its_partition_columns(lake):
    reads = SideInputReader(lake, {"metric_scores"}, "leaderboard")
    rows = reads.model_partitions("metric_scores").sort("model")
    assert rows.select("model", "length", "score").rows() == [("a", "1k", 1.0), ("b", "1k", 0.0)]
    assert reads.table("metric_scores").height == 2


def test_reading_a_table_the_asset_did_not_declare_names_the_asset_and_the_table(lake):
    reads = SideInputReader(lake, {"metric_scores"}, "leaderboard")
    with pytest.raises(UndeclaredSideInput, match=r"asset 'leaderboard' reads \['prior_knowledge'\].*declares only "
                                                  r"\['metric_scores'\]"):
        reads.dropped_items(["a"])


def test_verdicts_with_drops_need_prior_knowledge_declared_too(lake):
    with pytest.raises(UndeclaredSideInput, match="prior_knowledge"):
        SideInputReader(lake, {"judge_scores"}, "benchmark_scores").judge_scores("a")
    assert SideInputReader(lake, {"judge_scores"}, "long_scores").judge_scores("a", respect_drops=False).is_empty()


def test_the_items_a_model_dropped_are_read_from_its_prior_knowledge_partition(lake):
    assert SideInputReader(lake, {"prior_knowledge"}, "leaderboard").dropped_items(["a", "b"]) == {"a": ["q1"]}


def test_a_declaration_makes_each_table_a_dependency_and_shows_its_reason():
    kwargs = declared("1", ("lengths",), side_inputs=SideInputs({"judge_scores": "optional: judging may not have run"}))
    assert [dep.asset_key.to_user_string() for dep in kwargs["deps"]] == ["judge_scores"]
    assert kwargs["metadata"][SIDE_INPUTS].value == {"judge_scores": "optional: judging may not have run"}


def test_a_side_input_without_a_reason_is_refused():
    with pytest.raises(ValueError, match=r"\['generations'\] need the reason"):
        SideInputs({"generations": " "})
    with pytest.raises(ValueError, match="not side inputs"):
        SideInputs({"generations": "statuses"}, {"instances": "every partition"})
    with pytest.raises(ValueError, match="unknown side input mappings"):
        SideInputs({"generations": "statuses"}, {"generations": "some partitions"})
