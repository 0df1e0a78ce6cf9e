"""A published benchmark run as released: one instance per released record, its context verbatim.

The shared LongBench records (../shared/data/longbench) and small invented LongBench-E records go
through the builders the instances asset runs (construct/builders.level_batches) with a config that has
a ``released:`` section (construct/released.py): each record is one row whose context is the record's
own, whose prompt is its task's template around that context and the record's input, with its task's
answer length; LongBench-E records fall in the bucket of their released ``length``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
import yaml

from lc_pipeline import schemas
from lc_pipeline.config import ConfigError, load_config
from lc_pipeline.construct.builders import BuildError, LevelInputs, level_batches
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.loader import load_source
from lc_pipeline.tasks import catalog_for

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
LONGBENCH = SHARED / "longbench"
needs_shared = pytest.mark.skipif(not LONGBENCH.is_dir(), reason=f"shared LongBench data not found at {LONGBENCH} "
                                                                 "(set LCP_SHARED_DATA to the shared/data directory)")
COUNTER = TokenCounter.load("cl100k_base")


def write_config(tmp_path: Path, **body) -> Path:
    path = tmp_path / f"{body['name']}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def build_level(config_path: Path, level: str, meta: dict | None = None) -> pl.DataFrame:
    config = load_config(config_path)
    loaded = load_source(config.sources[0])
    empty = schemas.empty
    inputs = LevelInputs(loaded.items, loaded.documents, empty("passages"), empty("hard_negatives"),
                         empty("confusing_facts"), empty("replacement_rules"), level, config, COUNTER,
                         catalog_for(config))
    frames = list(level_batches(inputs))
    if meta is not None:
        meta.update(inputs.meta)
    return pl.concat(frames), loaded.items


def longbench_config(tmp_path: Path, data: Path, **released) -> Path:
    return write_config(tmp_path, name="longbench", sources=[{"name": "longbench", "kind": "longbench",
                                                               "paths": "$LCP_DATA/longbench"}],
                        released={"benchmark": "longbench", **released}, lengths=["all"])


@needs_shared
def test_every_shared_longbench_record_is_one_instance_with_its_released_context(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    rows, items = build_level(longbench_config(tmp_path, SHARED), "all")
    records = {}
    for f in sorted(LONGBENCH.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            records[rec["_id"]] = rec
    assert rows.height == len(records) == 136 and rows["record_id"].n_unique() == 136
    catalog = catalog_for(load_config(tmp_path / "longbench.yaml"))
    for row in rows.iter_rows(named=True):
        rec = records[row["record_id"]]
        spec = catalog.get(f"longbench/{rec['dataset']}")
        assert row["context"] == rec["context"]  # verbatim: nothing re-assembled, nothing cut
        assert row["prompt"] == QAPrompt(spec.prompt, spec.max_new_tokens).render(rec["context"], rec["input"])
        assert row["max_new_tokens"] == spec.max_new_tokens and row["task"] == rec["dataset"]
        assert row["answers"] == rec["answers"] and row["benchmark"] == "longbench" and row["suite"] == "released"
        assert row["input_tokens"] == COUNTER.count(row["prompt"]) and row["target_tokens"] is None
        assert json.loads(row["record_fields"])["dataset"] == rec["dataset"]


@needs_shared
def test_released_tasks_narrow_the_run_to_those_tasks(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    rows, _ = build_level(longbench_config(tmp_path, SHARED, tasks=["trec", "lcc"]), "all")
    assert sorted(set(rows["task"])) == ["lcc", "trec"] and rows.height == 8 + 26


def _e_record(rid: str, length: int, context: str) -> dict:
    return {"dataset": "qasper_e", "_id": rid, "language": "en", "context": context, "input": "What is studied?",
            "answers": ["parsing"], "all_classes": None, "length": length}


def test_longbench_e_records_fall_in_the_bucket_of_their_released_length(tmp_path, monkeypatch):
    data = tmp_path / "data" / "longbench-e"
    data.mkdir(parents=True)
    records = [_e_record("a", 120, "A paper on parsing."), _e_record("b", 4000, "A paper on tagging."),
               _e_record("c", 7999, "A paper on chunking."), _e_record("d", 12000, "A paper on parsing, long.")]
    (data / "qasper_e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    path = write_config(tmp_path, name="longbench-e",
                        sources=[{"name": "lbe", "kind": "longbench", "paths": "$LCP_DATA/longbench-e"}],
                        released={"benchmark": "longbench", "level_by": "record_length",
                                  "bounds": {"0-4k": [0, 4000], "4-8k": [4000, 8000], "8k+": [8000, None]}},
                        lengths=["0-4k", "4-8k", "8k+"])
    by_level = {lv: sorted(build_level(path, lv)[0]["record_id"]) for lv in ("0-4k", "4-8k", "8k+")}
    assert by_level == {"0-4k": ["a"], "4-8k": ["b", "c"], "8k+": ["d"]}


def test_a_record_in_no_level_is_counted_not_lost(tmp_path, monkeypatch):
    data = tmp_path / "data" / "x"
    data.mkdir(parents=True)
    (data / "qasper_e.jsonl").write_text("".join(json.dumps(_e_record(r, n, "Text.")) + "\n"
                                                 for r, n in (("a", 10), ("b", 50_000))))
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    path = write_config(tmp_path, name="short-only", sources=[{"name": "x", "kind": "longbench", "paths": "$LCP_DATA/x"}],
                        released={"benchmark": "longbench", "level_by": "record_length", "bounds": {"short": [0, 100]}},
                        lengths=["short"])
    meta: dict = {}
    rows, _ = build_level(path, "short", meta)
    assert rows["record_id"].to_list() == ["a"] and meta["records_outside_levels"] == 1


def test_a_task_may_run_another_tasks_records(tmp_path, monkeypatch):
    # e.g. LongBench v2's chain-of-thought mode runs the direct mode's records: builder.options.records_of
    data = tmp_path / "data" / "lb"
    data.mkdir(parents=True)
    (data / "qasper_e.jsonl").write_text(json.dumps(_e_record("a", 10, "A paper on parsing.")) + "\n")
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"benchmark": "longbench", "tasks": [{
        "name": "qasper_twice", "base": "qasper",
        "builder": {"name": "released.records", "options": {"records_of": "qasper"}},
        "prompt": "Again.\n\n{context}\n\nQ: {question}\nA:"}]}))
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    path = write_config(tmp_path, name="twice", sources=[{"name": "lb", "kind": "longbench", "paths": "$LCP_DATA/lb"}],
                        released={"benchmark": "longbench", "tasks": ["qasper", "qasper_twice"]}, lengths=["all"],
                        task_files=["mine.yaml"])
    rows, _ = build_level(path, "all")
    assert sorted(rows["task"]) == ["qasper", "qasper_twice"] and rows["instance_id"].n_unique() == 2
    assert set(rows["record_id"]) == {"a"} and rows.filter(pl.col("task") == "qasper_twice")["prompt"][0].startswith("Again.")


def test_a_source_without_released_contexts_cannot_run_as_released(tmp_path):
    path = write_config(tmp_path, name="demo-released", sources=[{"name": "demo", "kind": "demo_corpus",
                                                                  "n_entities": 20}],
                        released={"benchmark": "qa"}, lengths=["all"])
    with pytest.raises(BuildError, match=r"item 'demo-q\d+' of source 'demo': field 'context' is empty"):
        build_level(path, "all")


@pytest.mark.parametrize(("released", "lengths", "message"), [
    ({"benchmark": "longbench"}, ["a", "b"], "level_by 'one' takes one length"),
    ({"benchmark": "longbench", "level_by": "record_length", "bounds": {"a": [0, 10]}}, ["a", "b"],
     "released.bounds must give"),
    ({"benchmark": "longbench", "level_by": "by_moon"}, ["a"], "level_by 'by_moon'"),
    ({"benchmark": "nope"}, ["all"], "released.benchmark 'nope': no task file declares it"),
    ({"benchmark": "longbench", "tasks": ["qasperr"]}, ["all"], r"released.tasks: unknown \['qasperr'\]"),
])
def test_a_released_config_is_checked_when_it_loads(tmp_path, released, lengths, message):
    path = write_config(tmp_path, name="bad", sources=[{"name": "lb", "kind": "longbench", "paths": "x"}],
                        released=released, lengths=lengths)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_a_config_that_builds_instances_still_needs_token_levels_and_longscore_lengths(tmp_path):
    path = write_config(tmp_path, name="plain", sources=[{"name": "demo"}], lengths=["all"],
                        base_lengths=["all"], long_lengths=["all"])
    with pytest.raises(ConfigError, match="length level 'all'"):
        load_config(path)
    path = write_config(tmp_path, name="plain2", sources=[{"name": "demo"}], lengths=["1k"])
    with pytest.raises(ConfigError, match="base_lengths and long_lengths are required"):
        load_config(path)
