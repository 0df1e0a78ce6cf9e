"""Instances at 4k, 8k and 16k assembled from real LongBench documents (../shared/data)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.longbench.sources import load_longbench
from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.construct.assembly import build_instances, filler_pool, fitting_items
from lc_pipeline.construct.tokens import TokenCounter

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
needs_shared = pytest.mark.skipif(not (SHARED / "longbench").exists(),
                                  reason="../shared/data/longbench is not beside the checkout")

LEVELS = ("4k", "8k", "16k")


@pytest.fixture(scope="module")
def corpus():
    documents, items, reports = load_longbench(SHARED / "longbench", source="lb")
    assert sum(len(r.rejected) for r in reports) == 0
    return documents, items


@needs_shared
def test_real_documents_fill_every_level_within_tolerance(corpus):
    documents, items = corpus
    # The QA assembler is for QA items; classification contexts (trec) all contain every label,
    # so no same-domain filler is free of the answer.
    items = items.filter(pl.col("category").str.ends_with("QA"))
    counter = TokenCounter.load()
    config = BenchmarkConfig(name="lb", sources=(SourceConfig(name="lb", kind="longbench"),), lengths=LEVELS,
                             base_lengths=("4k",), long_lengths=("8k", "16k"), depths=(0.0, 0.5, 1.0),
                             items_per_length=6, length_tolerance=0.05)
    eligible, too_long = fitting_items(items, documents, counter, 4096)
    # Long LongBench records cannot be 4k instances; they are reported, not silently dropped.
    assert eligible.height + too_long.height == items.height and too_long.height > 0
    assert (too_long["evidence_tokens"] > 4096).all()

    no_negatives = schemas.empty("hard_negatives")
    no_passages = schemas.empty("passages")
    by_level = {lv: build_instances(eligible, documents, no_passages, no_negatives, level=lv, config=config,
                                    counter=counter) for lv in LEVELS}
    text = dict(documents.select("doc_id", "text").iter_rows())
    for lv, inst in by_level.items():
        target = int(lv[:-1]) * 1024
        assert inst.height == 6 * 3
        errors = (inst["input_tokens"] - target).abs() / target
        assert (errors <= 0.05).all(), (lv, errors.max())
        assert set(inst["tokenizer"]) == {"cl100k_base"}
        for ev, ctx in inst.select("evidence_doc_ids", "context").iter_rows():
            assert all(text[d] in ctx for d in ev)  # the real evidence, verbatim
    # The sample holds only 7-13 documents per task: past them, fillers come from the other English
    # tasks (cross_domain_fill), and every same-domain document is used before any other.
    domain = dict(documents.select("doc_id", "domain").iter_rows())
    items_by_id = {r["item_id"]: r for r in eligible.iter_rows(named=True)}
    crossed = 0
    for inst in by_level["16k"].iter_rows(named=True):
        used = {d.removesuffix(":cut") for d in inst["context_doc_ids"]}
        own = {domain[d] for d in inst["evidence_doc_ids"]}
        if any(domain[d] not in own for d in used):
            crossed += 1
            same_domain = {r["doc_id"] for r in filler_pool(documents, items_by_id[inst["item_id"]], cross_domain=False)}
            assert same_domain <= used, inst["instance_id"]
    assert crossed
    # The same real items at every level; only the context differs.
    assert len({tuple(sorted(set(inst["item_id"]))) for inst in by_level.values()}) == 1
    assert pl.concat(by_level.values())["task"].n_unique() >= 3


def test_fitting_items_splits_by_the_smallest_level():
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    documents, items = build_demo_corpus(n_entities=40, seed=2)
    counter = TokenCounter.load()
    eligible, too_long = fitting_items(items, documents, counter, 512)
    assert eligible.height + too_long.height == items.height
    assert set(too_long["item_id"]).isdisjoint(eligible["item_id"])
    # Two-hop items carry two ~300-token documents: they are the ones that do not fit 512 tokens.
    assert set(items.filter(pl.col("item_id").is_in(too_long["item_id"]))["task"]) == {"multi_hop_qa"}
    assert (too_long["evidence_tokens"] > 512).all()
