"""Bad input: malformed source records, configs, model settings, instances and command lines.
Each one is an error naming the record (or model, or config) and the field, or, for a source
with ``on_error: reject``, a ``rejected_records`` row saying the same; nothing is dropped
silently: records read = accepted + rejected."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for
from fault_server import FaultyOpenAIServer
from lake_world import make_world, served_model

from lc_pipeline.config import ConfigError, load_config
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.partition import plan_partition
from lc_pipeline.generate.registry import ModelRegistry, ModelSpecError
from lc_pipeline.sources.validation import MAX_FIELD_CHARS

CONTEXT = "Passage 1:\nRiver Ada\nThe Ada flows north past Bel.\nPassage 2:\nBel\nBel is a town on the Ada."


def hotpot(rid: str, **changes) -> dict:
    """A LongBench hotpotqa record (its multi-document layout), with ``changes`` applied."""
    record = {"dataset": "hotpotqa", "_id": rid, "language": "en", "context": CONTEXT,
              "input": "Which river flows past Bel?", "answers": ["Ada"], "all_classes": None}
    record.update(changes)
    return {k: v for k, v in record.items() if v is not ...}  # ``...``: leave the field out


def line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"


# line index -> (raw JSONL line, expected field, words of the expected reason)
MALFORMED: dict[int, tuple[bytes, str, str]] = {
    1: (line(hotpot("wrong-type", answers=42)), "answers", "expected a list of strings, got int"),
    2: (line(hotpot("missing", input=...)), "input", "missing"),
    3: (line(hotpot("empty", context="   ")), "context", "empty (blank) string"),
    4: (line(hotpot("huge", context=CONTEXT + "x" * MAX_FIELD_CHARS)), "context", "a field may hold"),
    5: (line(hotpot("bad-utf8")).replace(b"River Ada", b"River \xff\xfeAda"), "<record>",
        "undecodable bytes (not UTF-8)"),
    6: (line(hotpot("good-1")), "_id", "duplicate id, first seen at record 0"),
    7: (line(hotpot("cut-off"))[:60] + b"\n", "<record>", "invalid JSON"),
    8: (b'["hotpotqa", "a list, not a record"]\n', "<record>", "expected an object (mapping), got list"),
    9: (line(hotpot("null-context", context=None)), "context", "expected a string, got null"),
    10: (line(hotpot("unknown-task", dataset="hotpotqa_v9")), "dataset", "unknown LongBench task 'hotpotqa_v9'"),
    11: (line(hotpot("list-element", answers=["Ada", 3])), "answers", "element 1 is int"),
    12: (line(hotpot("language", language="fr")), "language", "expected 'en' or 'zh', got 'fr'"),
    13: (line(hotpot("negative-length", length=-5)), "length", "expected a non-negative int, got -5"),
    14: (line(hotpot("no-layout", context="Just one block of text about the Ada.")), "context",
         "no 'Passage N:' header"),
}


def source_file(directory: Path) -> Path:
    """Two good records around the malformed ones, and a blank line (which holds no record)."""
    lines = [line(hotpot("good-1")), *(MALFORMED[i][0] for i in sorted(MALFORMED)), b"\n", line(hotpot("good-2"))]
    path = directory / "hotpotqa.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def sources_pipeline(tmp_path: Path, on_error: str):
    data = source_file(tmp_path)
    config = {"name": "bad-input", "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"],
              "sources": [{"name": "lb", "kind": "longbench", "paths": str(data), "on_error": on_error}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return build_pipeline(settings_for(tmp_path, tmp_path / "c.yaml"))


def materialize_sources(pipeline, instance, raise_on_error=True):
    instance.add_dynamic_partitions("source", ["lb"])
    return dg.materialize(pipeline.assets, selection=["source_documents", "source_items", "rejected_records"],
                          partition_key="lb", resources=pipeline.resources, instance=instance,
                          raise_on_error=raise_on_error)


def test_each_malformed_record_is_a_rejected_records_row(tmp_path):
    pipeline = sources_pipeline(tmp_path, on_error="reject")
    with dg.instance_for_test() as instance:
        result = materialize_sources(pipeline, instance)
    rejected = pl.read_parquet(tmp_path / "lake" / "rejected_records" / "source=lb" / "data.parquet")
    got = {r["record_index"]: (r["field"], r["reason"]) for r in rejected.iter_rows(named=True)}
    assert sorted(got) == sorted(MALFORMED)  # one row per malformed record, none missing, none extra
    for index, (_, field, reason) in MALFORMED.items():
        assert got[index][0] == field and reason in got[index][1], (index, got[index])
    assert len(got[4][1]) < 200  # the reason describes the huge value; it does not carry it

    items = pl.read_parquet(tmp_path / "lake" / "source_items" / "source=lb" / "data.parquet")
    assert items["item_id"].to_list() == ["lb-hotpotqa-good-1", "lb-hotpotqa-good-2"]
    meta = result.asset_materializations_for_node("sources")[1].metadata
    read, accepted, n_rejected = (meta[k].value for k in ("records_read", "records_accepted", "records_rejected"))
    assert (read, accepted, n_rejected) == (len(MALFORMED) + 2, 2, len(MALFORMED))


def test_a_strict_source_fails_at_the_first_malformed_record_naming_it(tmp_path):
    pipeline = sources_pipeline(tmp_path, on_error="fail")
    with dg.instance_for_test() as instance:
        result = materialize_sources(pipeline, instance, raise_on_error=False)
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    messages = [error.message, error.cause.message if error.cause else ""]  # Dagster wraps the adapter's error
    assert any("hotpotqa.jsonl record 1 (id 'wrong-type'): field 'answers'" in m for m in messages), messages
    assert not (tmp_path / "lake" / "source_items").exists()  # nothing half-loaded was written


# ----------------------------------------------------------------------------- configs

GOOD_CONFIG = {"name": "cfg", "sources": [{"name": "demo"}], "lengths": ["1k", "2k"], "base_lengths": ["1k"],
               "long_lengths": ["2k"]}

BAD_CONFIGS = {
    "unknown length label": ({"lengths": ["1k", "2q"], "long_lengths": ["1k"]}, "length level '2q'"),
    "negative depth": ({"depths": [0.0, -0.5]}, "depth -0.5 is outside [0, 1]"),
    "depth of the wrong type": ({"depths": ["half"]}, "field 'depths': element 0: expected a number, got 'half'"),
    "count of the wrong type": ({"items_per_length": "four"}, "field 'items_per_length': expected an integer"),
    "a string for a list of lengths": ({"lengths": "1k"}, "field 'lengths': expected a list, got '1k'"),
    "a string for a list of models": ({"models": "smollm2-135m"}, "field 'models': expected a list"),
    "missing lengths": ({"lengths": None}, "field 'lengths': expected a list, got None"),
    "base length not a level": ({"base_lengths": ["4k"]}, "base_lengths ['4k'] are not in lengths"),
    "flag of the wrong type": ({"cross_domain_fill": "yes"}, "field 'cross_domain_fill': expected true or false"),
    "section field of the wrong type": ({"helmet": {"tasks": ["rag"], "n_per_task": "2"}},
                                        "field 'helmet.n_per_task': expected an integer, got '2'"),
    "negative answer budget": ({"max_new_tokens": -3}, "max_new_tokens, passage_words and retrieval_top_k must be >= 1"),
    "unknown length unit": ({"length_unit": "pages"}, "length_unit 'pages'"),
    "unknown key": ({"lenghts": ["1k"]}, "unknown keys ['lenghts']"),
    "source without a name": ({"sources": [{"kind": "demo_corpus"}]}, "each source needs at least a 'name'"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_a_malformed_config_is_an_error_naming_the_field(tmp_path, case):
    changes, expected = BAD_CONFIGS[case]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**GOOD_CONFIG, **changes}))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert expected in str(err.value)


def test_plain_token_counts_are_levels_even_unquoted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: cfg\nsources: [{name: demo}]\nlengths: [512, 1k]\nbase_lengths: [512]\nlong_lengths: [1k]\n")
    assert load_config(path).lengths == ("512", "1k")


# ----------------------------------------------------------------------------- model settings

BAD_MODELS = {
    "wrong type": ({"max_model_len": "big"}, "model 'm', field 'max_model_len': expected int, got 'big'"),
    "unknown backend": ({"backend": "tensorrt"}, "model 'm', field 'backend': unknown backend 'tensorrt'"),
    "missing field": ({"model_id": ...}, "model 'm', field 'model_id': required field is missing"),
    "negative retries": ({"max_retries": -1}, "model 'm', field 'max_retries': must be >= 0"),
    "unknown field": ({"temprature": 0.2}, "model 'm', field 'temprature': unknown field"),
    "a key where its variable's name belongs": ({"api_key_env": "sk-pasted-by-mistake-123456"},
                                                "model 'm', field 'api_key_env': must be the *name*"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_a_malformed_model_entry_is_an_error_naming_model_and_field(tmp_path, case):
    changes, expected = BAD_MODELS[case]
    settings = {"backend": "openai", "model_id": "served", "max_model_len": 4096, **changes}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"m": {k: v for k, v in settings.items() if v is not ...}}))
    with pytest.raises(ModelSpecError) as err:
        ModelRegistry(tmp_path / "models.yaml").get("m")
    assert expected in str(err.value)
    assert "sk-pasted" not in str(err.value)  # a key pasted into the wrong field is not repeated


# ----------------------------------------------------------------------------- instances and command lines


@pytest.mark.parametrize(("column", "value", "expected"), [
    ("prompt", None, "instance 'inst-1': field 'prompt' is null"),
    ("max_new_tokens", None, "instance 'inst-1': field 'max_new_tokens' is null"),
    ("context", ..., "instances: missing columns ['context'] needed for generation"),
])
def test_instances_with_a_missing_or_null_field_are_not_generated(column, value, expected):
    frame = pl.DataFrame({"instance_id": ["inst-0", "inst-1"], "benchmark": ["qa"] * 2, "task": ["single_hop_qa"] * 2,
                          "prompt": ["Which river?", "Which town?"], "context": ["a", "b"], "max_new_tokens": [8, 8]})
    if value is ...:
        frame = frame.drop(column)
    else:
        frame = frame.with_columns(pl.when(pl.col("instance_id") == "inst-1").then(value).otherwise(pl.col(column))
                                   .alias(column))
    generator = make_generator(served_model("m", "http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        plan_partition(frame, generator.spec, generator)


def test_lcp_backfill_refuses_unknown_levels_and_models_before_running(tmp_path):
    world = make_world(tmp_path / "project", per_length=2)
    with FaultyOpenAIServer() as server:
        world.add_model(served_model("served", server.url))
        level = world.lcp("backfill", "--model", "served", "--length", "3k")
        model = world.lcp("backfill", "--model", "nobody")
        assert server.received == []  # refused before any request
    assert level.returncode == 1 and "--length ['3k']: not a length level of config" in level.stderr
    assert "its levels: ['1k', '2k']" in level.stderr and "Traceback" not in level.stderr
    assert model.returncode == 1 and "unknown model 'nobody'" in model.stderr and "Traceback" not in model.stderr
    assert not (world.lake / "generations").exists()


def test_a_backfill_of_one_length_waits_for_the_rest_before_long_scores(tmp_path):
    """``--length 1k`` alone scores 1k; LongScore (it needs every length) waits, and the backfill of
    the remaining length then completes it — no traceback on the way."""
    world = make_world(tmp_path / "project", per_length=2)
    with FaultyOpenAIServer() as server:
        world.add_model(served_model("served", server.url))
        first = world.lcp("backfill", "--model", "served", "--length", "1k")
        assert first.returncode == 0, first.stderr[-2000:]
        assert "waiting for lengths ['2k']" in first.stdout + first.stderr and "Traceback" not in first.stderr
        assert not (world.lake / "long_scores").exists()
        second = world.lcp("backfill", "--model", "served", "--length", "2k")
        assert second.returncode == 0, second.stderr[-2000:]
    assert (world.lake / "long_scores" / "model=served" / "data.parquet").exists()
    assert {p.parent.parent.name for p in (world.lake / "metric_scores").rglob("data.parquet")} == {"length=1k",
                                                                                                  "length=2k"}
