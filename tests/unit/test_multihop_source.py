"""HotpotQA / 2WikiMultihopQA / MuSiQue in their native formats (``kind: multihop``).

Fixtures are records in each dataset's own layout, written here (there is no shared data for
them): HotpotQA sentences with their leading spaces, 2Wiki's evidence triples, MuSiQue's
paragraph list with ``is_supporting`` and its question decomposition."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.construct.assembly import build_instances, filler_pool
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.loader import (
    detect_kind,
    load_source,
    validate_path,
)
from lc_pipeline.tasks.registry import SOURCE_KINDS
from lc_pipeline.sources.multihop import load_multihop, multihop_source, paragraph_text
from lc_pipeline.sources.validation import RecordError

ED_WOOD = ["Ed Wood", [("Edward Davis Wood Jr. (October 10, 1924 - December 10, 1978) was an American filmmaker, "
                       "actor, writer, producer, and director.")]]

HOTPOT_COMPARISON = {
    "_id": "5a8b57f25542995d1e6f1371",
    "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "answer": "yes", "type": "comparison", "level": "hard",
    "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
    "context": [
        ["Ed Wood (film)", [("Ed Wood is a 1994 American biographical period comedy-drama film directed and produced by "
                            "Tim Burton, and starring Johnny Depp as cult filmmaker Ed Wood."),
                            (" The film concerns the period in Wood's life when he made his best-known films as well "
                            "as his relationship with actor Bela Lugosi, played by Martin Landau."),
                            (" Sarah Jessica Parker, Patricia Arquette, Jeffrey Jones, Lisa Marie, and Bill Murray are "
                            "among the supporting cast.")]],
        ["Scott Derrickson", [("Scott Derrickson (born July 16, 1966) is an American director, screenwriter and "
                              "producer."), " He lives in Los Angeles, California.",
                              (" He is best known for directing horror films such as \"Sinister\", \"The Exorcism of "
                              "Emily Rose\", and \"Deliver Us From Evil\", as well as the 2016 Marvel Cinematic "
                              "Universe installment, \"Doctor Strange.\"")]],
        ["Woodson, Arkansas", [("Woodson is a census-designated place (CDP) in Pulaski County, Arkansas, in the United "
                               "States."), " Its population was 403 at the 2010 census.",
                               (" It is part of the Little Rock-North Little Rock-Conway Metropolitan Statistical "
                               "Area.")]],
        ["Tyler Bates", [("Tyler Bates (born June 5, 1965) is an American musician, music producer, and composer for "
                         "films, television, and video games."),
                         (" Much of his work is in the action and horror film genres, with films like \"Dawn of the "
                         "Dead\", \"300\", \"Sucker Punch\" and \"John Wick\".")]],
        ED_WOOD,
        ["Deliver Us from Evil (2014 film)", [("Deliver Us from Evil is a 2014 American supernatural horror film "
                                              "directed by Scott Derrickson and produced by Jerry Bruckheimer."),
                                              (" The film is officially based on a 2001 non-fiction book entitled "
                                              "\"Beware the Night\" by Ralph Sarchie and Lisa Collier Cool.")]],
    ],
}

HOTPOT_BRIDGE = {
    "_id": "5a8c7595554299585d9e36b6",
    "question": "What government position was held by the woman who portrayed Corliss Archer in the film Kiss "
                "and Tell?",
    "answer": "Chief of Protocol", "type": "bridge", "level": "medium",
    "supporting_facts": [["Kiss and Tell (1945 film)", 0], ["Shirley Temple", 0], ["Shirley Temple", 1]],
    "context": [
        ["Meet Corliss Archer", [("Meet Corliss Archer, a program from radio's Golden Age, ran from January 7, 1943 "
                                 "to September 30, 1956."),
                                 (" Although it was CBS's answer to NBC's popular \"A Date with Judy\", it was also "
                                 "broadcast by NBC in 1948 as a summer replacement for \"The Bob Hope Show\".")]],
        ["Kiss and Tell (1945 film)", [("Kiss and Tell is a 1945 American comedy film starring then 17-year-old "
                                       "Shirley Temple as Corliss Archer."),
                                       (" In the film, two teenage girls cause their respective parents much concern "
                                       "when they start to become interested in boys.")]],
        ["Shirley Temple", [("Shirley Temple Black (April 23, 1928 - February 10, 2014) was an American actress, "
                            "singer, dancer, businesswoman, and diplomat who was Hollywood's number one box-office "
                            "draw as a child actress from 1935 to 1938."),
                            (" As an adult, she was named United States ambassador to Ghana and to Czechoslovakia and "
                            "also served as Chief of Protocol of the United States.")]],
        ["Janet Waldo", [("Janet Marie Waldo (February 4, 1920 - June 12, 2016) was an American radio and voice "
                         "actress."),
                         (" She is best known in animation for voicing Judy Jetson, Nancy in \"Shazzan\", Penelope "
                         "Pitstop, and Josie in \"Josie and the Pussycats\".")]],
        ED_WOOD,  # the same Wikipedia paragraph in another record's context
    ],
}

TWOWIKI = {
    "_id": "8813f87c0bdd11eba7f7acde48001122",
    "type": "compositional",
    "question": "Who is the mother of the director of film Polish-Russian War (Film)?",
    "answer": "Małgorzata Braunek",
    "supporting_facts": [["Polish-Russian War (film)", 1], ["Xawery Żuławski", 2]],
    "context": [
        ["Polish-Russian War (film)", [("Polish-Russian War (Wojna polsko-ruska) is a 2009 Polish film directed by "
                                       "Xawery Żuławski based on the novel Polish-Russian War under the white-red "
                                       "flag by Dorota Masłowska."), "The film's premiere took place in May 2009."]],
        ["Xawery Żuławski", ["Xawery Żuławski (born 22 December 1971 in Warsaw) is a Polish film director.",
                             "In 1995 he graduated from the National Film School in Łódź.",
                             "He is the son of actress Małgorzata Braunek and director Andrzej Żuławski."]],
        ["Wojna", [("Wojna is a village in the administrative district of Gmina Sońsk, within Ciechanów County, "
                   "Masovian Voivodeship, in east-central Poland.")]],
    ],
    "evidences": [["Polish-Russian War", "director", "Xawery Żuławski"],
                  ["Xawery Żuławski", "mother", "Małgorzata Braunek"]],
    "entity_ids": "Q7209097_Q18347233",
}

MUSIQUE = {
    "id": "2hop__131818_161450",
    "paragraphs": [
        {"idx": 0, "title": "Quebec Winter Carnival", "is_supporting": True,
         "paragraph_text": "The Quebec Winter Carnival is a festival held in Quebec City. The first large winter "
                           "carnival took place in 1894, and the event has been held every year since 1955."},
        {"idx": 1, "title": "CIMI-FM", "is_supporting": True,
         "paragraph_text": "CIMI-FM is a French-language radio station licensed to Quebec City, Quebec, that "
                           "broadcasts at 103.7 FM."},
        {"idx": 2, "title": "Montreal", "is_supporting": False,
         "paragraph_text": "Montreal is the second-most populous city in Canada and the most populous city in the "
                           "province of Quebec."},
    ],
    "question": "When did the first large winter carnival take place in the city where CIMI-FM is licensed to "
                "broadcast?",
    "question_decomposition": [
        {"id": 131818, "question": "CIMI-FM >> licensed to broadcast to", "answer": "Quebec City",
         "paragraph_support_idx": 1},
        {"id": 161450, "question": "when did the first large winter carnival happen in #1", "answer": "1894",
         "paragraph_support_idx": 0},
    ],
    "answer": "1894",
    "answer_aliases": ["in 1894"],
    "answerable": True,
}


def rec(base: dict, **over) -> dict:
    out = copy.deepcopy(base)
    out.update(over)
    return out


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def assert_conforms(documents: pl.DataFrame, items: pl.DataFrame) -> None:
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    assert documents["doc_id"].is_unique().all() and items["item_id"].is_unique().all()
    assert set(items["evidence_doc_ids"].explode().to_list()) <= set(documents["doc_id"].to_list())


def evidence_titles(documents: pl.DataFrame, item: dict) -> list[str]:
    title = dict(documents.select("doc_id", "title").iter_rows())
    return [title[d] for d in item["evidence_doc_ids"]]


def test_hotpotqa_paragraphs_become_documents_and_supporting_ones_evidence(tmp_path):
    path = write_jsonl(tmp_path / "hotpot_dev_distractor_v1.jsonl", [HOTPOT_COMPARISON, HOTPOT_BRIDGE])
    documents, items, [report] = load_multihop(path, source="hp")
    assert_conforms(documents, items)
    # 6 + 5 paragraphs, "Ed Wood" shared by both records: one document
    assert documents.height == 10 and documents["title"].to_list().count("Ed Wood") == 1
    assert set(documents["domain"]) == {"multihop/hotpotqa"} and set(documents["language"]) == {"en"}
    cmp_, bridge = items.iter_rows(named=True)
    assert (cmp_["item_id"], cmp_["task"], cmp_["category"]) == ("hp-hotpotqa-5a8b57f25542995d1e6f1371", "hotpotqa",
                                                                 "multi-doc QA")
    assert cmp_["answers"] == ["yes"] and cmp_["question"] == HOTPOT_COMPARISON["question"]
    assert evidence_titles(documents, cmp_) == ["Scott Derrickson", "Ed Wood"] and cmp_["hops"] == 2
    assert evidence_titles(documents, bridge) == ["Kiss and Tell (1945 film)", "Shirley Temple"] and bridge["hops"] == 2
    # both items point at the same Ed Wood document
    ed = documents.filter(pl.col("title") == "Ed Wood")["doc_id"].item()
    assert ed in cmp_["evidence_doc_ids"] and ed not in bridge["evidence_doc_ids"]
    # HotpotQA sentences carry their own leading space: the paragraph reads as written
    shirley = documents.filter(pl.col("title") == "Shirley Temple")["text"].item()
    assert "from 1935 to 1938. As an adult, she was named" in shirley and "  " not in shirley
    assert report.notes[0] == "format hotpotqa (detected): 10 distinct paragraphs as documents"
    assert "type bridge: 1" in report.notes and "type comparison: 1" in report.notes


def test_hugging_face_hotpot_layout_loads_like_the_original(tmp_path):
    def hf(r: dict) -> dict:  # the `hotpot_qa` dataset on the Hub: id, and dicts of parallel lists
        return {"id": r["_id"], "question": r["question"], "answer": r["answer"], "type": r["type"],
                "level": r["level"],
                "supporting_facts": {"title": [t for t, _ in r["supporting_facts"]],
                                     "sent_id": [s for _, s in r["supporting_facts"]]},
                "context": {"title": [t for t, _ in r["context"]], "sentences": [s for _, s in r["context"]]}}

    native = load_multihop(write_jsonl(tmp_path / "a.jsonl", [HOTPOT_COMPARISON, HOTPOT_BRIDGE]), source="hp")
    hub = load_multihop(write_jsonl(tmp_path / "b.jsonl", [hf(HOTPOT_COMPARISON), hf(HOTPOT_BRIDGE)]), source="hp")
    assert native[0].equals(hub[0]) and native[1].equals(hub[1])


def test_2wiki_is_detected_and_its_sentences_joined_with_spaces(tmp_path):
    path = write_jsonl(tmp_path / "dev.json", [TWOWIKI])  # 2Wiki ships .json files holding JSON Lines or a list
    documents, items, [report] = load_multihop(path, source="w")
    assert_conforms(documents, items)
    item = items.row(0, named=True)
    assert (item["task"], item["hops"], item["answers"]) == ("2wikimqa", 2, ["Małgorzata Braunek"])
    assert evidence_titles(documents, item) == ["Polish-Russian War (film)", "Xawery Żuławski"]
    assert documents.filter(pl.col("title") == "Xawery Żuławski")["text"].item() == (
        "Xawery Żuławski (born 22 December 1971 in Warsaw) is a Polish film director. In 1995 he graduated from the "
        "National Film School in Łódź. He is the son of actress Małgorzata Braunek and director Andrzej Żuławski.")
    assert set(documents["domain"]) == {"multihop/2wikimqa"} and report.notes[0].startswith("format 2wikimqa (detected)")
    assert paragraph_text(["One.", " Two.", "Three."]) == "One. Two. Three."


def test_musique_supporting_paragraphs_decomposition_hops_and_aliases(tmp_path):
    path = write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl",
                       [MUSIQUE, rec(MUSIQUE, id="2hop__1_2", question_decomposition=None, answer_aliases=None)])
    documents, items, [report] = load_multihop(path, source="mq")
    assert_conforms(documents, items)
    first, second = items.iter_rows(named=True)
    assert first["item_id"] == "mq-musique-2hop__131818_161450" and first["task"] == "musique"
    assert first["answers"] == ["1894", "in 1894"] and second["answers"] == ["1894"]
    assert evidence_titles(documents, first) == ["Quebec Winter Carnival", "CIMI-FM"]
    # hops: the decomposition's length, else the supporting paragraphs counted
    assert (first["hops"], second["hops"]) == (2, 2)
    assert documents.height == 3  # the second record repeats the same paragraphs
    assert "2-hop: 2" in report.notes


def test_musique_unanswerable_records_are_rejected_with_a_reason_or_kept_apart(tmp_path):
    # MuSiQue-Full: the pair of an answerable record has a supporting paragraph removed.
    unanswerable = rec(MUSIQUE, id="2hop__131818_161450_u", answerable=False,
                       paragraphs=[p for p in MUSIQUE["paragraphs"] if p["idx"] != 0])
    path = write_jsonl(tmp_path / "musique_full_v1.0_dev.jsonl", [MUSIQUE, unanswerable])
    # default: listed as rejected (even with on_error fail: the record is well-formed, just unusable)
    documents, items, [report] = load_multihop(path, source="mq")
    assert items["item_id"].to_list() == ["mq-musique-2hop__131818_161450"]
    assert (report.records, report.accepted, report.consistent) == (2, 1, True)
    [rejected] = report.rejected
    assert (rejected.index, rejected.record_id, rejected.field) == (1, "2hop__131818_161450_u", "answerable")
    assert "unanswerable" in rejected.reason and "unanswerable: keep" in rejected.reason
    assert load_source(SourceConfig("mq", "multihop", {"paths": str(path)})).rejected("mq")["field"].to_list() == [
        "answerable"]
    # keep: a task of its own, evidence = the supporting paragraph that is left
    documents, items, [report] = load_multihop(path, source="mq", unanswerable="keep")
    kept = items.filter(pl.col("task") == "musique_unanswerable").row(0, named=True)
    assert evidence_titles(documents, kept) == ["CIMI-FM"] and kept["answers"] == ["1894", "in 1894"]
    assert not report.rejected and "unanswerable, kept: 1" in report.notes


def test_out_of_range_sentence_ids_and_blank_distractors_are_counted_not_hidden(tmp_path):
    record = rec(HOTPOT_BRIDGE, supporting_facts=[["Kiss and Tell (1945 film)", 0], ["Shirley Temple", 9]])
    record["context"].append(["Empty page", [""]])
    documents, items, [report] = load_multihop(write_jsonl(tmp_path / "h.jsonl", [record]), source="hp")
    assert items.height == 1 and "Empty page" not in documents["title"].to_list()
    assert "supporting facts past the paragraph's last sentence: 1" in report.notes
    assert "blank non-supporting paragraphs (no document): 1" in report.notes


# --------------------------------------------------------------------------- malformed records


def without(base: dict, key: str) -> dict:
    return {k: v for k, v in copy.deepcopy(base).items() if k != key}


BAD = [
    # (good record of the format, bad record, field, reason)
    (HOTPOT_BRIDGE, without(HOTPOT_BRIDGE, "question"), "question", "missing"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, answer=["Chief of Protocol"]), "answer", "expected a string, got list"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, answer_aliases="Chief of Protocol"), "answer_aliases",
     "expected a list of strings"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, context=[]), "context", "empty list"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, context="Shirley Temple was an actress."), "context", "expected a list"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, context=[["Shirley Temple", "one string"]]), "context",
     "sentences: expected a list of strings, got str"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, supporting_facts=[["Shirley Temple Black", 0]]), "supporting_facts",
     "title 'Shirley Temple Black' is not a paragraph of the context"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, supporting_facts=[["Shirley Temple", "0"]]), "supporting_facts",
     "sent_id: expected an int, got str"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, supporting_facts=[]), "supporting_facts", "empty list"),
    (HOTPOT_BRIDGE, rec(HOTPOT_BRIDGE, context=[["Shirley Temple", ["  "]], ED_WOOD],
                                  supporting_facts=[["Shirley Temple", 0]]), "context",
     "supporting paragraph 'Shirley Temple' has no text"),
    (TWOWIKI, rec(TWOWIKI, evidences="director"), "evidences", "expected a list of"),
    (MUSIQUE, without(MUSIQUE, "paragraphs") | {"context": None}, "paragraphs", "missing"),
    (MUSIQUE, rec(MUSIQUE, paragraphs=[]), "paragraphs", "empty list"),
    (MUSIQUE, rec(MUSIQUE, paragraphs=[{**p, "is_supporting": "yes"} for p in MUSIQUE["paragraphs"]]), "paragraphs",
     "is_supporting: expected bool, got str"),
    (MUSIQUE, rec(MUSIQUE, paragraphs=[{**p, "is_supporting": False} for p in MUSIQUE["paragraphs"]]), "paragraphs",
     "no paragraph has is_supporting"),
    (MUSIQUE, rec(MUSIQUE, paragraphs=[{**p, "idx": 0} for p in MUSIQUE["paragraphs"]]), "paragraphs", "idx 0 repeated"),
    (MUSIQUE, rec(MUSIQUE, question_decomposition=[{"id": 1, "question": "q", "answer": "a",
                                                    "paragraph_support_idx": 7}]), "question_decomposition",
     "paragraph_support_idx 7 is no paragraph's idx"),
    (MUSIQUE, rec(MUSIQUE, answer_aliases=["in 1894", 1894]), "answer_aliases", "element 1 is int"),
    (MUSIQUE, rec(MUSIQUE, answerable="yes"), "answerable", "expected bool or null, got str"),
]


@pytest.mark.parametrize(("good", "bad", "field", "reason"), BAD)
def test_malformed_records_name_file_record_id_and_field(tmp_path, good, bad, field, reason):
    id_field = "id" if "paragraphs" in good else "_id"
    bad = {**bad, id_field: "bad"}
    path = write_jsonl(tmp_path / "dev.jsonl", [good, bad])
    with pytest.raises(RecordError) as exc:
        load_multihop(path, source="m")
    err = exc.value
    assert (err.file, err.index, err.record_id, err.field) == (f"{tmp_path.name}/dev.jsonl", 1, "bad", field)
    assert reason in err.reason, err.reason
    documents, items, [report] = load_multihop(path, source="m", on_error="reject")
    assert items.height == 1 and items["item_id"].item().endswith(good[id_field])
    assert (report.records, report.accepted, [(r.index, r.record_id, r.field) for r in report.rejected]) == (
        2, 1, [(1, "bad", field)])
    # a rejected record adds no documents
    assert set(documents["doc_id"]) == set(load_multihop(write_jsonl(tmp_path / "good.jsonl", [good]), source="m")[0]["doc_id"])


def test_duplicate_ids_and_undecodable_bytes(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_bytes(json.dumps(HOTPOT_BRIDGE).encode() + b"\n" + b'{"_id": "x", "question": "Caf\xe9?"}\n'
                     + json.dumps(rec(HOTPOT_BRIDGE, question="Who played Corliss Archer?")).encode() + b"\n")
    with pytest.raises(RecordError) as exc:
        load_multihop(path, source="m")
    assert (exc.value.file, exc.value.index, exc.value.field) == (f"{tmp_path.name}/dev.jsonl", 1, "<record>")
    assert "undecodable bytes" in exc.value.reason
    _, items, [report] = load_multihop(path, source="m", on_error="reject")
    assert items.height == 1
    assert [(r.index, r.record_id, r.field) for r in report.rejected] == [
        (1, None, "<record>"), (2, HOTPOT_BRIDGE["_id"], "_id")]
    assert "already loaded from" in report.rejected[1].reason
    # the same record in a second file is a duplicate too
    other = write_jsonl(tmp_path / "again.jsonl", [HOTPOT_BRIDGE])
    with pytest.raises(RecordError, match=r"again.jsonl record 0 .*field '_id': item 'm-hotpotqa-.*already loaded"):
        load_multihop([write_jsonl(tmp_path / "one.jsonl", [HOTPOT_BRIDGE]), other], source="m")


def test_a_file_of_no_known_shape_is_a_file_error(tmp_path):
    path = write_jsonl(tmp_path / "squad.jsonl", [{"id": "1", "question": "q", "context": "c", "answers": ["a"]}])
    with pytest.raises(RecordError, match=r"squad.jsonl: field '<file>': no record has the fields"):
        load_multihop(path, source="m")
    with pytest.raises(ValueError, match="format must be"):
        load_multihop(path, source="m", format="squad")


# --------------------------------------------------------------------------- config entry, validate, assembly


def test_source_kind_and_validate_detection(tmp_path):
    hp = write_jsonl(tmp_path / "hotpot.jsonl", [HOTPOT_COMPARISON])
    wiki = write_jsonl(tmp_path / "2wiki.jsonl", [TWOWIKI])
    mq = write_jsonl(tmp_path / "musique.jsonl", [MUSIQUE, rec(MUSIQUE, id="u", answerable=False)])
    assert "multihop" in SOURCE_KINDS
    assert [detect_kind(p) for p in (hp, wiki, mq)] == ["hotpotqa", "2wikimqa", "musique"]
    kind, [report] = validate_path(mq)
    assert (kind, report.accepted, [r.field for r in report.rejected]) == ("musique", 1, ["answerable"])
    documents, items, reports = multihop_source(SourceConfig("mh", "multihop", {"paths": [str(hp), str(wiki), str(mq)]}))
    assert items["task"].to_list() == ["hotpotqa", "2wikimqa", "musique"] and len(reports) == 3
    assert set(documents["domain"]) == {"multihop/hotpotqa", "multihop/2wikimqa", "multihop/musique"}


def test_documents_reassemble_into_instances_at_two_lengths(tmp_path):
    path = write_jsonl(tmp_path / "hotpot.jsonl", [HOTPOT_COMPARISON, HOTPOT_BRIDGE])
    documents, items, _ = load_multihop(path, source="hp")
    bridge = items.filter(pl.col("task") == "hotpotqa").row(1, named=True)
    # the other record's paragraphs are same-domain fillers; none may hold "Chief of Protocol"
    pool = {d["title"] for d in filler_pool(documents, bridge, cross_domain=False)}
    assert {"Ed Wood (film)", "Scott Derrickson", "Ed Wood"} <= pool and "Shirley Temple" not in pool

    levels = ("256", "512")
    config = BenchmarkConfig(name="mh", sources=(SourceConfig(name="hp", kind="multihop"),), lengths=levels,
                             base_lengths=("256",), long_lengths=("512",), depths=(0.0, 1.0), items_per_length=2,
                             length_tolerance=0.05, cross_domain_fill=False)
    counter = TokenCounter.load()
    text = dict(documents.select("doc_id", "text").iter_rows())
    sizes = {}
    for level in levels:
        inst = build_instances(items, documents, schemas.empty("passages"), schemas.empty("hard_negatives"),
                               level=level, config=config, counter=counter)
        target = int(level)
        assert inst.height == 2 * 2
        assert ((inst["input_tokens"] - target).abs() <= 0.05 * target).all(), inst["input_tokens"].to_list()
        for ev, ctx, used in inst.select("evidence_doc_ids", "context", "context_doc_ids").iter_rows():
            assert all(text[d] in ctx for d in ev)  # the supporting paragraphs, verbatim
            assert set(ev) <= {u.removesuffix(":cut") for u in used}
        sizes[level] = inst["context_doc_ids"].list.len().mean()
    assert sizes["512"] > sizes["256"]  # a longer level holds more of the paragraphs


def test_hub_dataset_folder_in_the_hotpot_qa_layout(monkeypatch, tmp_path):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    repo = tmp_path / "distractor"
    repo.mkdir()
    record = {"id": HOTPOT_BRIDGE["_id"], "question": HOTPOT_BRIDGE["question"], "answer": HOTPOT_BRIDGE["answer"],
              "type": "bridge", "level": "medium",
              "supporting_facts": {"title": [t for t, _ in HOTPOT_BRIDGE["supporting_facts"]],
                                   "sent_id": [s for _, s in HOTPOT_BRIDGE["supporting_facts"]]},
              "context": {"title": [t for t, _ in HOTPOT_BRIDGE["context"]],
                          "sentences": [s for _, s in HOTPOT_BRIDGE["context"]]}}
    write_jsonl(repo / "validation.jsonl", [record])
    documents, items, [report] = multihop_source(SourceConfig("hp", "multihop", {"hf_dataset": str(repo),
                                                                                 "hf_split": "validation"}))
    assert items["item_id"].to_list() == [f"hp-hotpotqa-{HOTPOT_BRIDGE['_id']}"] and documents.height == 5
    assert evidence_titles(documents, items.row(0, named=True)) == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert report.notes[0].startswith("format hotpotqa (detected)")
