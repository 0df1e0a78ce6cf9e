"""HELMET's per-dataset RAG and re-rank tasks through the graph (spec helmet.md §2.2, §2.3): NQ, TriviaQA and
HotpotQA from KILT files, PopQA with its popularity filter, MS MARCO from TREC DL files, each task reading only its
source. The fixtures (tests/fixtures/helmet/{kilt,popqa,msmarco}, invented text) are a few records, so a user task
file scales the spec's per_level passage counts down (stated here: RAG 8k 12 / 16k 24, MS MARCO 8k 10 / 16k 20,
instead of 50 / 105 and 50 / 130); every other field is the packaged task's."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.benchmarks.helmet.construction import depth_position
from lc_pipeline.benchmarks.helmet.metrics import rerank_score
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.runner import Runner

pytestmark = pytest.mark.slow

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "helmet"
RAG_K = {"8k": 12, "16k": 24}
RERANK_K = {"8k": 10, "16k": 20}
SCALED = {"benchmark": "helmet", "tasks": [
    *({"name": t, "builder": {"name": "helmet", "options": {"kind": kind, "source": t, "per_level": RAG_K}}}
      for t, kind in (("nq", "rag"), ("triviaqa", "rag"), ("popqa", "rag"), ("hotpotqa", "rag_multi"))),
    {"name": "msmarco", "builder": {"name": "helmet", "options": {"kind": "rerank", "source": "msmarco",
                                                                  "per_level": RERANK_K}}},
]}


def kilt(name: str, qa: str, **extra) -> dict:
    return {"name": name, "kind": "kilt", "passages": str(FIX / "kilt" / "passages.jsonl"), "qa": qa, **extra}


CONFIG = {
    "name": "helmet-rag-datasets",
    "sources": [
        kilt("nq", str(FIX / "kilt" / "nq-dev-kilt.jsonl")),
        kilt("triviaqa", str(FIX / "kilt" / "triviaqa-dev-kilt.jsonl")),
        kilt("hotpotqa", str(FIX / "kilt" / "hotpotqa-dev-kilt.jsonl")),
        kilt("popqa", str(FIX / "popqa" / "test.jsonl"), max_popularity=1000),
        {"name": "msmarco", "kind": "msmarco", "queries": str(FIX / "msmarco" / "queries.tsv"),
         "qrels": str(FIX / "msmarco" / "qrels.txt"), "candidates": str(FIX / "msmarco" / "top1000.tsv")},
    ],
    "lengths": ["8k", "16k"],
    "base_lengths": ["8k"],
    "long_lengths": ["16k"],
    "items_per_length": 0,
    "retrieval_top_k": 400,
    "hard_negatives_per_item": 200,
    "helmet": {"tasks": ["nq", "triviaqa", "popqa", "hotpotqa", "msmarco"], "n_per_task": 2},
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("helmet_rag")
    (tmp / "scaled.yaml").write_text(yaml.safe_dump(SCALED, sort_keys=False))
    (tmp / "c.yaml").write_text(yaml.safe_dump({**CONFIG, "task_files": [str(tmp / "scaled.yaml")]}))
    settings = settings_for(tmp, tmp / "c.yaml")
    with dg.instance_for_test() as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])
    return settings.lake_dir


def rows(lake: Path, level: str, task: str) -> pl.DataFrame:
    return pl.read_parquet(lake / "instances" / f"length={level}" / "data.parquet").filter(pl.col("task") == task)


@pytest.mark.parametrize("level", ["8k", "16k"])
@pytest.mark.parametrize("task", ["nq", "triviaqa", "popqa"])
def test_single_gold_rag_has_k_passages_and_the_gold_at_six_depths(lake, level, task):
    df = rows(lake, level, task)
    assert df.height == 2 * 6 and set(df["source"]) == {task}
    assert (df["context_doc_ids"].list.len() == RAG_K[level]).all()
    assert (df["n_hard_negatives"] == RAG_K[level] - 1).all()
    assert (df["input_tokens"] <= {"8k": 8192, "16k": 16384}[level]).all()
    for item, group in df.group_by("item_id"):
        assert sorted(group["depth"]) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        gold = group["evidence_doc_ids"].to_list()[0][0]
        for depth, ids in zip(group["depth"], group["context_doc_ids"].to_list()):
            assert [i for i, b in enumerate(ids) if b.split("#")[0] == gold] == [depth_position(depth, RAG_K[level])]
        # The gold is there once; no other passage holds an answer.
        answers = [a.lower() for a in group["answers"].to_list()[0]]
        context = group["context"][0].lower()
        passages = context.split("\n\n")
        assert sum(any(a in p for a in answers) for p in passages) == 1
        # Two 3-passage demonstrations from other items of the same source, never the test question.
        prompt = group["prompt"][0]
        demos = prompt.split(group["context"][0])[0]
        assert demos.count("\nQuestion: ") == 2 and group["question"][0] not in demos


@pytest.mark.parametrize("level", ["8k", "16k"])
def test_hotpotqa_has_both_golds_among_k_passages_in_three_orders(lake, level):
    df = rows(lake, level, "hotpotqa")
    assert df.height == 2 * 3
    assert (df["context_doc_ids"].list.len() == RAG_K[level]).all()
    assert (df["n_hard_negatives"] == RAG_K[level] - 2).all()
    for _, group in df.group_by("item_id"):
        golds = group["evidence_doc_ids"].to_list()[0]
        assert len(golds) == 2
        orders = [tuple(ids) for ids in group["context_doc_ids"].to_list()]
        assert len(set(orders)) == 3 and len({frozenset(o) for o in orders}) == 1
        assert all(set(golds) <= {b.split("#")[0] for b in o} for o in orders)


def test_popqa_filter_is_counted_and_its_items_are_the_unpopular_ones(lake):
    items = pl.read_parquet(lake / "source_items" / "source=popqa" / "data.parquet")
    assert items.height == 5  # 7 records, 2 with s_pop >= 1000
    assert all(json.loads(f)["s_pop"] < 1000 for f in items["record_fields"])
    df = rows(lake, "8k", "popqa")
    assert set(df["item_id"]) <= set(items["item_id"])


@pytest.mark.parametrize("level", ["8k", "16k"])
def test_msmarco_rows_hold_k_label_balanced_candidates_with_their_qrels(lake, level):
    df = rows(lake, level, "msmarco")
    k = RERANK_K[level]
    assert df.height == 2 * 3 and (df["context_doc_ids"].list.len() == k).all()
    for _, group in df.group_by("item_id"):
        qrels = json.loads(group["record_fields"][0])["qrels"]
        assert len(qrels) == k
        counts = [list(qrels.values()).count(g) for g in (3, 2, 1, 0)]
        # Fixture: 2 grade-3, 3 grade-2, 4 grade-1, 21 grade-0 candidates per query. k=10: shares of 3 (2 + 2 extra
        # to the top grades); grade 3 has only 2, its rest goes to the next open grade.
        assert counts == ([2, 3, 3, 2] if k == 10 else [2, 3, 4, 11])  # equal shares, a short grade's rest shared out
        assert sorted(group["answers"].to_list()[0]) == sorted(f"{p}:{g}" for p, g in qrels.items() if g > 0)
        assert len({tuple(o) for o in group["context_doc_ids"].to_list()}) == 3
        for context in group["context"]:
            assert all(b.startswith("[ID: ") and "] Document: " in b for b in context.split("\n\n"))
        ideal = " > ".join(sorted(qrels, key=lambda p: -qrels[p]))
        assert rerank_score(f"Ranking: {ideal}", group["answers"].to_list()[0]) == pytest.approx(1.0)
        demos = group["prompt"][0].split(group["context"][0])[0]
        assert demos.count("\nQuery: ") == 2 and demos.count("[ID: ") == 20  # 2 demos of 10 passages
