"""LongBench v1 / LongBench-E adapter: real shared samples plus synthetic records for the
tasks and format variants the shared data does not contain."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.longbench.sources import (
    CATEGORIES,
    TASKS,
    load_longbench,
    longbench_source,
)
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.numbered_blocks import split_numbered
from lc_pipeline.sources.validation import RecordError

SHARED_DATA = Path(os.environ.get("LCP_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
LONGBENCH = SHARED_DATA / "longbench"
SHARED_FILES = sorted(LONGBENCH.glob("*.jsonl")) if LONGBENCH.is_dir() else []
needs_shared = pytest.mark.skipif(not SHARED_FILES, reason=f"no LongBench samples under {LONGBENCH} (set LCP_SHARED_DATA)")

# Header patterns as LongBench writes them, counted independently of the adapter's parser.
HEADERS = {
    "hotpotqa": r"^Passage \d+:", "2wikimqa": r"^Passage \d+:", "musique": r"^Passage \d+:",
    "multi_news": r"^Passage \d+:", "dureader": r"^文章\d+", "passage_count": r"^Paragraph \d+:",
    "passage_retrieval_en": r"^Paragraph \d+:", "passage_retrieval_zh": r"^段落\d+[:：]",
}


def raw_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def docs_of(documents: pl.DataFrame, item_prefix: str) -> pl.DataFrame:
    return documents.filter(pl.col("doc_id").str.starts_with(item_prefix + "-p"))


def assert_conforms(documents: pl.DataFrame, items: pl.DataFrame) -> None:
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    assert documents["doc_id"].is_unique().all() and items["item_id"].is_unique().all()
    # every evidence id is a document of the source
    evidence = set(items["evidence_doc_ids"].explode().to_list())
    assert evidence <= set(documents["doc_id"].to_list())


def test_task_table_covers_all_21_longbench_tasks():
    assert len(TASKS) == 21
    assert set(CATEGORIES.values()) == {"single-doc QA", "multi-doc QA", "summarization", "few-shot", "synthetic", "code"}


@needs_shared
@pytest.mark.parametrize("path", SHARED_FILES, ids=[p.stem for p in SHARED_FILES])
def test_every_shared_file_loads_without_rejections(path):
    raws = raw_records(path)
    documents, items, (report,) = load_longbench(path, source="lb", on_error="reject")
    assert report.rejected == [] and report.records == report.accepted == len(raws) == items.height
    assert_conforms(documents, items)
    task = raws[0]["dataset"]
    assert set(items["task"]) == {task} and set(items["category"]) == {CATEGORIES[task]}
    assert items["language"].to_list() == [r["language"] for r in raws]
    assert items["answers"].to_list() == [r["answers"] for r in raws]
    assert items["question"].to_list() == [r["input"] for r in raws]
    assert items["answer_keywords"].list.len().sum() == 0  # LongBench has no keywords
    assert set(items["hops"]) == ({2} if task in ("hotpotqa", "2wikimqa", "musique") else {1})
    assert set(documents["domain"]) == {f"longbench/{task}"}

    for raw, item in zip(raws, items.iter_rows(named=True), strict=True):
        assert item["item_id"] == f"lb-{task}-{raw['_id']}"
        docs = docs_of(documents, item["item_id"])
        if task in HEADERS:
            # split into exactly as many documents as the context has numbered headers
            assert docs.height == len(re.findall(HEADERS[task], raw["context"], flags=re.MULTILINE)) > 1
            assert docs["doc_id"].to_list() == [f"{item['item_id']}-p{n}" for n in range(1, docs.height + 1)]
            # no header text left inside a document
            assert not docs["text"].str.contains(HEADERS[task].lstrip("^")).any()
        else:
            assert docs["text"].to_list() == [raw["context"]]
        if not task.startswith("passage_retrieval"):
            assert item["evidence_doc_ids"] == docs["doc_id"].to_list()


@needs_shared
def test_multi_hop_passages_keep_title_and_text():
    raw = raw_records(LONGBENCH / "hotpotqa.jsonl")[0]
    documents, _items, _ = load_longbench(LONGBENCH / "hotpotqa.jsonl", source="lb")
    first = documents.row(0, named=True)
    title, body = raw["context"].split("Passage 2:")[0].removeprefix("Passage 1:\n").split("\n", 1)
    assert (first["title"], first["text"]) == (title, body.strip())


@needs_shared
def test_passage_retrieval_evidence_is_the_gold_paragraph():
    path = LONGBENCH / "passage_retrieval_en.jsonl"
    documents, items, _ = load_longbench(path, source="lb")
    by_id = dict(zip(documents["doc_id"], documents["text"], strict=True))
    for raw, item in zip(raw_records(path), items.iter_rows(named=True), strict=True):
        n = int(raw["answers"][0].removeprefix("Paragraph "))
        (gold,) = item["evidence_doc_ids"]
        assert gold == f"{item['item_id']}-p{n}"
        paragraph = raw["context"].split(f"Paragraph {n}: ", 1)[1].split(f"\nParagraph {n + 1}: ", 1)[0]
        assert by_id[gold] == paragraph.strip()


@needs_shared
def test_whole_directory_loads_and_keeps_all_classes():
    documents, items, reports = load_longbench(LONGBENCH, source="lb")
    assert_conforms(documents, items)
    assert [r.file for r in reports] == [f"longbench/{p.name}" for p in SHARED_FILES]
    assert items.height == sum(r.accepted for r in reports)
    raw = [json.loads(line) for line in (LONGBENCH / "trec.jsonl").open()]
    trec = items.filter(pl.col("task") == "trec")
    assert trec["all_classes"].to_list() == [r["all_classes"] for r in raw]  # the label set, for scoring
    assert items.filter(pl.col("task") != "trec")["all_classes"].list.len().max() == 0


# --------------------------------------------------------------------------- synthetic records


def write(tmp_path: Path, name: str, records: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def rec(dataset, _id, context, answers, *, language="en", input="", all_classes=None, **extra):
    return {"dataset": dataset, "_id": _id, "language": language, "context": context, "input": input,
            "answers": answers, "all_classes": all_classes, **extra}


def test_chinese_single_doc_qa(tmp_path):
    path = write(tmp_path, "multifieldqa_zh.jsonl", [
        rec("multifieldqa_zh", "z1", "北京是中国的首都。\n它有三千多年的历史。", ["北京"], language="zh", input="中国的首都是哪里？"),
    ])
    documents, items, _ = load_longbench(path, source="lb")
    assert_conforms(documents, items)
    item = items.row(0, named=True)
    assert (item["task"], item["category"], item["language"], item["hops"]) == ("multifieldqa_zh", "single-doc QA", "zh", 1)
    assert item["evidence_doc_ids"] == ["lb-multifieldqa_zh-z1-p1"]
    assert documents["text"].to_list() == ["北京是中国的首都。\n它有三千多年的历史。"]


def test_code_completion_context_is_not_split(tmp_path):
    code = "class A:\n    # Passage 1: not a header for code\n    def f(self):\n        return 1\n\n"
    path = write(tmp_path, "lcc.jsonl", [rec("lcc", "c1", code, ["        return 2"])])
    path2 = write(tmp_path, "repobench-p.jsonl", [
        rec("repobench-p", "r1", "# path: a.py\nimport os\n", ["os.path.join(a, b)"], input="def g():\n"),
    ])
    documents, items, _ = load_longbench([path, path2], source="lb")
    assert_conforms(documents, items)
    assert documents["text"].to_list() == [code, "# path: a.py\nimport os\n"]  # verbatim: indentation matters
    assert set(items["category"]) == {"code"} and items["answers"].to_list()[0] == ["        return 2"]


def test_longbench_e_record_with_length(tmp_path):
    context = "Passage 1:\nAlpha\nAlpha is a town.\nPassage 2:\nBeta\nBeta is a river near Alpha.\n"
    path = write(tmp_path, "hotpotqa_e.jsonl", [
        rec("hotpotqa", "e1", context, ["Beta"], input="Which river?", length=3520),
    ])
    documents, items, (report,) = load_longbench(path, source="lb")
    assert_conforms(documents, items)
    item = items.row(0, named=True)
    # the file marks LongBench-E, so ids cannot collide with the same _id in hotpotqa.jsonl
    assert item["item_id"] == "lb-hotpotqa_e-e1" and item["task"] == "hotpotqa" and item["hops"] == 2
    assert documents.select("title", "text").rows() == [("Alpha", "Alpha is a town."), ("Beta", "Beta is a river near Alpha.")]
    assert item["evidence_doc_ids"] == ["lb-hotpotqa_e-e1-p1", "lb-hotpotqa_e-e1-p2"]
    assert json.loads(item["record_fields"])["length"] == 3520 and item["record_id"] == "e1" and item["context"] == context
    # a dataset name with the suffix works the same way
    path = write(tmp_path, "x.jsonl", [rec("passage_count_e", "e2", "Paragraph 1: a\nParagraph 2: b", ["2"], length=9)])
    _, items, _ = load_longbench(path, source="lb")
    assert items.row(0, named=True)["item_id"] == "lb-passage_count_e-e2"


def test_chinese_passage_retrieval_and_dureader_layouts(tmp_path):
    zh = rec("passage_retrieval_zh", "pz", "段落1：第一段。\n段落2：第二段，讲的是河流。\n段落3：第三段。", ["段落2"],
             language="zh", input="河流")
    du = rec("dureader", "d1", "文章1\n标题：甲\n内容一。\n\n文章2\n标题：乙\n内容二。", ["内容"], language="zh", input="问题")
    documents, items, _ = load_longbench(
        [write(tmp_path, "passage_retrieval_zh.jsonl", [zh]), write(tmp_path, "dureader.jsonl", [du])], source="lb")
    assert_conforms(documents, items)
    assert items["evidence_doc_ids"].to_list()[0] == ["lb-passage_retrieval_zh-pz-p2"]
    assert documents.filter(pl.col("doc_id") == "lb-passage_retrieval_zh-pz-p2")["text"].item() == "第二段，讲的是河流。"
    assert documents.filter(pl.col("doc_id").str.contains("dureader")).select("title", "text").rows() == [
        ("甲", "内容一。"), ("乙", "内容二。")]


def test_few_shot_all_classes_list_or_null(tmp_path):
    lsht = rec("lsht", "l1", "新闻：…\n类别：体育\n", ["体育"], language="zh", input="新闻：…", all_classes=["体育", "财经"])
    samsum = rec("samsum", "s1", "Dialogue: A: hi\nSummary: greeting\n", ["They greet."], input="Dialogue: B: bye")
    _documents, items, reports = load_longbench(
        [write(tmp_path, "lsht.jsonl", [lsht]), write(tmp_path, "samsum.jsonl", [samsum])], source="lb")
    assert set(items["category"]) == {"few-shot"} and items.height == 2
    assert items["all_classes"].to_list() == [["体育", "财经"], []]  # null becomes []


def test_unsplit_multi_news_is_kept_with_a_note_but_unsplit_qa_is_an_error(tmp_path):
    documents, _items, (report,) = load_longbench(
        write(tmp_path, "multi_news.jsonl", [rec("multi_news", "m1", "One article only.", ["Summary."])]), source="lb")
    assert documents.height == 1 and any("one document" in n for n in report.notes)
    with pytest.raises(RecordError, match=r"record 0 \(id 'h1'\): field 'context': no 'Passage N:' header"):
        load_longbench(write(tmp_path, "hotpotqa.jsonl", [rec("hotpotqa", "h1", "plain text", ["x"])]), source="lb")


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        (rec("hotpotqa_x", "a", "ctx", ["x"]), "dataset", "unknown LongBench task"),
        (rec("qasper", "a", "ctx", ["x"], language="fr"), "language", "expected 'en' or 'zh'"),
        (rec("qasper", "a", "ctx", "x"), "answers", "expected a list of strings, got str"),
        (rec("passage_retrieval_en", "a", "Paragraph 1: a\nParagraph 2: b", ["Paragraph 3"]), "answers", "names no paragraph"),
        (rec("passage_count", "a", "Paragraph 1: a\nParagraph 2:\nParagraph 3: c", ["3"]), "context", "Paragraph 2: is empty"),
        (rec("lcc", "a", "code", ["x"], length=-1), "length", "non-negative"),
    ],
)
def test_bad_records_are_rejected_with_their_field(tmp_path, record, field, reason):
    path = write(tmp_path, "bad.jsonl", [rec("qasper", "ok", "ctx", ["y"]), record])
    with pytest.raises(RecordError) as info:
        load_longbench(path, source="lb")
    assert (info.value.index, info.value.record_id, info.value.field) == (1, "a", field) and reason in str(info.value)
    documents, items, (report,) = load_longbench(path, source="lb", on_error="reject")
    assert items["item_id"].to_list() == ["lb-qasper-ok"] and documents.height == 1
    assert (report.records, report.accepted, [r.field for r in report.rejected]) == (2, 1, [field])


def test_same_record_in_two_files_is_a_duplicate(tmp_path):
    r = rec("qasper", "a", "ctx", ["y"])
    a, b = write(tmp_path, "a.jsonl", [r]), write(tmp_path, "b.jsonl", [r])
    with pytest.raises(RecordError, match="already loaded from"):
        load_longbench([a, b], source="lb")


def test_split_numbered_only_follows_the_sequence():
    text = "Passage 1:\nA\nsee Passage 7: elsewhere\nPassage 7:\nnot a header\nPassage 2:\nB"
    blocks = split_numbered(text, re.compile(r"^Passage (?P<n>\d+):\s*", re.MULTILINE))
    assert [n for n, _ in blocks] == [1, 2] and "Passage 7:\nnot a header" in blocks[0][1]


def test_source_kind_entry_point(tmp_path):
    path = write(tmp_path, "qasper.jsonl", [rec("qasper", "a", "ctx", ["y"])])
    documents, items, reports = longbench_source(SourceConfig(name="longbench", kind="longbench", options={"paths": str(path)}))
    assert items["source"].to_list() == ["longbench"] and documents["doc_id"].to_list() == ["longbench-qasper-a-p1"]
