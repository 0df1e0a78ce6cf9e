"""Plain instances assembled from the demo corpus -> their CFI, KPR and CFI+KPR variants
(LV-Eval's order: mixing, then CFI, then KPR)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.construct.assembly import build_instances
from lc_pipeline.construct.confusing_facts import (
    accepted_facts,
    facts_frame,
    knowledge_base_facts,
)
from lc_pipeline.construct.replacement import (
    ReplacementRule,
    TermIndex,
    propose_rules,
    remaining_terms,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.variants import (
    INSERTIONS_DTYPE,
    available_variants,
    derive_variants,
    kpr_problems,
)
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.text import contains_answer


@pytest.fixture(scope="module")
def setup():
    documents, items = build_demo_corpus(60, seed=3)
    counter = TokenCounter.load()
    config = BenchmarkConfig(name="t", sources=(SourceConfig(name="demo", kind="demo_corpus"),), lengths=("1k",),
                             base_lengths=("1k",), long_lengths=("1k",), depths=(0.0, 1.0), items_per_length=6)
    plain = build_instances(items, documents, schemas.empty("passages"), schemas.empty("hard_negatives"),
                            level="1k", config=config, counter=counter)
    facts = accepted_facts(facts_frame(knowledge_base_facts(documents, items, seed=1)))
    texts = dict(zip(documents["doc_id"], documents["text"]))
    index = TermIndex([*texts.values(), *documents["title"], *items["question"],
                       *(t for fs in facts.values() for _, t in fs)], "en")
    by_item = {r["item_id"]: r for r in items.iter_rows(named=True)}
    rules = {}
    for item_id in sorted(set(plain["item_id"])):
        item = by_item[item_id]
        rules[item_id] = propose_rules(item, [texts[d] for d in item["evidence_doc_ids"]], index, seed=4)
    return plain, facts, rules, counter


def _variants(setup, row, seed=11):
    _, facts, rules, counter = setup
    item = row["item_id"]
    wanted = available_variants(len(facts.get(item, [])), len(rules[item]))
    return derive_variants(row, facts.get(item, []), rules[item], seed=seed, counter=counter, variants=wanted)


def test_variants_come_in_pipeline_order_and_do_what_they_say(setup):
    plain, facts, rules, _ = setup
    built = 0
    for row in plain.iter_rows(named=True):
        item_facts, item_rules = facts.get(row["item_id"], []), rules[row["item_id"]]
        out = _variants(setup, row)
        assert [r["variant"] for r in out] == list(available_variants(len(item_facts), len(item_rules)))
        by_variant = {r["variant"]: r for r in out}
        if "cfi" in by_variant:
            cfi = by_variant["cfi"]
            assert cfi["question"] == row["question"] and cfi["answers"] == row["answers"]
            assert len(cfi["insertions"]) == len(item_facts)
            for point, (fid, text) in zip(cfi["insertions"], item_facts):
                assert point["fact_id"] == fid
                assert cfi["context"][point["char_offset"] : point["char_offset"] + point["char_length"]] == text
            assert cfi["input_tokens"] > row["input_tokens"]  # the facts add their own tokens
            assert not contains_answer(" ".join(t for _, t in item_facts), row["answers"])
        if "kpr" in by_variant:
            kpr = by_variant["kpr"]
            fields = {k: kpr[k] for k in ("question", "answers", "answer_keywords", "context", "prompt")}
            assert remaining_terms(fields, item_rules) == []  # acceptance 2: no replaced term anywhere
            assert kpr["insertions"] == [] and len(kpr["replacement_rule_ids"]) == len(item_rules)
            assert kpr["prompt"].endswith(f"Question: {kpr['question']}\nAnswer:")
        if "cfi_kpr" in by_variant:
            both = by_variant["cfi_kpr"]
            assert remaining_terms({"context": both["context"]}, item_rules) == []
            # Same insertion points as the CFI row, in the rewritten context; the facts were rewritten too.
            cfi_points = by_variant["cfi"]["insertions"]
            assert [p["sentence_index"] for p in both["insertions"]] == [p["sentence_index"] for p in cfi_points]
            for p in both["insertions"]:
                fact = both["context"][p["char_offset"] : p["char_offset"] + p["char_length"]]
                assert fact.endswith(".") and remaining_terms({"fact": fact}, item_rules) == []
        ids = [r["instance_id"] for r in out]
        assert len(set(ids)) == len(ids) and row["instance_id"] not in ids
        for r in out:
            assert 0 <= min(r["evidence_depths"]) and max(r["evidence_depths"]) < 1
            assert r["context"] in r["prompt"]
        built += len(out)
    assert built >= plain.height  # every item got at least one variant
    assert any(len(_variants(setup, r)) == 3 for r in plain.iter_rows(named=True))


def test_same_seed_gives_identical_rows_and_another_seed_moves_the_facts(setup):
    plain, facts, _, _ = setup
    row = next(r for r in plain.iter_rows(named=True) if facts.get(r["item_id"]))
    first = json.dumps(_variants(setup, row, seed=11), sort_keys=True)
    assert json.dumps(_variants(setup, row, seed=11), sort_keys=True) == first
    assert json.dumps(_variants(setup, row, seed=12), sort_keys=True) != first


def test_a_variant_that_cannot_be_built_is_refused(setup):
    plain, _, rules, counter = setup
    row = next(plain.iter_rows(named=True))
    with pytest.raises(ValueError, match="need confusing facts"):
        derive_variants(row, [], rules[row["item_id"]], seed=1, counter=counter, variants=("cfi",))
    with pytest.raises(ValueError, match="need replacement rules"):
        derive_variants(row, [("f", "A fact.")], [], seed=1, counter=counter, variants=("kpr",))
    with pytest.raises(ValueError, match="expected a 'plain' row"):
        derive_variants({**row, "variant": "cfi"}, [], [], seed=1, counter=counter, variants=())
    assert available_variants(0, 3) == ("kpr",) and available_variants(2, 0) == ("cfi",)


def test_kpr_check_and_the_insertions_column_type(setup):
    plain, _, rules, _ = setup
    rows = [r for row in plain.iter_rows(named=True) for r in _variants(setup, row)]
    assert kpr_problems(rows, rules) == []
    # A rule the rows were not rewritten with is reported with instance, field and offset.
    row = next(r for r in rows if r["variant"] == "kpr")
    stale = {row["item_id"]: [ReplacementRule(row["item_id"], row["question"].split()[-1].rstrip("?"), "Zzyx")]}
    assert "field 'question' still has" in kpr_problems([row], stale)[0]
    column = pl.Series("insertions", [r["insertions"] for r in rows], dtype=INSERTIONS_DTYPE)
    assert column.len() == len(rows)
