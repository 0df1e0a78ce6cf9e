"""passage_index with an approximate (HNSW) index: its search breadth is tuned on the items'
questions, the queries hard_negatives asks, and the hard negatives it finds are exact search's."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.definitions import build_pipeline

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "ann",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 5}],
    "lengths": ["2k"],
    "base_lengths": ["2k"],
    "long_lengths": ["2k"],
    "retrieval_top_k": 30,
    "hard_negatives_per_item": 10,
}


def index_config(kind: str) -> dict:
    return {"ops": {"passage_index": {"config": {"kind": kind}}}}


def test_hnsw_index_is_tuned_on_questions_and_finds_the_exact_hard_negatives(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    p = build_pipeline(settings_for(tmp_path, tmp_path / "c.yaml"))
    negatives = tmp_path / "lake" / "hard_negatives" / "data.parquet"
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("source", ["demo"])
        dg.materialize(p.assets, selection=["source_documents", "source_items", "rejected_records"],
                       partition_key="demo", resources=p.resources, instance=instance)
        dg.materialize(p.assets, selection=["passages", "passage_index", "hard_negatives"], resources=p.resources,
                       instance=instance, run_config=index_config("exact"))
        exact = pl.read_parquet(negatives)

        result = dg.materialize(p.assets, selection=["passage_index", "hard_negatives"], resources=p.resources,
                                instance=instance, run_config=index_config("hnsw"))
        meta = result.asset_materializations_for_node("passage_index")[0].metadata
        items = pl.read_parquet(tmp_path / "lake" / "source_items" / "source=demo" / "data.parquet")
        assert meta["index_kind"].value == "hnsw"
        assert meta["recall_query_kind"].value == "questions"
        assert meta["recall_queries"].value == min(items.height, 1000)
        assert meta["recall_at_10"].value >= 0.95
        assert [t["efSearch"] for t in meta["tuning"].value][-1] == meta["index_params"].value["efSearch"]

        approx = pl.read_parquet(negatives)
        key = ["item_id", "passage_id"]
        shared = approx.select(key).join(exact.select(key), on=key).height
        assert approx.height == exact.height and shared >= 0.95 * exact.height
