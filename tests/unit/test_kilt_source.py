"""HELMET/KILT-style passage collections with QA files (``kind: kilt``).

The fixtures are small KILT-shaped records written here (there is no shared KILT data): a
100-word-passage collection of Wikipedia-style pages, QA in KILT's ``input/output/provenance``
shape and in the simple ``question/answers/positive_ids`` shape."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lc_pipeline import schemas
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.kilt import kilt_source, load_kilt
from lc_pipeline.sources.loader import (
    detect_kind,
    load_source,
    validate_path,
)
from lc_pipeline.tasks.registry import SOURCE_KINDS
from lc_pipeline.sources.validation import RecordError

# Passages as a KILT 100-word split stores them: page id and the paragraphs each one covers.
PASSAGES = [
    {"id": "26196-1", "wikipedia_id": "26196", "start_paragraph_id": 1, "end_paragraph_id": 1,
     "title": "Roald Amundsen",
     "text": "Roald Engelbregt Gravning Amundsen (16 July 1872 - c. 18 June 1928) was a Norwegian explorer of the "
             "polar regions. He was a key figure of the period known as the Heroic Age of Antarctic Exploration. "
             "Amundsen led the first expedition to reach the geographic South Pole in December 1911."},
    {"id": "26196-2", "wikipedia_id": "26196", "start_paragraph_id": 2, "end_paragraph_id": 3,
     "title": "Roald Amundsen",
     "text": "Born in Borge, near Fredrikstad, Amundsen was the fourth son of a family of Norwegian shipowners and "
             "captains. His mother wanted him to avoid the family maritime trade and encouraged him to become a "
             "doctor, a promise he kept until she died when he was 21."},
    {"id": "20408-1", "wikipedia_id": "20408", "start_paragraph_id": 1, "end_paragraph_id": 1,
     "title": "Marie Curie",
     "text": "Marie Sklodowska Curie (7 November 1867 - 4 July 1934) was a Polish and naturalised-French physicist "
             "and chemist who conducted pioneering research on radioactivity. She was the first woman to win a "
             "Nobel Prize and the only person to win a Nobel Prize in two scientific fields."},
    {"id": "24973-2", "wikipedia_id": "24973", "start_paragraph_id": 2, "end_paragraph_id": 2,
     "title": "Pierre Curie",
     "text": "In 1900 Pierre Curie became a professor in the faculty of sciences at the University of Paris. He "
             "shared the 1903 Nobel Prize in Physics with his wife, Marie Curie, and Henri Becquerel."},
    {"id": "17416-1", "wikipedia_id": "17416", "start_paragraph_id": 1, "end_paragraph_id": 1,
     "title": "Mount Kilimanjaro",
     "text": "Mount Kilimanjaro is a dormant volcano in Tanzania. It has three volcanic cones: Kibo, Mawenzi and "
             "Shira. It is the highest mountain in Africa, about 5,895 metres above sea level."},
]


def prov(wid: str, title: str, start: int, end: int | None = None) -> dict:
    return {"wikipedia_id": wid, "title": title, "section": "Section::::Abstract.", "start_paragraph_id": start,
            "end_paragraph_id": start if end is None else end, "start_character": 0, "end_character": 120,
            "bleu_score": 1.0}


def nq(**over) -> dict:
    base = {"id": "-2953823290713340418", "input": "who led the first expedition to reach the south pole",
            "output": [{"answer": "Roald Amundsen", "provenance": [prov("26196", "Roald Amundsen", 1)]},
                       {"answer": "Amundsen"}],
            "meta": {}}
    base.update(over)
    return base


def hotpot(**over) -> dict:
    base = {"id": "5a7a06935542990198eaf050",
            "input": "At which university did the husband of the first woman to win a Nobel Prize teach?",
            "output": [{"answer": "University of Paris",
                        "provenance": [prov("20408", "Marie Curie", 1), prov("24973", "Pierre Curie", 2)]}]}
    base.update(over)
    return base


def simple(**over) -> dict:
    base = {"id": "tqa-7", "question": "Which volcanic cone is the summit of Kilimanjaro?", "answers": ["Kibo"],
            "positive_ids": ["17416-1"]}
    base.update(over)
    return base


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def passages(tmp_path) -> Path:
    return write_jsonl(tmp_path / "wiki100.jsonl", PASSAGES)


def assert_conforms(documents: pl.DataFrame, items: pl.DataFrame) -> None:
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    assert documents["doc_id"].is_unique().all() and items["item_id"].is_unique().all()
    assert set(items["evidence_doc_ids"].explode().to_list()) <= set(documents["doc_id"].to_list())


def test_passages_become_documents_and_items_point_at_their_gold_passages(tmp_path, passages):
    qa = [write_jsonl(tmp_path / "nq.jsonl", [nq()]), write_jsonl(tmp_path / "hotpotqa.jsonl", [hotpot()]),
          write_jsonl(tmp_path / "tqa.jsonl", [simple()])]
    documents, items, reports = load_kilt(passages, qa, source="kilt")
    assert_conforms(documents, items)
    # every passage is a document of the collection's domain, gold or not
    assert documents.select("doc_id", "title").rows() == [(f"kilt-{p['id']}", p["title"]) for p in PASSAGES]
    assert set(documents["domain"]) == {"kilt/wiki100"} and set(documents["language"]) == {"en"}
    assert [r.file for r in reports] == [f"{tmp_path.name}/{n}" for n in
                                         ("wiki100.jsonl", "nq.jsonl", "hotpotqa.jsonl", "tqa.jsonl")]
    assert all(r.consistent and not r.rejected for r in reports)

    rows = {r["item_id"]: r for r in items.iter_rows(named=True)}
    n = rows["kilt-nq--2953823290713340418"]
    # KILT answers: every output's answer (the second output carries no provenance)
    assert n["answers"] == ["Roald Amundsen", "Amundsen"] and n["question"].startswith("who led")
    assert (n["evidence_doc_ids"], n["hops"], n["category"], n["task"]) == (["kilt-26196-1"], 1, "single-doc QA", "nq")
    h = rows["kilt-hotpotqa-5a7a06935542990198eaf050"]
    assert h["evidence_doc_ids"] == ["kilt-20408-1", "kilt-24973-2"]
    assert (h["hops"], h["category"], h["answers"]) == (2, "multi-doc QA", ["University of Paris"])
    t = rows["kilt-tqa-tqa-7"]
    assert (t["evidence_doc_ids"], t["answers"], t["hops"]) == (["kilt-17416-1"], ["Kibo"], 1)
    # the gold text holds the answer, so an assembled context around it is answerable
    text = dict(documents.select("doc_id", "text").iter_rows())
    assert all(any(a in text[d] for d in r["evidence_doc_ids"] for a in r["answers"]) for r in rows.values())
    assert any("gold passages resolved" in note for note in reports[1].notes)


def test_provenance_resolves_through_paragraph_spans_and_page_level_ids(tmp_path, passages):
    # Paragraph 3 lies inside passage 26196-2 (paragraphs 2..3); a whole-page entry takes both passages.
    records = [nq(id="p3", output=[{"answer": "Borge", "provenance": [prov("26196", "Roald Amundsen", 3)]}]),
               nq(id="page", output=[{"answer": "Amundsen", "provenance": [{"wikipedia_id": 26196}]}]),
               nq(id="pid", output=[{"answer": "Kibo", "provenance": [{"passage_id": "17416-1"}]}])]
    _, items, _ = load_kilt(passages, write_jsonl(tmp_path / "nq.jsonl", records), source="k")
    assert items["evidence_doc_ids"].to_list() == [["k-26196-2"], ["k-26196-1", "k-26196-2"], ["k-17416-1"]]
    # A collection without page fields: ids "{wikipedia_id}_{paragraph}" (paragraph-level) are found too.
    flat = write_jsonl(tmp_path / "paragraphs.jsonl",
                       [{"id": "26196_1", "title": "Roald Amundsen", "text": PASSAGES[0]["text"]}])
    documents, items, _ = load_kilt(flat, write_jsonl(tmp_path / "nq2.jsonl", [nq()]), source="k")
    assert items["evidence_doc_ids"].to_list() == [["k-26196_1"]] and set(documents["domain"]) == {"kilt/paragraphs"}


def test_csv_and_parquet_files_with_int_ids(tmp_path):
    table = pa.table({"id": [101, 102], "title": ["Mount Kilimanjaro", "Marie Curie"],
                      "text": [PASSAGES[4]["text"], PASSAGES[2]["text"]]})
    pq.write_table(table, tmp_path / "dpr.parquet")
    (tmp_path / "qa.csv").write_text(
        'id,question,answers,gold_ids\n'
        'q1,Which volcanic cone is the summit of Kilimanjaro?,"[""Kibo""]","[101]"\n'
        'q2,Who was the first woman to win a Nobel Prize?,"[""Marie Curie"", ""Marie Sklodowska Curie""]","[102]"\n',
        encoding="utf-8")
    documents, items, reports = load_kilt(tmp_path / "dpr.parquet", tmp_path / "qa.csv", source="d",
                                          collection="dpr-wiki")
    assert_conforms(documents, items)
    assert documents["doc_id"].to_list() == ["d-101", "d-102"] and set(documents["domain"]) == {"kilt/dpr-wiki"}
    assert items["evidence_doc_ids"].to_list() == [["d-101"], ["d-102"]]
    assert items["answers"].to_list()[1] == ["Marie Curie", "Marie Sklodowska Curie"]
    assert [r.format for r in reports] == ["parquet", "csv"]


# --------------------------------------------------------------------------- malformed records

BAD_QA = [
    # (record, field, expected id in the error, reason)
    (nq(input=None), "input", "bad", "expected a string, got null"),
    (nq(output=[]), "output", "bad", "empty list"),
    (nq(output={"answer": "x"}), "output", "bad", "expected a list"),
    (nq(output=[{"answer": 7, "provenance": []}]), "output", "bad", "output[0].answer: expected a string, got int"),
    (nq(output=[{"provenance": [prov("26196", "Roald Amundsen", 1)]}]), "output", "bad", "no answer"),
    (nq(output=[{"answer": "Amundsen"}]), "output", "bad", "no provenance"),
    (nq(output=[{"answer": "Amundsen", "provenance": [prov("99999", "Fridtjof Nansen", 1)]}]), "output", "bad",
     "gold passage not in"),
    (nq(output=[{"answer": "Amundsen", "provenance": [prov("26196", "Roald Amundsen", 7)]}]), "output", "bad",
     "wikipedia_id '26196' paragraphs 7..7"),
    (nq(output=[{"answer": "Amundsen", "provenance": [{"title": "Roald Amundsen"}]}]), "output", "bad",
     "provenance[0].wikipedia_id: missing"),
    (simple(answers="Kibo"), "answers", "bad", "expected a list of strings, got str"),
    (simple(answers=["Kibo", 5895]), "answers", "bad", "element 1 is int"),
    (simple(answers=[]), "answers", "bad", "empty list"),
    (simple(positive_ids=["17416-9"]), "positive_ids", "bad", "gold passage '17416-9' is not in"),
    (simple(positive_ids=[]), "positive_ids", "bad", "empty list"),
    ({k: v for k, v in simple().items() if k != "positive_ids"}, "positive_ids", "bad", "missing"),
    (simple(question=""), "question", "bad", "blank"),
    ({"id": "x", "query": "who?", "golds": ["a"]}, "question", "x", "neither KILT"),
    (simple(id=["tqa-7"]), "id", None, "expected a string or int id, got list"),
]


@pytest.mark.parametrize(("record", "field", "rid", "reason"), BAD_QA)
def test_malformed_qa_records_name_file_record_id_and_field(tmp_path, passages, record, field, rid, reason):
    record = {**record, "id": rid} if rid not in (None, "x") else record
    path = write_jsonl(tmp_path / "qa.jsonl", [simple(id="ok"), record])
    with pytest.raises(RecordError) as exc:
        load_kilt(passages, path, source="k")
    err = exc.value
    assert (err.file, err.index, err.record_id, err.field) == (f"{tmp_path.name}/qa.jsonl", 1, rid, field)
    assert reason in err.reason, err.reason
    documents, items, [_, report] = load_kilt(passages, path, source="k", on_error="reject")
    assert items["item_id"].to_list() == ["k-qa-ok"] and documents.height == len(PASSAGES)
    assert (report.records, report.accepted, [(r.index, r.field) for r in report.rejected]) == (2, 1, [(1, field)])


def test_duplicate_ids_and_undecodable_bytes_are_rejected_with_their_record(tmp_path, passages):
    path = tmp_path / "qa.jsonl"
    path.write_bytes(json.dumps(simple(id="a")).encode() + b"\n" + b'{"id": "b", "question": "caf\xe9"}\n'
                     + json.dumps(simple(id="a")).encode() + b"\n")
    with pytest.raises(RecordError) as exc:
        load_kilt(passages, path, source="k")
    assert (exc.value.index, exc.value.field) == (1, "<record>") and "undecodable" in exc.value.reason
    _, items, [_, report] = load_kilt(passages, path, source="k", on_error="reject")
    assert items["item_id"].to_list() == ["k-qa-a"]
    assert [(r.index, r.record_id, r.field) for r in report.rejected] == [(1, None, "<record>"), (2, "a", "id")]
    assert "duplicate id 'a', first seen in" in report.rejected[1].reason


@pytest.mark.parametrize(
    ("record", "field", "reason"),
    [
        ({"id": "17416-1", "title": "Mount Kilimanjaro", "text": "   "}, "text", "blank"),
        ({"id": "17416-1", "title": "Mount Kilimanjaro"}, "text", "missing"),
        ({"id": "17416-1", "title": None, "text": "Kibo."}, "title", "expected a string, got null"),
        ({"id": "17416-1", "title": "X", "text": "Kibo.", "start_paragraph_id": "one"}, "paragraph_id",
         "start_paragraph_id: expected an int"),
        ({"id": "26196-1", "title": "Roald Amundsen", "text": "A duplicate."}, "id", "duplicate passage id"),
    ],
)
def test_bad_passages_fail_or_take_their_items_with_them(tmp_path, record, field, reason):
    passages = write_jsonl(tmp_path / "wiki100.jsonl", [PASSAGES[0], record])
    qa = write_jsonl(tmp_path / "qa.jsonl", [nq(), simple()])
    with pytest.raises(RecordError) as exc:
        load_kilt(passages, qa, source="k")
    err = exc.value
    assert (err.file, err.index, err.record_id, err.field) == (f"{tmp_path.name}/wiki100.jsonl", 1, record["id"], field)
    assert reason in err.reason
    # Reject mode: the passage is refused, and so is the item whose gold passage it was (never kept without it).
    documents, items, [preport, qreport] = load_kilt(passages, qa, source="k", on_error="reject")
    assert documents["doc_id"].to_list() == ["k-26196-1"] and items["item_id"].to_list() == ["k-qa--2953823290713340418"]
    assert [r.field for r in preport.rejected] == [field]
    assert [(r.record_id, r.field) for r in qreport.rejected] == [("tqa-7", "positive_ids")]


# --------------------------------------------------------------------------- config entry and validation


def test_source_kind_reads_passages_and_qa_options(tmp_path, passages):
    qa = write_jsonl(tmp_path / "nq.jsonl", [nq()])
    assert "kilt" in SOURCE_KINDS
    loaded = load_source(SourceConfig("helmet-rag", "kilt", {"passages": str(passages), "qa": [str(qa)],
                                                             "collection": "kilt-wiki-2019"}))
    assert loaded.items["item_id"].to_list() == ["helmet-rag-nq--2953823290713340418"]
    assert set(loaded.documents["domain"]) == {"kilt/kilt-wiki-2019"} and loaded.rejected("helmet-rag").height == 0
    with pytest.raises(ValueError, match=r"option 'qa' .* or 'qa_hf_dataset' is required"):
        kilt_source(SourceConfig("k", "kilt", {"passages": str(passages)}))
    with pytest.raises(ValueError, match=r"unknown options \['qa_hf_nmae'\]"):
        kilt_source(SourceConfig("k", "kilt", {"passages": str(passages), "qa_hf_dataset": "facebook/kilt_tasks",
                                               "qa_hf_nmae": "nq"}))


def test_lcp_sources_validate_detects_each_kilt_file(tmp_path, passages):
    kilt_qa = write_jsonl(tmp_path / "nq.jsonl", [nq(), nq(id="bad", output=[])])
    simple_qa = write_jsonl(tmp_path / "tqa.jsonl", [simple()])
    gold_qa = write_jsonl(tmp_path / "gold.jsonl", [{"id": "g1", "question": "Which volcanic cone is the summit of Kilimanjaro?",
                                                      "answers": ["Kibo"], "gold_ids": ["17416-1"]}])
    assert [detect_kind(p) for p in (passages, kilt_qa, simple_qa, gold_qa)] == [
        "kilt_passages", "kilt", "kilt_qa", "kilt_qa_gold_ids"]
    kind, [report] = validate_path(passages)
    assert (kind, report.records, report.accepted) == ("kilt_passages", 5, 5)
    # A QA file alone: its shape is checked, its gold passages cannot be looked up (and the notes say so).
    kind, [report] = validate_path(kilt_qa)
    assert (kind, report.accepted, [r.record_id for r in report.rejected]) == ("kilt", 1, ["bad"])
    assert any("checked for shape only" in n for n in report.notes)
    assert validate_path(gold_qa)[1][0].accepted == 1


def test_qa_from_a_hub_style_dataset_folder(monkeypatch, tmp_path, passages):
    # `datasets.load_dataset` reads a local folder the way it reads `facebook/kilt_tasks`: offline, same code path.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    repo = tmp_path / "nq"
    repo.mkdir()
    write_jsonl(repo / "validation.jsonl", [nq(), hotpot()])
    loaded = load_source(SourceConfig("rag", "kilt", {"passages": str(passages), "qa_hf_dataset": str(repo),
                                                      "qa_hf_split": "validation"}))
    # Arrow gives the provenance-less output a null provenance and a missing answer a null: both are read as absent.
    assert loaded.items["item_id"].to_list() == ["rag-nq--2953823290713340418", "rag-nq-5a7a06935542990198eaf050"]
    assert loaded.items["evidence_doc_ids"].to_list() == [["rag-26196-1"], ["rag-20408-1", "rag-24973-2"]]
    assert loaded.items["answers"].to_list()[0] == ["Roald Amundsen", "Amundsen"]
