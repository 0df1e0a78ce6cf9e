"""LV-Eval adapter: synthetic records in the released format (spec lveval.md §3), in the
containers the release and its mirrors use (JSONL, JSON list, Parquet). No LV-Eval data is
shared, so nothing here needs ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.lveval.sources import load_lveval, lveval_source, split_name
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.hub import HubError
from lc_pipeline.sources.validation import RecordError

CONTEXT = "### Passage 1\nAlpha was born in 1901.\n### Passage 2\nBeta lives in Paris.\n### Passage 3\nGamma.\n"


def rec(**over) -> dict:
    base = {"input": "When was Alpha born?", "context": CONTEXT, "answers": ["1901"], "length": 12,
            "dataset": "hotpotwikiqa_mixup_16k", "language": "en", "answer_keywords": "1901",
            "confusing_facts": "Alpha was born in 1910 according to rumours.", "all_classes": None}
    base.update(over)
    return base


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_split_name():
    assert split_name("hotpotwikiqa_mixup_16k") == ("hotpotwikiqa_mixup", "16k")
    assert split_name("factrecall-zh_256k") == ("factrecall_zh", "256k")
    assert split_name("loogle_mr_mixup_32k") == ("loogle_MIR_mixup", "32k")  # the paper's name, the release's task
    assert split_name("loogle_MR_mixup") == ("loogle_MIR_mixup", None)
    assert split_name("whatever") == ("whatever", None)


def test_mixed_context_is_split_into_passages(tmp_path):
    path = write_jsonl(tmp_path / "hotpotwikiqa_mixup_16k.jsonl", [rec(), rec(input="Where does Beta live?",
                                                                          answers=["Paris"], answer_keywords="Paris")])
    documents, items, [report] = load_lveval(path, source="lv")
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    first = items.row(0, named=True)
    assert first["item_id"] == "lv-hotpotwikiqa_mixup_16k-00000"
    assert (first["task"], first["category"], first["hops"]) == ("hotpotwikiqa_mixup", "multi-hop QA", 2)
    assert first["answer_keywords"] == ["1901"] and first["answers"] == ["1901"]
    # every passage is a document and (LV-Eval has no gold-passage labels) evidence
    assert first["evidence_doc_ids"] == [f"{first['item_id']}-p{n}" for n in (1, 2, 3)]
    docs = documents.filter(documents["doc_id"].str.starts_with(first["item_id"]))
    assert docs["text"].to_list() == ["Alpha was born in 1901.", "Beta lives in Paris.", "Gamma."]
    assert set(docs["domain"].to_list()) == {"lveval/hotpotwikiqa_mixup"}
    notes = " ".join(report.notes)
    assert "level 16k (from the file name)" in notes and "confusing_facts present in 2 records" in notes
    assert items["confusing_facts"].to_list() == [["Alpha was born in 1910 according to rumours."]] * 2
    assert report.records == report.accepted == 2 and report.consistent


def test_each_item_keeps_its_record_as_released(tmp_path):
    # The release's records have no id: file and position name them; an export's _id wins.
    write_jsonl(tmp_path / "hotpotwikiqa_mixup_16k.jsonl", [rec(), rec(input="Where does Beta live?")])
    write_jsonl(tmp_path / "cmrc_mixup_32k.jsonl", [
        rec(dataset="cmrc_mixup_32k", language="zh", answer_keywords=None, confusing_facts=None, length=None,
            _id="x7", context="第一篇。\n第二篇。", input="问题？", answers=["答案"])])
    _, items, _ = load_lveval(tmp_path, source="lv")
    rows = {r["item_id"]: r for r in items.iter_rows(named=True)}
    second = rows["lv-hotpotwikiqa_mixup_16k-00001"]
    assert second["record_id"] == "hotpotwikiqa_mixup_16k-00001"
    assert second["context"] == CONTEXT  # verbatim: headers, confusing facts and all
    assert json.loads(second["record_fields"]) == {"dataset": "hotpotwikiqa_mixup", "level": "16k", "index": 1,
                                                   "length": 12}
    cmrc = rows["lv-cmrc_mixup_32k-x7"]
    assert cmrc["record_id"] == "x7" and cmrc["context"] == "第一篇。\n第二篇。"
    assert json.loads(cmrc["record_fields"]) == {"dataset": "cmrc_mixup", "level": "32k", "index": 0}


def test_paper_header_and_unheaded_contexts(tmp_path):
    path = write_jsonl(tmp_path / "cmrc_mixup_32k.jsonl", [
        rec(dataset="cmrc_mixup_32k", language="zh", answer_keywords=None, confusing_facts=None,
            context="Passage 1\n第一篇。\nPassage 2\n第二篇。", input="问题？", answers=["答案"]),
    ])
    documents, items, _ = load_lveval(path, source="lv")
    assert documents["text"].to_list() == ["第一篇。", "第二篇。"]
    assert items["answer_keywords"].to_list() == [[]]  # cmrc has no answer keywords (spec §2)
    path = write_jsonl(tmp_path / "factrecall_en_16k.jsonl", [
        rec(dataset="factrecall_en_16k", answer_keywords=None, context="A long book. The needle. More book.")])
    documents, items, [_report] = load_lveval(path, source="lv")
    assert len(documents) == 1 and items["category"].to_list() == ["single-hop QA"]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_json_and_parquet_containers(tmp_path, fmt):
    records = [rec(dataset="hotpotwikiqa_mixup_64k"),
               rec(dataset="hotpotwikiqa_mixup_64k", input="Q2?", answers=["Paris"], answer_keywords="Paris")]
    path = tmp_path / f"hotpotwikiqa_mixup_64k.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(records), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(records), path)
    documents, items, [report] = load_lveval(path, source="lv")
    assert report.format == fmt and len(items) == 2 and len(documents) == 6


def test_directory_of_levels_gives_one_item_per_level(tmp_path):
    for level in ("16k", "32k"):
        write_jsonl(tmp_path / f"hotpotwikiqa_mixup_{level}.jsonl", [rec(dataset=f"hotpotwikiqa_mixup_{level}")])
    documents, items, reports = load_lveval(tmp_path, source="lv")
    assert items["item_id"].to_list() == ["lv-hotpotwikiqa_mixup_16k-00000", "lv-hotpotwikiqa_mixup_32k-00000"]
    assert len(reports) == 2 and documents["doc_id"].is_unique().all()


def test_level_from_records_when_the_file_name_has_none(tmp_path):
    path = write_jsonl(tmp_path / "lveval_all.jsonl", [rec(), rec(dataset="hotpotwikiqa_mixup_128k")])
    _, items, [report] = load_lveval(path, source="lv")
    assert items["item_id"].to_list() == ["lv-hotpotwikiqa_mixup_16k-00000", "lv-hotpotwikiqa_mixup_128k-00001"]
    assert "128k 1, 16k 1" in " ".join(report.notes)


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        (rec(answer_keywords=None), "answer_keywords", "answer-keyword dataset"),
        ({k: v for k, v in rec().items() if k != "answer_keywords"}, "answer_keywords", "answer-keyword dataset"),
        (rec(answer_keywords=""), "answer_keywords", "blank"),
        (rec(answer_keywords=[1]), "answer_keywords", "element 0 is int"),
        (rec(confusing_facts=5), "confusing_facts", "expected a list of strings"),
        (rec(answers="1901"), "answers", "expected a list of strings"),
        (rec(input=""), "input", "blank"),
        (rec(context=None), "context", "expected a string"),
        (rec(length=-3), "length", "non-negative"),
        (rec(length="12"), "length", "expected int"),
        (rec(language="zh"), "language", "is a 'en' dataset"),
        (rec(dataset="hotpotwikiqa_mixup_32k"), "dataset", "does not match the file name"),
        (rec(context="### Passage 1\n\n### Passage 2\nB"), "context", "passage 1 is empty"),
    ],
)
def test_malformed_records_name_file_record_and_field(tmp_path, record, field, reason):
    path = write_jsonl(tmp_path / "hotpotwikiqa_mixup_16k.jsonl", [rec(), record])
    with pytest.raises(RecordError) as exc:
        load_lveval(path, source="lv")
    err = exc.value
    assert (err.file, err.index, err.field) == (f"{tmp_path.name}/hotpotwikiqa_mixup_16k.jsonl", 1, field)
    assert reason in err.reason
    _, items, [report] = load_lveval(path, source="lv", on_error="reject")
    assert report.records == 2 and report.accepted == 1 == len(items) and report.consistent


def test_list_keywords_and_list_confusing_facts_are_accepted(tmp_path):
    path = write_jsonl(tmp_path / "multifieldqa_zh_mixup_16k.jsonl", [
        rec(dataset="multifieldqa_zh_mixup_16k", language="zh", answer_keywords=["关键", "词"],
            confusing_facts=["假事实一", "假事实二"])])
    _, items, _ = load_lveval(path, source="lv")
    assert items["answer_keywords"].to_list() == [["关键", "词"]]


def test_source_entry_point(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "hotpotwikiqa_mixup_16k.jsonl", [rec()])
    documents, items, reports = lveval_source(SourceConfig("lv", "lveval", {"paths": str(tmp_path)}))
    assert len(items) == 1 and len(documents) == 3 and reports[0].accepted == 1
    with pytest.raises(ValueError, match="'paths' or 'hf_dataset'"):
        lveval_source(SourceConfig("lv", "lveval", {}))
    # the Hub alternative: offline here, so a clear error and no network access
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="offline"):
        lveval_source(SourceConfig("lv", "lveval", {"hf_dataset": "Infinigence/LVEval",
                                                     "hf_name": "hotpotwikiqa_mixup_16k"}))
