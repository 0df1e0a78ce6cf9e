"""Loong adapter: the real 1,600 items (documents not shipped) plus a small documents
folder and malformed records."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.loong.sources import LEVEL_TASKS, load_loong, loong_source
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.validation import RecordError

SHARED_DATA = Path(os.environ.get("LCP_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
LOONG = SHARED_DATA / "loong" / "loong.jsonl"
needs_shared = pytest.mark.skipif(not LOONG.is_file(), reason=f"no Loong items at {LOONG} (set LCP_SHARED_DATA)")


def raw_items() -> list[dict]:
    return [json.loads(line) for line in LOONG.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def item(**over) -> dict:
    base = {"id": "x1", "type": "financial", "level": 2, "set": 1, "length": 20000, "language": "en",
            "question": "Which company has the highest 'Total Assets'?", "instruction": "Read the reports.",
            "prompt_template": "{docs}\n\n{instruction}\n\n{question}", "doc": ["ACME INC", "Beta Corp"],
            "answer": "ACME INC with $5", "shuffle_doc": True}
    base.update(over)
    return base


# --------------------------------------------------------------------------- real items


@needs_shared
def test_all_1600_real_items_load_without_documents():
    documents, items, [report] = load_loong(LOONG, source="loong")
    assert report.records == report.accepted == 1600 and not report.rejected and report.consistent
    assert documents.is_empty() and documents.schema == schemas.SOURCE_DOCUMENTS
    assert items.schema == schemas.SOURCE_ITEMS and items["item_id"].is_unique().all()
    # the paper's task and domain counts (spec §4, §0)
    assert Counter(items["task"].to_list()) == {"spotlight_locating": 250, "comparison": 300, "clustering": 641,
                                                "chain_of_reasoning": 409}
    assert Counter(items["language"].to_list()) == {"zh": 905, "en": 695}
    notes = " ".join(report.notes)
    assert "documents_dir not given" in notes and "set1 323, set2 564, set3 481, set4 232" in notes
    # every answer is one non-blank string; structured answers are sorted-key JSON
    assert (items["answers"].list.len() == 1).all()
    raw = {f"loong-{r['id']}": r for r in raw_items()}
    for row in items.iter_rows(named=True):
        r = raw[row["item_id"]]
        expected = r["answer"] if isinstance(r["answer"], str) else json.dumps(r["answer"], ensure_ascii=False,
                                                                              sort_keys=True)
        assert row["answers"] == [expected]
        assert row["task"] == LEVEL_TASKS[r["level"]]
        assert len(row["evidence_doc_ids"]) == len(dict.fromkeys(r["doc"]))  # one per distinct document
        assert row["question"].strip()  # Citation Chain: the instruction stands in for the empty question


@needs_shared
def test_real_items_with_a_few_documents_get_them(tmp_path):
    rows = raw_items()
    fin = next(r for r in rows if r["type"] == "financial" and r["level"] == 1)
    paper = next(r for r in rows if r["type"] == "paper")
    legal = next(r for r in rows if r["type"] == "legal" and r["level"] == 1)
    docs = tmp_path / "doc"
    (docs / "financial").mkdir(parents=True)
    (docs / "paper").mkdir()
    (docs / "legal").mkdir()
    for name in fin["doc"]:  # the release names files "<year>-<Company>-<tag>.txt"
        (docs / "financial" / f"2024-{name}-j.txt").write_text(f"Report of {name}. Total assets $1.", encoding="utf-8")
    for name in paper["doc"]:
        (docs / "paper" / name).write_text(f"# Title of {name}\n\nAbstract.", encoding="utf-8")
    (docs / "legal" / "legal.json").write_text(json.dumps(
        {n: {"content": f"事实 {n}", "result": f"判决 {n}"} for n in legal["doc"]}, ensure_ascii=False), encoding="utf-8")

    documents, items, [report] = load_loong(LOONG, docs, source="loong", on_error="reject")
    assert report.consistent and report.records == 1600
    assert set(items["item_id"].to_list()) >= {f"loong-{r['id']}" for r in (fin, paper, legal)}
    assert documents.schema == schemas.SOURCE_DOCUMENTS and documents["doc_id"].is_unique().all()
    assert set(items["evidence_doc_ids"].explode().to_list()) <= set(documents["doc_id"].to_list())
    # items whose documents are not in the folder are rejected, each naming a missing document
    assert report.accepted == len(items) < 1600
    assert all(r.field == "doc" and "not found under" in r.reason and r.record_id for r in report.rejected)
    by_id = {r["doc_id"]: r for r in documents.iter_rows(named=True)}
    p0 = by_id[f"loong-paper-{paper['doc'][0]}"]
    assert p0["title"] == f"Title of {paper['doc'][0]}" and p0["domain"] == "loong/paper"
    l0 = by_id[f"loong-legal-{legal['doc'][0]}"]
    assert "事实" in l0["text"] and "判决" in l0["text"] and l0["language"] == "zh"


@needs_shared
def test_missing_document_fails_with_item_and_document_named(tmp_path):
    (tmp_path / "financial").mkdir()
    with pytest.raises(RecordError) as exc:
        load_loong(LOONG, tmp_path, source="loong")
    err = exc.value
    assert err.field == "doc" and err.index == 0 and err.record_id == raw_items()[0]["id"]
    assert "not found under" in str(err) and raw_items()[0]["doc"][0] in str(err)


@needs_shared
def test_source_entry_point_reads_options():
    documents, items, reports = loong_source(SourceConfig("loong", "loong", {"path": str(LOONG)}))
    assert len(items) == 1600 and documents.is_empty() and reports[0].accepted == 1600


# --------------------------------------------------------------------------- synthetic items


def test_answers_are_normalized_to_one_string(tmp_path):
    path = write_jsonl(tmp_path / "loong.jsonl", [
        item(id="s"),
        item(id="l", answer=["# B title", "# A title"]),
        item(id="d", answer={"b": ["2"], "a": ["1"]}),
        item(id="n", answer=3.5),
    ])
    _, items, _ = load_loong(path, source="t")
    got = dict(zip(items["item_id"].to_list(), items["answers"].to_list(), strict=True))
    assert got == {"t-s": ["ACME INC with $5"], "t-l": ['["# B title", "# A title"]'],  # list order kept
                   "t-d": ['{"a": ["1"], "b": ["2"]}'], "t-n": ["3.5"]}  # dict keys sorted


def test_link_the_links_documents_withhold_the_verdict(tmp_path):
    (tmp_path / "legal.json").write_text(json.dumps({"案1": {"content": "事实一", "result": "判决一"}},
                                                    ensure_ascii=False), encoding="utf-8")
    path = write_jsonl(tmp_path / "loong.jsonl", [
        item(id="ltl", type="legal", level=4, language="zh", doc=["案1"], question="判决结果1: ...，请配对"),
        item(id="cls", type="legal", level=3, language="zh", doc=["案1"], question="请分类"),
    ])
    documents, items, _ = load_loong(path, tmp_path, source="t")
    texts = dict(zip(documents["doc_id"].to_list(), documents["text"].to_list(), strict=True))
    assert texts == {"t-legal-案1#facts": "事实一", "t-legal-案1": "事实一\n\n判决一"}
    ev = dict(zip(items["item_id"].to_list(), items["evidence_doc_ids"].to_list(), strict=True))
    assert ev == {"t-ltl": ["t-legal-案1#facts"], "t-cls": ["t-legal-案1"]}


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        (item(type="medical"), "type", "expected one of"),
        (item(level=7), "level", "expected 1..4"),
        (item(language="fr"), "language", "'en' or 'zh'"),
        (item(doc=[]), "doc", "empty list"),
        (item(doc="ACME INC"), "doc", "expected a list of strings"),
        (item(answer=""), "answer", "blank"),
        (item(answer={}), "answer", "empty dict"),
        (item(answer=None), "answer", "null"),
        ({k: v for k, v in item().items() if k != "answer"}, "answer", "missing"),
        (item(question="", instruction=""), "question", "no instruction"),
        (item(set=9), "set", "expected 1..4"),
    ],
)
def test_malformed_items_name_file_record_id_and_field(tmp_path, record, field, reason):
    path = write_jsonl(tmp_path / "loong.jsonl", [item(id="ok"), record])
    with pytest.raises(RecordError) as exc:
        load_loong(path, source="t")
    err = exc.value
    assert (err.file, err.index, err.record_id, err.field) == (f"{tmp_path.name}/loong.jsonl", 1, "x1", field)
    assert reason in err.reason
    _, items, [report] = load_loong(path, source="t", on_error="reject")
    assert report.records == 2 and report.accepted == 1 and len(report.rejected) == 1 and report.consistent
    assert items["item_id"].to_list() == ["t-ok"]


def test_duplicate_ids_and_bad_json_are_rejected_not_skipped(tmp_path):
    path = tmp_path / "loong.jsonl"
    path.write_text(json.dumps(item(id="a")) + "\n{not json\n" + json.dumps(item(id="a")) + "\n", encoding="utf-8")
    _, _items, [report] = load_loong(path, source="t", on_error="reject")
    assert report.records == 3 and report.accepted == 1
    assert [(r.index, r.field) for r in report.rejected] == [(1, "<record>"), (2, "id")]
    assert "duplicate id" in report.rejected[1].reason


def test_missing_documents_dir_is_a_clear_error(tmp_path):
    path = write_jsonl(tmp_path / "loong.jsonl", [item()])
    with pytest.raises(RecordError, match="documents_dir is not a directory"):
        load_loong(path, tmp_path / "nope", source="t")


def test_financial_files_match_release_names(tmp_path):
    fin = tmp_path / "financial"
    fin.mkdir()
    (fin / "2024-ACME INC-j.txt").write_text("acme", encoding="utf-8")
    (fin / "格力电器-2023年一季度报告.txt").write_text("gree", encoding="utf-8")
    path = write_jsonl(tmp_path / "loong.jsonl", [item(doc=["ACME INC", "格力电器-2023年一季度报告"])])
    documents, items, _ = load_loong(path, tmp_path, source="t")
    assert sorted(documents["text"].to_list()) == ["acme", "gree"]
    assert items["evidence_doc_ids"].to_list() == [["t-financial-ACME INC", "t-financial-格力电器-2023年一季度报告"]]
    assert isinstance(documents, pl.DataFrame)


# --------------------------------------------------------------------------- kept for the run as released


def test_each_item_keeps_its_id_and_the_fields_a_run_as_released_reads(tmp_path):
    (tmp_path / "financial").mkdir()
    for stem in ("2024-ACME INC-j", "2024-Beta Corp-j"):
        (tmp_path / "financial" / f"{stem}.txt").write_text(f"{stem} report", encoding="utf-8")
    path = write_jsonl(tmp_path / "loong.jsonl", [item(id="r1", doc=["Beta Corp", "ACME INC", "Beta Corp"]),
                                                  item(id="r2", question="", level=4, shuffle_doc=None)])
    _, items, _ = load_loong(path, source="t")  # without documents: no headers
    fields = {r["record_id"]: json.loads(r["record_fields"]) for r in items.iter_rows(named=True)}
    assert set(items["context"]) == {""} and set(fields) == {"r1", "r2"}
    assert fields["r1"] == {"type": "financial", "level": 2, "set": 1, "length": 20000, "language": "en",
                            "question": "Which company has the highest 'Total Assets'?",
                            "instruction": "Read the reports.", "prompt_template": "{docs}\n\n{instruction}\n\n{question}",
                            "shuffle_doc": True, "doc": ["Beta Corp", "ACME INC", "Beta Corp"],
                            "doc_ids": ["t-financial-Beta Corp", "t-financial-ACME INC", "t-financial-Beta Corp"]}
    assert fields["r2"]["question"] == "" and fields["r2"]["shuffle_doc"] is True  # the authors' default
    _, items, _ = load_loong(path, tmp_path, source="t", on_error="reject")
    [r1] = [json.loads(f) for f in items.filter(pl.col("record_id") == "r1")["record_fields"]]
    assert r1["doc_headers"] == ["《j》", "《j》", "《j》"]  # the file stem's last "-" token, as the authors write it


def test_a_company_name_finds_its_2024_report_before_an_older_one(tmp_path):
    fin = tmp_path / "financial"
    fin.mkdir()
    (fin / "2023-ACME INC-n.txt").write_text("acme 2023", encoding="utf-8")
    (fin / "2024-ACME INC-j.txt").write_text("acme 2024", encoding="utf-8")
    (fin / "2024-ACME INC HOLDINGS-j.txt").write_text("another company", encoding="utf-8")
    (fin / "2024-Beta Corp-j.txt").write_text("beta", encoding="utf-8")
    path = write_jsonl(tmp_path / "loong.jsonl", [item()])
    documents, _, _ = load_loong(path, tmp_path, source="t")
    assert dict(documents.select("doc_id", "text").iter_rows())["t-financial-ACME INC"] == "acme 2024"


def test_a_missing_document_names_the_file_looked_for(tmp_path):
    (tmp_path / "financial").mkdir()
    (tmp_path / "financial" / "2024-ACME INC-j.txt").write_text("acme", encoding="utf-8")
    path = write_jsonl(tmp_path / "loong.jsonl", [item(id="gone")])
    _, items, [report] = load_loong(path, tmp_path, source="t", on_error="reject")
    [rejected] = report.rejected
    assert items.is_empty() and rejected.record_id == "gone" and rejected.field == "doc"
    assert rejected.reason.endswith(f"expected {tmp_path}/financial/*2024-Beta Corp*.txt")


def test_the_release_folder_is_read_with_its_doc_folder(tmp_path):
    (tmp_path / "doc" / "financial").mkdir(parents=True)
    for name in ("ACME INC", "Beta Corp"):
        (tmp_path / "doc" / "financial" / f"2024-{name}-j.txt").write_text(name, encoding="utf-8")
    write_jsonl(tmp_path / "loong.jsonl", [item()])
    documents, items, _ = loong_source(SourceConfig("loong", "loong", {"path": str(tmp_path)}))
    assert items["record_id"].to_list() == ["x1"] and sorted(documents["text"]) == ["ACME INC", "Beta Corp"]
