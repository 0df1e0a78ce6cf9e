"""Source partitions: a real LongBench file plus a malformed one, with `on_error: reject`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.definitions import build_pipeline

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")


def record(_id: str, **overrides) -> dict:
    base = {"dataset": "qasper", "_id": _id, "language": "en", "context": "Some paper text.", "input": "What?",
            "answers": ["text"], "all_classes": None}
    return {**base, **overrides}


def pipeline_for(tmp_path: Path, on_error: str):
    data = tmp_path / "lb"
    data.mkdir()
    rows = [record("good"), record("bad-answers", answers="text"), record("empty", context="  ")]
    (data / "qasper.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"name": "t", "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"],
              "sources": [{"name": "lb", "kind": "longbench", "paths": str(data), "on_error": on_error}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return build_pipeline(settings_for(tmp_path, tmp_path / "c.yaml"))


def materialize_sources(p, instance, raise_on_error=True):
    instance.add_dynamic_partitions("source", ["lb"])
    return dg.materialize(p.assets, selection=["source_documents", "source_items", "rejected_records"],
                          partition_key="lb", resources=p.resources, instance=instance, raise_on_error=raise_on_error)


def test_rejected_records_are_kept_with_their_reasons(tmp_path):
    p = pipeline_for(tmp_path, on_error="reject")
    with dg.instance_for_test() as instance:
        result = materialize_sources(p, instance)
        rejected = pl.read_parquet(tmp_path / "lake" / "rejected_records" / "source=lb" / "data.parquet")
        assert rejected.select("record_index", "record_id", "field").rows() == [(1, "bad-answers", "answers"),
                                                                               (2, "empty", "context")]
        items = pl.read_parquet(tmp_path / "lake" / "source_items" / "source=lb" / "data.parquet")
        assert items["item_id"].to_list() == ["lb-qasper-good"]
        meta = result.asset_materializations_for_node("sources")[1].metadata
        assert (meta["records_read"].value, meta["records_accepted"].value, meta["records_rejected"].value) == (3, 1, 2)


def test_default_policy_fails_naming_file_record_and_field(tmp_path):
    p = pipeline_for(tmp_path, on_error="fail")
    with dg.instance_for_test() as instance:
        result = materialize_sources(p, instance, raise_on_error=False)
        assert not result.success
        error = result.get_step_failure_events()[0].step_failure_data.error
        messages = [error.message, error.cause.message if error.cause else ""]  # Dagster wraps the adapter's error
        assert any("qasper.jsonl record 1 (id 'bad-answers'): field 'answers'" in m for m in messages)


@pytest.mark.skipif(not (SHARED / "longbench").exists(), reason="../shared/data/longbench is not beside the checkout")
def test_every_shared_longbench_file_loads_without_rejections(tmp_path):
    config = {"name": "t", "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"],
              "sources": [{"name": "lb", "kind": "longbench", "paths": str(SHARED / "longbench"), "on_error": "reject"}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    p = build_pipeline(settings_for(tmp_path, tmp_path / "c.yaml"))
    with dg.instance_for_test() as instance:
        materialize_sources(p, instance)
    assert pl.read_parquet(tmp_path / "lake" / "rejected_records" / "source=lb" / "data.parquet").height == 0
    assert pl.read_parquet(tmp_path / "lake" / "source_items" / "source=lb" / "data.parquet").height == 136
