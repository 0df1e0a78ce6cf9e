"""Keyword and phrase replacement (KPR): rule files, rule checks, whole-word case-aware
application, automatic proposal on the demo corpus, and the no-term-left checker."""

from __future__ import annotations

import json

import pytest

from lc_pipeline import schemas
from lc_pipeline.construct.replacement import (
    ReplacementRule,
    TermIndex,
    apply_rules,
    check_new_terms_absent,
    check_rules,
    entity_spans,
    load_rules,
    propose_rules,
    remaining_terms,
    rules_by_item,
    rules_frame,
)
from lc_pipeline.sources.demo_corpus import build_demo_corpus


def R(old: str, new: str, item: str = "q1") -> ReplacementRule:
    return ReplacementRule(item, old, new)


def test_rules_from_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "rules.csv"
    csv_path.write_text("item_id,old,new,note\nq1,Ostik,Varnel,surname\nq1,Lytoford,Brennmark,\nq2,Bemresh,Koldavik,\n")
    jsonl_path = tmp_path / "rules.jsonl"
    jsonl_path.write_text("\n".join(json.dumps({"item_id": "q1", "old": o, "new": n})
                                    for o, n in [("Ostik", "Varnel"), ("Lytoford", "Brennmark")]) + "\n")
    from_csv, from_jsonl = load_rules(csv_path), load_rules(jsonl_path)
    assert [(r.item_id, r.old, r.new) for r in from_csv] == [("q1", "Ostik", "Varnel"), ("q1", "Lytoford", "Brennmark"),
                                                             ("q2", "Bemresh", "Koldavik")]
    assert from_jsonl == from_csv[:2]
    frame = rules_frame(from_csv)
    assert frame.schema == schemas.REPLACEMENT_RULES and frame["rule_index"].to_list() == [0, 1, 0]
    assert rules_by_item(frame)["q1"] == from_csv[:2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("item_id,old\nq1,Ostik\n", "header lacks column(s) ['new']"),
        ("item_id,old,new\nq1,Ostik,\n", "row 2 (item 'q1'): field 'new': missing or empty"),
        ("item_id,old,new\nq1,Ostik,Varnel\nq1,ostik,Brenn\n", "field 'old': the term is already replaced"),
        ("item_id,old,new\nq1,Ostik,Varnel\nq1,Rilos,Varnel\n", "never two olds to one new"),
        ("item_id,old,new\nq1,Ostik,Ostik Varnel\n", "contains the old term 'Ostik'"),
        ("item_id,old,new\nq1,Ostik,Varnel\nq1,Varnel,Brenn\n", "contains the old term 'Varnel'"),  # would chain
        ("item_id,old,new\nq1,Ostik,OSTIK\n", "field 'new' equals the old term"),
    ],
)
def test_bad_rule_files_name_the_record_and_field(tmp_path, content, message):
    path = tmp_path / "rules.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        load_rules(path)


def test_bad_jsonl_line_is_named(tmp_path):
    path = tmp_path / "rules.jsonl"
    path.write_text('{"item_id": "q1", "old": "A1", "new": "B1"}\n{"item_id": "q1", "old": "A2"\n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        load_rules(path)


def test_whole_word_case_aware_longest_first_single_pass():
    rules = [R("Ostik", "Varnel"), R("Rilos Ostik", "Kemb Dorrin"), R("Lytoford", "Brennmark")]
    text = ("Rilos Ostik was born in Lytoford. OSTIK and ostik, Ostikov and Ostik's papers; "
            "Rilos\nOstik again. lytoford-born.")
    (out, counts) = apply_rules({"context": text}, rules)
    assert out["context"] == ("Kemb Dorrin was born in Brennmark. VARNEL and varnel, Ostikov and Varnel's papers; "
                              "Kemb Dorrin again. brennmark-born.")
    assert counts == {"Rilos Ostik": 2, "Ostik": 3, "Lytoford": 2}
    assert remaining_terms(out, rules) == []
    assert remaining_terms({"context": text}, rules)[0] == ("context", "Ostik", 6)


def test_chinese_terms_match_inside_running_text():
    rules = [R("贝多芬", "柯霁澜")]
    out, _ = apply_rules({"answers": ["贝多芬"], "context": "被世人推崇的是贝多芬。Beethoven贝多芬"}, rules)
    assert out == {"answers": ["柯霁澜"], "context": "被世人推崇的是柯霁澜。Beethoven柯霁澜"}


def test_a_new_term_already_in_the_context_is_refused():
    with pytest.raises(ValueError, match="rule 'Ostik' -> 'Lytoford'.*already occurs in context"):
        check_new_terms_absent({"context": "Ostik was born in Lytoford."}, [R("Ostik", "Lytoford")], "instance x")


def test_rules_of_different_items_are_checked_separately():
    check_rules([R("Ostik", "Varnel", "q1"), R("Rilos", "Varnel", "q2")])  # one new per item is fine


def test_entity_spans():
    assert entity_spans("What was Rilos Ostik's occupation in the Dikuth Conservatory?", "en") == [
        "Rilos", "Ostik", "Dikuth", "Conservatory"]
    index = TermIndex(["He studied at a conservatory."], "en")
    assert "Conservatory" not in entity_spans("the Dikuth Conservatory", "en", index)  # a common word, not a name
    spans = entity_spans("《毕业风暴》的导演是罗马尼亚人，他出生于北京。", "zh")
    assert spans[0] == "毕业风暴" and "北京" in spans


def test_proposed_rules_on_the_demo_corpus_leave_no_term_and_invent_unused_names():
    documents, items = build_demo_corpus(60, seed=3)
    texts = dict(zip(documents["doc_id"], documents["text"]))
    corpus = [*texts.values(), *documents["title"], *items["question"]]
    index = TermIndex(corpus, "en")
    all_news = []
    for item in items.head(12).iter_rows(named=True):
        evidence = [texts[d] for d in item["evidence_doc_ids"]]
        rules = propose_rules(item, evidence, index, seed=5)
        assert rules, item["question"]
        news = [r.new for r in rules]
        assert len(set(news)) == len(news)
        for new in news:  # invented: nowhere in the corpus
            assert not any(new.lower() in t.lower() for t in corpus)
        # The answer's names are replaced first (LV-Eval replaces answer terms, and the question's).
        answer_names = entity_spans(item["answers"][0], "en", index)
        assert [r.old for r in rules[: len(answer_names)]] == answer_names[: len(rules)]
        fields = {"question": item["question"], "answers": item["answers"], "answer_keywords": item["answer_keywords"],
                  "context": "\n\n".join(evidence)}
        out, counts = apply_rules(fields, rules)
        assert remaining_terms(out, rules) == [] and sum(counts.values()) > 0
        assert out["question"] != item["question"] or out["answers"] != item["answers"]
        all_news += news
    # Same inputs and seed, same rules (the index is rebuilt: proposals depend on item order).
    index2 = TermIndex(corpus, "en")
    again = []
    for item in items.head(12).iter_rows(named=True):
        again += [r.new for r in propose_rules(item, [texts[d] for d in item["evidence_doc_ids"]], index2, seed=5)]
    assert again == all_news


def test_chinese_proposal_invents_names_sharing_no_character():
    item = {"item_id": "zh1", "language": "zh", "question": "被世人推崇为现代物理学奠基人的科学家贝多芬出生在哪里？",
            "answers": ["北京"]}
    evidence = ["贝多芬出生于北京，后来在上海工作。"]
    index = TermIndex(evidence + [item["question"]], "zh")
    rules = propose_rules(item, evidence, index, seed=1)
    assert rules[0].old == "北京" and {r.old for r in rules} >= {"北京", "贝多芬"}
    for r in rules:
        assert not set(r.old) & set(r.new) and r.new not in "".join(evidence)
    out, _ = apply_rules({"question": item["question"], "answers": item["answers"], "context": evidence[0]}, rules)
    assert remaining_terms(out, rules) == []
