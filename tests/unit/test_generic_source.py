"""Generic field-mapped adapter (JSONL / Parquet / CSV) and the Hub helper's offline errors.
No test touches the network."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lc_pipeline import schemas
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.generic import generic_source, load_generic
from lc_pipeline.sources.hub import HubError, hub_records
from lc_pipeline.sources.validation import RecordError

FIELDS = {"question": "query", "answers": "golds", "context": "ctx", "id": "qid"}


def rec(**over) -> dict:
    base = {"qid": "q1", "query": "Who wrote it?", "golds": ["Ann"], "ctx": "Ann wrote the book in 1900."}
    base.update(over)
    return base


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_records_map_to_items_and_one_document_each(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [rec(), rec(qid="q2", golds=["B", "b"], ctx="B.")])
    documents, items, [report] = load_generic(path, fields=FIELDS, source="my")
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    assert items["item_id"].to_list() == ["my-q1", "my-q2"]
    assert items["answers"].to_list() == [["Ann"], ["B", "b"]]
    assert items["evidence_doc_ids"].to_list() == [["my-q1-d1"], ["my-q2-d1"]]
    assert documents["text"].to_list() == ["Ann wrote the book in 1900.", "B."]
    assert set(items["task"].to_list()) == {"my"} and set(documents["language"].to_list()) == {"en"}
    assert report.records == report.accepted == 2 and report.consistent


def test_separator_splits_the_context(tmp_path):
    ctx = "Passage 1:\nFirst doc.\nPassage 2:\nSecond doc.\n"
    path = write_jsonl(tmp_path / "qa.jsonl", [rec(ctx=ctx)])
    documents, items, _ = load_generic(path, fields=FIELDS, source="my", separator=r"^Passage \d+:\s*$", task="mhqa")
    assert documents["text"].to_list() == ["First doc.", "Second doc."]
    assert items["evidence_doc_ids"].to_list() == [["my-q1-d1", "my-q1-d2"]]
    assert set(documents["domain"].to_list()) == {"my/mhqa"}


def test_optional_mappings_and_no_id(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [{"q": "Q?", "a": "A", "c": "C.", "lang": "zh", "t": "Title",
                                                "kw": ["A"]}])
    fields = {"question": "q", "answers": "a", "context": "c", "language": "lang", "title": "t",
              "answer_keywords": "kw"}
    documents, items, _ = load_generic(path, fields=fields, source="s", answers_format="string")
    row = items.row(0, named=True)
    assert (row["item_id"], row["answers"], row["language"], row["answer_keywords"]) == ("s-00000", ["A"], "zh", ["A"])
    assert documents["title"].to_list() == ["Title"]


def test_csv_with_json_answers(tmp_path):
    path = tmp_path / "qa.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["qid", "query", "golds", "ctx"])
        w.writeheader()
        w.writerow({"qid": "1", "query": "Q?", "golds": json.dumps(["x", "y"]), "ctx": "x y"})
        w.writerow({"qid": "2", "query": "Q2?", "golds": "not json", "ctx": "z"})
    _, items, [report] = load_generic(path, fields=FIELDS, source="c", answers_format="json", on_error="reject")
    assert items["answers"].to_list() == [["x", "y"]]
    assert report.format == "csv" and [(r.index, r.record_id, r.field) for r in report.rejected] == [(1, "2", "golds")]


def test_parquet_with_int_ids(tmp_path):
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.Table.from_pylist([rec(qid=7), rec(qid=8)]), path)
    _, items, [report] = load_generic(path, fields=FIELDS, source="p")
    assert items["item_id"].to_list() == ["p-7", "p-8"] and report.format == "parquet"


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        ({k: v for k, v in rec().items() if k != "golds"}, "golds", "mapped from 'answers'"),
        ({k: v for k, v in rec().items() if k != "ctx"}, "ctx", "mapped from 'context'"),
        ({k: v for k, v in rec().items() if k != "qid"}, "qid", "mapped from 'id'"),
        (rec(golds="Ann"), "golds", "expected a list of strings"),
        (rec(golds=[]), "golds", "empty list"),
        (rec(query=" "), "query", "blank"),
        (rec(qid="q0"), "qid", "duplicate id"),
        (rec(qid=None), "qid", "expected a string or int id"),
    ],
)
def test_bad_records_name_the_record_field(tmp_path, record, field, reason):
    path = write_jsonl(tmp_path / "qa.jsonl", [rec(qid="q0"), record])
    with pytest.raises(RecordError) as exc:
        load_generic(path, fields=FIELDS, source="s")
    assert (exc.value.file, exc.value.index, exc.value.field) == (f"{tmp_path.name}/qa.jsonl", 1, field)
    assert reason in exc.value.reason
    _, items, [report] = load_generic(path, fields=FIELDS, source="s", on_error="reject")
    assert report.records == 2 and report.accepted == 1 == len(items) and report.consistent


def test_bad_options_are_rejected_up_front(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [rec()])
    with pytest.raises(ValueError, match="must map"):
        load_generic(path, fields={"question": "query"}, source="s")
    with pytest.raises(ValueError, match="unknown keys"):
        load_generic(path, fields={**FIELDS, "answer": "x"}, source="s")
    with pytest.raises(ValueError, match="answers_format"):
        load_generic(path, fields=FIELDS, source="s", answers_format="csv")
    with pytest.raises(ValueError, match="not a valid regex"):
        load_generic(path, fields=FIELDS, source="s", separator="(")


def test_source_entry_point(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", [rec()])
    cfg = SourceConfig("gen", "generic", {"paths": [str(tmp_path / "qa.jsonl")], "fields": FIELDS,
                                          "answers_format": "list", "task": "qa"})
    documents, items, reports = generic_source(cfg)
    assert items["item_id"].to_list() == ["gen-q1"] and len(documents) == 1 and reports[0].accepted == 1
    with pytest.raises(ValueError, match="'fields'"):
        generic_source(SourceConfig("gen", "generic", {"paths": str(tmp_path)}))


# --------------------------------------------------------------------------- hub (offline only)


def test_hub_offline_error_is_clear(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as exc:
        hub_records("Infinigence/LVEval", name="hotpotwikiqa_mixup_16k", split="test")
    msg = str(exc.value)
    assert "Infinigence/LVEval" in msg and "HF_HUB_OFFLINE" in msg and "offline" in msg and "'paths'" in msg


def test_hub_option_in_generic_source_is_offline_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="offline"):
        generic_source(SourceConfig("gen", "generic", {"hf_dataset": "org/qa", "fields": FIELDS}))


def test_hub_missing_datasets_package_is_clear(monkeypatch):
    import builtins

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(HubError, match="'datasets' package is not installed"):
        hub_records("org/qa")
