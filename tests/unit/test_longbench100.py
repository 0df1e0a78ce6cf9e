"""100-LongBench construction: spec §11 generator checklist on the demo corpus and on the
shared LongBench sample."""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline.config import level_tokens
from lc_pipeline.benchmarks.longbench100.construction import (
    COUNTING_STARS,
    KV_RETRIEVAL,
    LABEL_TOKENS,
    MULTI_DOC_QA,
    MULTI_DOC_SUM,
    PASSAGE_COUNT,
    PASSAGE_RETRIEVAL,
    SINGLE_DOC_QA,
    SINGLE_DOC_SUM,
    Corpus,
    build_longbench100,
    fill_with_repeats,
    greedy_fill,
    star_options,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.schemas import INSTANCES, PRIOR_KNOWLEDGE
from lc_pipeline.score.prior_knowledge import prior_knowledge_frame
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.spec import BuilderRef

LB100 = {spec.name: spec for spec in load_catalog().tasks("longbench100")}  # the packaged task specs


def specs(names):
    return [LB100[n] for n in names]


DEMO_TASKS = [KV_RETRIEVAL, COUNTING_STARS, PASSAGE_COUNT, SINGLE_DOC_QA, MULTI_DOC_QA]
DEMO_LEVELS = ["2k", "4k"]
LB_TASKS = [
    PASSAGE_RETRIEVAL,
    SINGLE_DOC_QA,
    MULTI_DOC_QA,
    SINGLE_DOC_SUM,
    MULTI_DOC_SUM,
]
LB_LEVELS = ["8k", "16k"]
NEEDLE_SLACK = 300  # KV / counting-stars needle sentences are budgeted before the fill


def _shared_data() -> Path:
    env = os.environ.get("LCP_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="module")
def counter():
    return TokenCounter.load()


@pytest.fixture(scope="module")
def demo():
    return build_demo_corpus(n_entities=240)


@pytest.fixture(scope="module")
def demo_built(demo, counter):
    docs, items = demo
    return {
        lv: build_longbench100(
            docs,
            items,
            level=lv,
            n_per_task=4,
            seed=7,
            counter=counter,
            tasks=specs(DEMO_TASKS),
        )
        for lv in DEMO_LEVELS
    }


@pytest.fixture(scope="module")
def longbench():
    root = _shared_data() / "longbench"
    if not root.is_dir():
        pytest.skip(f"shared LongBench data not found at {root} (set LCP_SHARED_DATA to its parent folder)")
    from lc_pipeline.benchmarks.longbench.sources import load_longbench

    docs, items, _ = load_longbench(str(root), source="lb")
    return docs, items


@pytest.fixture(scope="module")
def lb_built(longbench, counter):
    docs, items = longbench
    return {
        lv: build_longbench100(docs, items, level=lv, n_per_task=3, seed=7, counter=counter, tasks=specs(LB_TASKS))
        for lv in LB_LEVELS
    }


# --------------------------------------------------------------------------- fill


def test_greedy_fill_strictly_under_budget_without_replacement():
    pool = [(f"d{i}", n) for i, n in enumerate([100, 200, 300, 400, 50, 50, 999])]
    for s in range(50):
        chosen = greedy_fill(pool, 1000, random.Random(s))
        sizes = dict(pool)
        total = sum(sizes[d] for d in chosen)
        assert total < 1000
        assert len(set(chosen)) == len(chosen)
        # stops only when nothing left fits
        assert all(n >= 1000 - total for d, n in pool if d not in chosen)
    assert greedy_fill([("a", 10)], 10, random.Random(0)) == []  # strict '<'


def test_fill_with_repeats_is_without_replacement():
    pool = [(f"d{i}", 30 + i) for i in range(40)]
    for s in range(30):
        picks = fill_with_repeats(pool, 1000, random.Random(s))
        ids = [d for d, _ in picks]
        assert len(set(ids)) == len(ids)
        assert all(1 <= r <= 3 for _, r in picks)
        assert sum(dict(pool)[d] * r for d, r in picks) < 1000


def test_star_options_single_correct_option():
    for s in range(200):
        rng = random.Random(s)
        gold = [rng.randint(1, 100) for _ in range(4)]
        if s % 50 == 0:
            gold = [5, 5, 5, 5]  # swaps cannot differ: fallback path
        options, idx = star_options(gold, rng)
        assert len(options) == 5 and options[0] == "unanswerable"
        assert options[idx - 1] == str(gold)
        assert len(set(options)) == 5


# --------------------------------------------------------------------------- checks shared by both corpora


def _pool_for(c: Corpus, task: str) -> list[str]:
    return {
        KV_RETRIEVAL: c.noise_pool,
        COUNTING_STARS: c.noise_pool,
        PASSAGE_COUNT: c.noise_pool,
        PASSAGE_RETRIEVAL: c.summary_pool,
        SINGLE_DOC_QA: c.qa_pool,
        MULTI_DOC_QA: c.qa_pool,
        SINGLE_DOC_SUM: c.sum_pool,
        MULTI_DOC_SUM: c.sum_pool,
    }[task]


def _check_instances(df: pl.DataFrame, c: Corpus, level: str, tasks: list[str], n: int) -> None:
    assert df.schema == INSTANCES
    target = level_tokens(level)
    assert df.group_by("task").len().sort("task").rows() == sorted((t, n) for t in tasks)
    assert df["instance_id"].n_unique() == df.height
    for r in df.iter_rows(named=True):
        task, ids = r["task"], r["context_doc_ids"]
        assert r["category"] == LB100[task].category
        assert r["max_new_tokens"] == LB100[task].max_new_tokens
        assert r["tokenizer"] == "cl100k_base" and r["target_tokens"] == target
        assert r["variant"] == "plain" and 0.0 <= r["depth"] <= 1.0
        assert r["context"] in r["prompt"] and r["input_tokens"] > r["context_tokens"]
        # upper tolerance (spec §11): raw docs < target; labels add at most LABEL_TOKENS per block
        assert r["context_tokens"] < target + len(ids) * LABEL_TOKENS, (
            task,
            r["context_tokens"],
        )
        raw = sum(c.tokens[d] for d in ids)
        assert raw < target
        # lower tolerance: greedy fill stops only when no unpicked pool document fits the rest
        slack = NEEDLE_SLACK if task in (KV_RETRIEVAL, COUNTING_STARS) else 0
        unpicked = [c.tokens[d] for d in _pool_for(c, task) if d not in set(ids)]
        assert all(t >= target - slack - raw for t in unpicked), (
            task,
            raw,
            min(unpicked, default=None),
        )
        # no document twice (passage count repeats by design: its gold = distinct documents)
        if task == PASSAGE_COUNT:
            assert r["answers"] == [str(len(set(ids)))]
            assert sorted(set(ids)) == r["evidence_doc_ids"]
            assert len(ids) >= len(set(ids))
        else:
            assert len(set(ids)) == len(ids), task
        # the true context is present verbatim
        for d in r["evidence_doc_ids"]:
            assert c.docs[d]["text"].strip() in r["context"]
            assert d in ids
        if task == KV_RETRIEVAL:
            assert len(ids) >= 4
            key = r["question"].split("value of the key ")[1].split("?")[0]
            assert f"The value of {key} is {r['answers'][0]}." in r["context"]
            assert r["context"].count("The value of ") == 3
        if task == COUNTING_STARS:
            assert len(ids) >= 4
            stars = [
                int(line.split("counted ")[1].split(" ")[0])
                for line in r["context"].split("\n")
                if line.startswith("The little penguin counted ")
            ]
            assert len(stars) == 4
            # Its keywords are the four star sentences, all in the context (the asset's keyword check).
            assert r["answer_keywords"] == [f"The little penguin counted {n} ★" for n in stars]
            assert all(k in r["context"] for k in r["answer_keywords"])
            idx = int(r["answers"][0])
            options = [
                line.split(". ", 1)[1]
                for line in r["question"].split("\n")
                if line[:2] in {f"{i}." for i in range(1, 6)}
            ]
            assert len(options) == 5 and options[0] == "unanswerable"
            assert ast.literal_eval(options[idx - 1]) == stars
            assert sum(o == str(stars) for o in options) == 1
        if task == PASSAGE_RETRIEVAL:
            t = int(r["answers"][0])
            assert ids[t - 1] == r["evidence_doc_ids"][0]
            assert c.summaries[ids[t - 1]] == r["question"]
        if task in (SINGLE_DOC_QA, MULTI_DOC_QA, SINGLE_DOC_SUM, MULTI_DOC_SUM):
            labels = [i + 1 for i, d in enumerate(ids) if d in set(r["evidence_doc_ids"])]
            tail = r["prompt"].split(r["context"])[1]
            head = tail.split("Question:")[0].split("2. Leave")[0]
            named = [int(x) for x in re.findall(r"(?:Passages? |, (?:Passage )?)(\d+)", head)]
            assert named == labels, (task, head)
            assert r["answers"]


# --------------------------------------------------------------------------- demo corpus


@pytest.mark.parametrize("level", DEMO_LEVELS)
def test_demo_instances(demo, demo_built, counter, level):
    c = Corpus.build(*demo, counter)
    _check_instances(demo_built[level], c, level, DEMO_TASKS, 4)


def test_demo_close_to_target(demo_built):
    # demo documents are 200-400 tokens: the greedy fill ends within one document of the target
    for level, df in demo_built.items():
        target = level_tokens(level)
        assert (df["context_tokens"] >= target - 420).all(), level


def test_demo_deterministic(demo, demo_built, counter):
    docs, items = demo
    again = build_longbench100(docs, items, level="2k", n_per_task=4, seed=7, counter=counter, tasks=specs(DEMO_TASKS))
    assert again.equals(demo_built["2k"])
    # input row order does not matter either
    shuffled = build_longbench100(
        docs.reverse(),
        items.reverse(),
        level="2k",
        n_per_task=4,
        seed=7,
        counter=counter,
        tasks=specs(DEMO_TASKS),
    )
    assert shuffled.equals(demo_built["2k"])
    other = build_longbench100(docs, items, level="2k", n_per_task=4, seed=8, counter=counter, tasks=specs(DEMO_TASKS))
    assert not other["context"].equals(demo_built["2k"]["context"])


def test_demo_missing_tasks_raise(demo, counter):
    docs, items = demo
    with pytest.raises(ValueError, match="single_doc_sum"):
        build_longbench100(docs, items, level="2k", n_per_task=1, seed=7, counter=counter, tasks=list(LB100.values()))
    with pytest.raises(ValueError, match="passage_retrieval"):
        build_longbench100(
            docs,
            items,
            level="2k",
            n_per_task=1,
            seed=7,
            counter=counter,
            tasks=specs([PASSAGE_RETRIEVAL]),
        )


def test_a_renamed_copy_with_its_own_prompt_builds_rows_of_its_own(demo, counter):
    docs, items = demo
    packaged = build_longbench100(docs, items, level="2k", n_per_task=2, seed=7, counter=counter,
                                  tasks=specs([SINGLE_DOC_QA]))
    terse = LB100[SINGLE_DOC_QA].model_copy(update={
        "name": "single_doc_qa_terse", "max_new_tokens": 16,
        "prompt": "{context}\n\n{instruction} Q: {question}\nA:",
    })
    copy = build_longbench100(docs, items, level="2k", n_per_task=2, seed=7, counter=counter, tasks=[terse])
    assert set(copy["task"]) == {"single_doc_qa_terse"} and set(copy["max_new_tokens"]) == {16}
    assert set(copy["category"]) == {"Information Comprehension"}
    for r in copy.iter_rows(named=True):
        label = [i + 1 for i, d in enumerate(r["context_doc_ids"]) if d in r["evidence_doc_ids"]][0]
        assert r["prompt"] == f"{r['context']}\n\nAnswer the question about Passage {label}. Q: {r['question']}\nA:"
    assert not set(copy["instance_id"]) & set(packaged["instance_id"])
    salted = build_longbench100(docs, items, level="2k", n_per_task=2, seed=7, counter=counter,
                                tasks=[LB100[SINGLE_DOC_QA].model_copy(update={"instance_salt": "c0ffee"})])
    assert salted.drop("instance_id").equals(packaged.drop("instance_id"))  # the salt changes the ids alone
    assert not set(salted["instance_id"]) & set(packaged["instance_id"])


@pytest.mark.parametrize(("update", "field"), [
    ({"builder": BuilderRef(name="longbench100", options={"kind": "needle"})}, "builder.options.kind"),
    ({"builder": BuilderRef(name="longbench100", options={"kind": "kv_retrieval", "n_keys": 4})}, "builder.options"),
    ({"builder": BuilderRef(name="helmet", options={"kind": "kv_retrieval"})}, "builder.name"),
    ({"prompt": "{context}\n{input}"}, "prompt"),  # LongBench's {input} is our {question}
    ({"prompt": "{context}\n{instruction}\n{question}"}, "prompt"),  # only the QA kinds fill {instruction}
    ({"max_new_tokens": None}, "max_new_tokens"),
])
def test_a_task_its_builder_cannot_make_fails_naming_the_task_and_field(demo, counter, update, field):
    docs, items = demo
    bad = LB100[KV_RETRIEVAL].model_copy(update={"name": "my_kv", **update})
    with pytest.raises(ValueError, match=rf"task 'longbench100/my_kv'.*field '{field}'"):
        build_longbench100(docs, items, level="2k", n_per_task=1, seed=7, counter=counter, tasks=[bad])


def test_demo_too_short_level_raises(demo, counter):
    docs, items = demo
    with pytest.raises(ValueError, match="kv_retrieval"):
        build_longbench100(
            docs,
            items,
            level="512",
            n_per_task=1,
            seed=7,
            counter=counter,
            tasks=specs([KV_RETRIEVAL]),
        )


# --------------------------------------------------------------------------- shared LongBench data


@pytest.mark.parametrize("level", LB_LEVELS)
def test_longbench_instances(longbench, lb_built, counter, level):
    c = Corpus.build(*longbench, counter)
    _check_instances(lb_built[level], c, level, LB_TASKS, 3)


def test_longbench_multi_doc_items_split_and_shuffled(longbench, lb_built):
    _, items = longbench
    n_ev = dict(zip(items["item_id"], items["evidence_doc_ids"].list.len()))
    df = lb_built["16k"].filter(pl.col("task").is_in([MULTI_DOC_QA, MULTI_DOC_SUM]))
    assert df.height == 6
    for r in df.iter_rows(named=True):
        assert len(r["evidence_doc_ids"]) == n_ev[r["item_id"]] > 1
        assert len(r["evidence_depths"]) == len(r["evidence_doc_ids"])
    # across instances the real passages do not all stay in their original order
    orders = [[r["context_doc_ids"].index(d) for d in r["evidence_doc_ids"]] for r in df.iter_rows(named=True)]
    assert any(o != sorted(o) for o in orders)


def test_longbench_deterministic(longbench, lb_built, counter):
    docs, items = longbench
    again = build_longbench100(docs, items, level="8k", n_per_task=3, seed=7, counter=counter, tasks=specs(LB_TASKS))
    assert again.equals(lb_built["8k"])


def test_longbench_all_tasks(longbench, counter):
    docs, items = longbench
    df = build_longbench100(docs, items, level="8k", n_per_task=2, seed=3, counter=counter,
                            tasks=list(LB100.values()))
    assert sorted(df["task"].unique()) == sorted(LB100)
    c = Corpus.build(docs, items, counter)
    _check_instances(df, c, "8k", list(LB100), 2)


# --------------------------------------------------------------------------- QA prior-knowledge filter


def test_prior_knowledge_frame_drops_what_the_model_knows_without_context():
    items = pl.DataFrame({
        "item_id": ["a", "b", "c", "d", "e"],
        "task": ["single_doc_qa"] * 4 + ["multi_doc_qa"],
        "question": ["Capital of France?"] * 5,
        "answers": [["Paris"]] * 5,
        "prompt": ["(no-context prompt)"] * 5,
    })
    outputs = [{"output": o, "completion_tokens": 3, "finish_reason": "stop"}
               for o in ["Paris", "\n\nUnanswerable. Paris\nParis", "Lyon", "Lyon\nunanswerable", "Paris or Lyon"]]
    pk = prior_knowledge_frame(items, outputs, metric="f1", threshold=0.5)
    assert pk.schema == PRIOR_KNOWLEDGE
    got = {r["item_id"]: (r["score"], r["said_unanswerable"], r["dropped"]) for r in pk.iter_rows(named=True)}
    assert got["a"] == (1.0, False, True)  # answered from memory: dropped
    assert got["b"][1:] == (True, False)  # "unanswerable" on the first line: kept whatever it scores
    assert got["c"] == (0.0, False, False)
    assert got["d"] == (0.0, False, False)  # "unanswerable" only on line 2 does not count; scored on line 1
    assert got["e"][0] == pytest.approx(0.5) and got["e"][2]  # F1 = 0.5 >= 0.5 (the repo's ">=")
    with pytest.raises(ValueError, match="prior_knowledge.metric"):
        prior_knowledge_frame(items, outputs, metric="bleu", threshold=0.5)
    with pytest.raises(ValueError, match="item 'a': field answers"):
        prior_knowledge_frame(items.with_columns(answers=pl.lit([], dtype=pl.List(pl.String))), outputs,
                              metric="f1", threshold=0.5)
