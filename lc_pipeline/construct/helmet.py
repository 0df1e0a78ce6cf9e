"""HELMET instance construction at controllable length (pure logic, no Dagster).

Spec: ``shared/specs/helmet.md`` (§2 categories, §5 prompts, §9 what must be right). The
length lever is the number of passages / pairs / needles (RAG, re-rank, synthetic recall)
or the cut of one long document (LongQA, summarization); every prompt is filled to just
under the level's target (cl100k_base, exact count on every row).

==================  ================  ===========================================================
task                category          built from
==================  ================  ===========================================================
rag                 RAG               a QA item with one evidence document: its gold passage + the
                                      top hard negatives (dense retrieval, no gold answer), the gold
                                      at ``n_depths`` evenly spaced positions (NQ / TriviaQA / PopQA)
rag_multi           RAG               a QA item with two evidence documents: one gold passage from
                                      each + hard negatives, in ``n_permutations`` shuffled orders
                                      (HotpotQA)
rerank              Re-rank           a QA item: graded candidates (2 = the passage with the answer,
                                      1 = another passage of the evidence document, 0 = a hard
                                      negative) in ``n_permutations`` shuffled orders; NDCG@10
                                      (MS MARCO)
json_kv             Synthetic recall  a JSON object of random UUID pairs, the queried key at
                                      ``n_depths`` evenly spaced positions
ruler_mk_needle     Synthetic recall  RULER MK variant 2: the context is all needles (word keys,
                                      7-digit values), one of them asked for
ruler_mk_uuid       Synthetic recall  RULER MK variant 3: the same with UUID keys and values
ruler_mv            Synthetic recall  RULER MV: 4 values for one key hidden in corpus documents
longqa              LongQA            a single-document QA item whose document is longer than the
                                      budget, cut from its end (NarrativeQA / ∞Bench QA style)
summ                Summ              a summarization item, its documents joined and cut from the
                                      end (Multi-LexSum / ∞Bench Sum style)
==================  ================  ===========================================================

Deviations, each for a reason we can name:

* Retrieval: our passages and our dense retriever (``construct.retrieval``), not KILT with
  gte-large (the paper's retrieval code was never released, spec §10.1). Gold passages stand
  in for KILT provenance: the evidence document's first passage containing a gold answer;
  for the bridge document of a two-document item, its passage naming the other document's
  title (else the one sharing most words with the question).
* Re-rank grades come from our items (above), not TREC DL qrels; "balanced labels" cannot be
  had from one item's few relevant passages, so all relevant passages are kept and hard
  negatives fill the rest. ``answers`` holds the qrels as ``"<ID>:<grade>"`` for grades > 0.
* Lengths are prompt lengths in cl100k tokens (the pipeline's convention; generation comes on
  top), not Llama-2 tokens including the generation budget; ``k`` follows from the budget.
* LongQA / summarization take items whose document is longer than the level's budget (HELMET
  keeps only > 128k-token books); the same items are used at every level where they qualify.
* Prompts are our own wording of HELMET's instructions; formats (``Document (Title: …)``,
  ``[ID: …]``, ``Key: … / Corresponding value:``, RULER's needle sentence) and the per-task
  generation caps (spec §5.1) are kept.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.config import HELMET_TASKS, HelmetConfig, level_tokens
from lc_pipeline.construct.assembly import derive_seed, instance_id
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import short_id
from lc_pipeline.schemas import INSTANCES, conform
from lc_pipeline.text import contains_answer, normalize_answer

SUITE = "helmet"  # INSTANCES.suite of rows built here
CONSTRUCTION_VERSION = "helmet-1"

RAG = "rag"
RAG_MULTI = "rag_multi"
RERANK = "rerank"
JSON_KV = "json_kv"
MK_NEEDLE = "ruler_mk_needle"
MK_UUID = "ruler_mk_uuid"
MV = "ruler_mv"
LONGQA = "longqa"
SUMM = "summ"
TASKS: tuple[str, ...] = (RAG, RAG_MULTI, RERANK, JSON_KV, MK_NEEDLE, MK_UUID, MV, LONGQA, SUMM)
assert TASKS == HELMET_TASKS, "config.HELMET_TASKS must name the tasks built here"

CATEGORY = {
    RAG: "RAG", RAG_MULTI: "RAG", RERANK: "Re-rank",
    JSON_KV: "Synthetic recall", MK_NEEDLE: "Synthetic recall", MK_UUID: "Synthetic recall", MV: "Synthetic recall",
    LONGQA: "LongQA", SUMM: "Summ",
}
# Generation caps (spec §5.1): RAG 20, re-rank 200, JSON KV 100, MK needle 50, MK UUID 100,
# MV 50, NarrativeQA 100, Multi-LexSum 400.
MAX_NEW_TOKENS = {
    RAG: 20, RAG_MULTI: 20, RERANK: 200, JSON_KV: 100, MK_NEEDLE: 50, MK_UUID: 100, MV: 50, LONGQA: 100, SUMM: 400,
}
# The prefix each answer follows (metrics parse after it).
ANSWER_PREFIX = {
    RAG: "Answer:", RAG_MULTI: "Answer:", RERANK: "Ranking:", JSON_KV: "Corresponding value:", LONGQA: "Answer:",
    SUMM: "Summary:",
}
QA_CATEGORIES = ("single-doc QA", "multi-doc QA")
SUMMARIZATION_CATEGORY = "summarization"
MV_VALUES = 4  # RULER MV: one key, four values
DEMO_PASSAGES = 3  # HELMET's RAG demo files are "k3": three passages per demonstration
RERANK_DEMO_PASSAGES = 10  # HELMET's re-rank demos: k10
OMITTED = " ... [the rest of the document is left out]"
DEMO_PLACEHOLDER = "[document text]"

# --------------------------------------------------------------------------- prompts (our wording)

PROMPTS = {
    RAG: (
        "Answer the question using the documents below. Give a short, exact answer on one line, in this "
        "form:\nAnswer: <answer>\n\n{demos}{context}\n\nQuestion: {question}\nAnswer:"
    ),
    RERANK: (
        "Each document below has an ID. Order all of the documents by how relevant they are to the query, most "
        "relevant first. Write only the IDs, in this form:\nRanking: ID3 > ID1 > ID2\n\n{demos}{context}\n\n"
        "Query: {question}\nRanking:"
    ),
    JSON_KV: (
        "JSON data:\n{context}\n\nThe JSON object above maps keys to values. Give the value that belongs to the "
        "key below.\n\n{demos}Key: \"{question}\"\nCorresponding value:"
    ),
    MK_NEEDLE: (
        "The text below hides special magic {kind}s, one per key. Read it carefully: you will be asked for one "
        "of them.\n{context}\nWhat is the special magic {kind} for {question} in the text above?\n"
        "The special magic {kind} for {question} in the text above is"
    ),
    MV: (
        "The text below hides several special magic {kind}s. Read it carefully: you will be asked for them.\n"
        "{context}\nWhat are all the special magic {kind}s for {question} in the text above?\n"
        "The special magic {kind}s for {question} in the text above are"
    ),
    LONGQA: (
        "Read the document below and answer the question about it as briefly as you can, in one phrase if "
        "possible.\n\n{demos}{context}\n\nQuestion: {question}\nAnswer:"
    ),
    SUMM: (
        "Below are the documents of one case or report. Summarize them in a single paragraph of 200 to 250 "
        "words covering the background, who was involved and the outcome.\n\n{demos}Documents:\n{context}\n\n"
        "Now write the summary.\nSummary:"
    ),
}
PROMPTS[RAG_MULTI] = PROMPTS[RAG]
PROMPTS[MK_UUID] = PROMPTS[MK_NEEDLE]
NEEDLE = "One of the special magic {kind}s for {key} is: {value}."  # RULER's needle sentence

_ADJECTIVES = (
    "amber", "ancient", "bitter", "bold", "brave", "brisk", "calm", "clever", "coral", "crimson", "curly", "damp",
    "dapper", "eager", "early", "fancy", "fierce", "fluffy", "frosty", "gentle", "giant", "glossy", "golden", "grumpy",
    "hasty", "hollow", "humble", "icy", "idle", "jolly", "keen", "lanky", "lively", "lucky", "mellow", "misty",
    "modest", "muddy", "narrow", "nimble", "noisy", "odd", "olive", "pale", "plucky", "polite", "proud", "quaint",
    "quiet", "rapid", "rusty", "salty", "scarlet", "shiny", "silent", "silky", "sleepy", "slender", "smoky", "snowy",
    "sober", "solid", "sour", "spicy", "steady", "stormy", "sturdy", "sunny", "swift", "tame", "tawny", "tender",
    "thorny", "tidy", "timid", "tiny", "vast", "velvet", "violet", "vivid", "wary", "wicked", "windy", "witty",
    "wooden", "woolly", "yellow", "young", "zealous", "zesty",
)
_NOUNS = (
    "anchor", "apricot", "badger", "bagel", "banjo", "beacon", "beetle", "biscuit", "bison", "blossom", "bobcat",
    "bucket", "cactus", "camel", "canoe", "carrot", "castle", "cedar", "cello", "chisel", "cobra", "comet", "cricket",
    "dagger", "dolphin", "donkey", "dragon", "eagle", "falcon", "ferret", "fiddle", "finch", "galaxy", "garlic",
    "gecko", "goblet", "goose", "harbor", "hazel", "hedgehog", "heron", "iguana", "island", "jackal", "jasmine",
    "kettle", "kiwi", "ladder", "lantern", "lemur", "lizard", "lobster", "magnet", "mango", "marble", "meadow",
    "mitten", "monsoon", "moose", "nectar", "otter", "oyster", "panther", "parrot", "pebble", "pelican", "pepper",
    "pigeon", "pillow", "quartz", "quill", "rabbit", "raven", "saddle", "salmon", "sparrow", "spruce", "squid",
    "tapioca", "teapot", "thistle", "tiger", "trumpet", "tulip", "turnip", "walnut", "walrus", "wombat", "yak",
)


@dataclass(frozen=True)
class Passage:
    passage_id: str
    doc_id: str
    title: str
    text: str


def format_passage(p: Passage) -> str:
    return f"Document (Title: {p.title}): {p.text}"


def format_ranked_passage(pid: str, p: Passage) -> str:
    return f"[ID: {pid}] Document (Title: {p.title}): {p.text}" if p.title else f"[ID: {pid}] Document: {p.text}"


def evenly_spaced_depths(n: int) -> tuple[float, ...]:
    """``n`` depths from 0 (start) to 1 (end), evenly spaced: HELMET's 6 depths are 0, 0.2, ... 1."""
    if n < 1:
        raise ValueError(f"n_depths must be >= 1, got {n}")
    return (0.0,) if n == 1 else tuple(round(i / (n - 1), 10) for i in range(n))


def depth_position(depth: float, k: int) -> int:
    """Index among ``k`` blocks of the gold block at ``depth`` (0 = first, 1 = last), half up."""
    return int(math.floor(depth * (k - 1) + 0.5)) if k > 1 else 0


def rerank_qrels(answers: Sequence[str]) -> dict[str, int]:
    """``["12345:2", "67890:1"]`` -> ``{"12345": 2, "67890": 1}`` (re-rank instances' answers)."""
    out = {}
    for a in answers:
        pid, sep, grade = a.rpartition(":")
        if not sep or not pid or not grade.isdigit():
            raise ValueError(f"re-rank answer {a!r}: expected '<ID>:<grade>'")
        out[pid] = int(grade)
    return out


# --------------------------------------------------------------------------- inputs


@dataclass
class Pools:
    """Items, documents and passages of the configured sources, indexed once per level."""

    items: list[dict]
    docs: dict[str, dict]
    passages_by_doc: dict[str, list[Passage]]
    negatives: dict[str, list[Passage]]  # item id -> hard negatives in rank order
    counter: TokenCounter
    doc_tokens: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, items: pl.DataFrame, documents: pl.DataFrame, passages: pl.DataFrame,
              hard_negatives: pl.DataFrame, counter: TokenCounter) -> Pools:
        docs = {r["doc_id"]: r for r in documents.select("doc_id", "source", "title", "text", "language").to_dicts()}
        by_doc: dict[str, list[Passage]] = defaultdict(list)
        for r in passages.sort("doc_id", "position").select("passage_id", "doc_id", "title", "text").iter_rows(named=True):
            by_doc[r["doc_id"]].append(Passage(**r))
        text = {p.passage_id: p for ps in by_doc.values() for p in ps}
        negatives: dict[str, list[Passage]] = defaultdict(list)
        for iid, pid in hard_negatives.sort("item_id", "rank").select("item_id", "passage_id").iter_rows():
            if pid not in text:
                raise ValueError(f"item {iid!r}: hard negative passage_id {pid!r} is not in the passages table")
            negatives[iid].append(text[pid])
        rows = sorted(items.to_dicts(), key=lambda r: r["item_id"])
        for it in rows:
            bad = [d for d in it["evidence_doc_ids"] or [] if d not in docs]
            if bad:
                raise ValueError(f"item {it['item_id']!r}: field 'evidence_doc_ids' names unknown documents {bad}")
        return cls(rows, docs, dict(by_doc), dict(negatives), counter)

    def tokens(self, doc_id: str) -> int:
        if doc_id not in self.doc_tokens:
            self.doc_tokens[doc_id] = self.counter.count(self.docs[doc_id]["text"] or "")
        return self.doc_tokens[doc_id]

    def clean_negatives(self, item: dict) -> list[Passage]:
        """The item's hard negatives, re-checked: none from an evidence document, none with an answer."""
        evidence = set(item["evidence_doc_ids"])
        return [p for p in self.negatives.get(item["item_id"], [])
                if p.doc_id not in evidence and not contains_answer(p.text, item["answers"])]


def answer_passage(pools: Pools, doc_id: str, answers: Sequence[str]) -> Passage | None:
    for p in pools.passages_by_doc.get(doc_id, []):
        if contains_answer(p.text, answers):
            return p
    return None


def bridge_passage(pools: Pools, doc_id: str, other_titles: Sequence[str], question: str) -> Passage | None:
    """The passage of a bridge document that names the other document, else the most question-like one."""
    ps = pools.passages_by_doc.get(doc_id, [])
    for p in ps:
        if any(t and normalize_answer(t) in normalize_answer(p.text) for t in other_titles):
            return p
    q = set(normalize_answer(question).split())
    return max(ps, key=lambda p: len(q & set(normalize_answer(p.text).split())), default=None)


def gold_passages(pools: Pools, item: dict) -> list[Passage] | None:
    """Gold passages of a QA item in evidence order (the answer's document last), or None."""
    ev = list(item["evidence_doc_ids"])
    if not item["answers"] or not ev:
        return None
    if len(ev) == 1:
        p = answer_passage(pools, ev[0], item["answers"])
        return [p] if p else None
    golds = []
    for i, d in enumerate(ev):
        if i == len(ev) - 1:
            p = answer_passage(pools, d, item["answers"])
        else:
            p = bridge_passage(pools, d, [pools.docs[o]["title"] for o in ev[i + 1:]], item["question"])
        if p is None:
            return None
        golds.append(p)
    return golds


def _qa_items(pools: Pools, n_evidence: int) -> list[tuple[dict, list[Passage]]]:
    out = []
    for it in pools.items:
        if it["category"] in QA_CATEGORIES and len(it["evidence_doc_ids"] or []) == n_evidence:
            golds = gold_passages(pools, it)
            if golds is not None:
                out.append((it, golds))
    return out


def _pick(candidates: list, n: int, seed: int, task: str, what: str, level: str) -> list:
    """A seeded choice of ``n`` candidates, the same at every level."""
    if len(candidates) < n:
        raise ValueError(f"task {task!r} at {level}: needs {n} {what}, found {len(candidates)}")
    order = list(candidates)
    random.Random(derive_seed(seed, "helmet", task)).shuffle(order)
    return order[:n]


# --------------------------------------------------------------------------- counting


@dataclass
class _Fit:
    n: int
    prompt: str
    tokens: int


def _fit(render: Callable[[int], str], costs: Sequence[int], base: int, target: int, counter: TokenCounter,
         floor: int = 0) -> _Fit:
    """Largest n in [``floor``, len(costs)] whose ``render(n)`` is at most ``target`` tokens.

    Binary search with exact counts (the prompt grows with n), started from the additive
    estimate base + block costs, which is within a few tokens per block of the truth.
    """
    def count(n: int) -> _Fit:
        prompt = render(n)
        return _Fit(n, prompt, counter.count(prompt))

    used, est = base, 0
    for c in costs:
        if used + c > target:
            break
        used += c
        est += 1
    lo, hi = floor, len(costs)  # answer in [lo, hi]; lo is returned even when it does not fit
    best = count(max(floor, min(est, hi)))
    if best.tokens <= target:
        lo = best.n
    else:
        hi = best.n - 1
        best = count(lo)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        f = count(mid)
        if f.tokens <= target:
            lo, best = mid, f
        else:
            hi = mid - 1
    return best if best.n == lo else count(lo)


def _cut_to_tokens(text: str, budget: int, counter: TokenCounter) -> str:
    """The longest word-boundary prefix of ``text`` with at most ``budget`` tokens (about)."""
    ids = counter.encoding.encode_ordinary(text)
    if len(ids) <= budget:
        return text
    prefix = counter.encoding.decode_bytes(ids[: max(budget, 0)]).decode("utf-8", errors="ignore")
    cut = prefix.rstrip()
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space].rstrip() if space > 0 else cut


def _shortfall(task: str, level: str, fit: _Fit, target: int, tolerance: float, what: str) -> None:
    if fit.tokens < target * (1 - tolerance):
        raise ValueError(
            f"task {task!r} at {level}: only {fit.tokens} of {target} prompt tokens could be filled "
            f"({fit.n} {what}); {'raise hard_negatives_per_item and retrieval_top_k' if 'passage' in what else 'need more source text'}"
        )


# --------------------------------------------------------------------------- rows


@dataclass
class _Row:
    item_id: str
    source: str
    language: str
    task: str
    question: str
    answers: list[str]
    answer_keywords: list[str]
    evidence_doc_ids: list[str]
    blocks: list[tuple[str, str]]  # (block id, text) in context order
    separator: str
    gold_blocks: list[int]  # indices of the gold blocks (first = depth)
    depth: float | None  # configured depth; None: the measured position of the first gold block
    variant_key: str  # depth or permutation index: part of the instance id
    n_hard_negatives: int
    n_filler: int
    prompt_fields: dict


def _finish(r: _Row, *, level: str, target: int, fingerprint: str, counter: TokenCounter,
            prompt: str | None = None) -> dict:
    context = r.separator.join(t for _, t in r.blocks)
    if prompt is None:
        prompt = PROMPTS[r.task].format(context=context, **r.prompt_fields)
    starts, pos = [], 0
    for _, t in r.blocks:
        starts.append(pos)
        pos += len(t) + len(r.separator)
    counts = counter.count_many([context, prompt] + [context[: starts[i]] for i in r.gold_blocks])
    context_tokens, input_tokens, ev = counts[0], counts[1], counts[2:]
    ev_depths = [c / context_tokens if context_tokens else 0.0 for c in ev]
    depth = r.depth if r.depth is not None else (ev_depths[0] if ev_depths else 0.0)
    return {
        "instance_id": instance_id(r.item_id, level, target, float(depth), "plain",
                                   short_id(fingerprint, r.task, r.variant_key, length=16)),
        "item_id": r.item_id,
        "source": r.source,
        "suite": SUITE,
        "task": r.task,
        "category": CATEGORY[r.task],
        "language": r.language,
        "variant": "plain",
        "depth": float(depth),
        "evidence_depths": ev_depths,
        "question": r.question,
        "answers": r.answers,
        "answer_keywords": r.answer_keywords,
        "evidence_doc_ids": r.evidence_doc_ids,
        "context_doc_ids": [b for b, _ in r.blocks],
        "n_hard_negatives": r.n_hard_negatives,
        "n_filler_documents": r.n_filler,
        "context": context,
        "prompt": prompt,
        "tokenizer": counter.name,
        "target_tokens": target,
        "input_tokens": input_tokens,
        "context_tokens": context_tokens,
        "max_new_tokens": MAX_NEW_TOKENS[r.task],
    }


@dataclass
class _Ctx:
    pools: Pools
    cfg: HelmetConfig
    level: str
    target: int
    seed: int
    tolerance: float
    fingerprint: str

    @property
    def counter(self) -> TokenCounter:
        return self.pools.counter

    def finish(self, r: _Row, prompt: str | None = None) -> dict:
        return _finish(r, level=self.level, target=self.target, fingerprint=self.fingerprint, counter=self.counter,
                       prompt=prompt)


# ----------------------------------------------------------------- RAG (one gold, depths)


def _rag_demos(ctx: _Ctx, item: dict, pool: list[tuple[dict, list[Passage]]]) -> str:
    """Two mini-RAG examples from other items: their gold passage(s) and top negatives, shuffled."""
    if not ctx.cfg.shots:
        return ""
    rng = random.Random(derive_seed(ctx.seed, "helmet-demos", item["item_id"]))
    others = [(it, g) for it, g in pool if it["item_id"] != item["item_id"] and it["question"] != item["question"]]
    rng.shuffle(others)
    demos = []
    for it, golds in others:
        negs = ctx.pools.clean_negatives(it)[: max(0, DEMO_PASSAGES - len(golds))]
        ps = list(golds) + negs
        rng.shuffle(ps)
        demos.append("\n\n".join(map(format_passage, ps)) + f"\n\nQuestion: {it['question']}\nAnswer: {it['answers'][0]}")
        if len(demos) == ctx.cfg.shots:
            break
    if len(demos) < ctx.cfg.shots:
        raise ValueError(f"item {item['item_id']!r}: {ctx.cfg.shots} demonstrations needed, only {len(demos)} other items")
    return "".join(d + "\n\n" for d in demos)


def _rag_base(ctx: _Ctx, item: dict, demos: str) -> int:
    return ctx.counter.count(PROMPTS[RAG].format(demos=demos, context="", question=item["question"]))


def build_rag(ctx: _Ctx) -> list[dict]:
    pool = _qa_items(ctx.pools, 1)
    chosen = _pick(pool, ctx.cfg.n_per_task, ctx.seed, RAG, "QA items with one evidence document whose passage "
                   "holds the answer", ctx.level)
    depths = evenly_spaced_depths(ctx.cfg.n_depths)
    rows = []
    for item, (gold,) in chosen:
        demos = _rag_demos(ctx, item, pool)
        negs = ctx.pools.clean_negatives(item)
        blocks = [format_passage(p) for p in [gold, *negs]]
        costs = ctx.counter.count_many([b + "\n\n" for b in blocks])

        def arrange(k: int, depth: float) -> list[tuple[str, str]]:
            # k passages: the top k-1 negatives in rank order, the gold inserted at the depth.
            order = [(p.passage_id, b) for p, b in zip(negs[: k - 1], blocks[1:k])]
            order.insert(depth_position(depth, k), (gold.passage_id, blocks[0]))
            return order

        def render(k: int, depth: float = 0.0) -> str:
            return PROMPTS[RAG].format(demos=demos, context="\n\n".join(t for _, t in arrange(k, depth)),
                                       question=item["question"])

        fit = _fit(render, costs, _rag_base(ctx, item, demos), ctx.target, ctx.counter, floor=1)
        k = fit.n
        # Every depth must fit with the same k passages (only the order differs).
        while k > 1 and max(ctx.counter.count(render(k, d)) for d in depths) > ctx.target:
            k -= 1
        _shortfall(RAG, ctx.level, _Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                   f"passages, {len(negs)} hard negatives for item {item['item_id']!r}")
        for d in depths:
            order = arrange(k, d)
            rows.append(ctx.finish(_Row(
                item_id=item["item_id"], source=item["source"], language=item["language"], task=RAG,
                question=item["question"], answers=list(item["answers"]),
                answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=[gold.doc_id],
                blocks=order, separator="\n\n", gold_blocks=[depth_position(d, k)], depth=d, variant_key=f"d{d}",
                n_hard_negatives=k - 1, n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows


def build_rag_multi(ctx: _Ctx) -> list[dict]:
    pool = _qa_items(ctx.pools, 2)
    chosen = _pick(pool, ctx.cfg.n_per_task, ctx.seed, RAG_MULTI, "QA items with two evidence documents", ctx.level)
    rows = []
    for item, golds in chosen:
        demos = _rag_demos(ctx, item, pool)
        negs = ctx.pools.clean_negatives(item)
        costs = ctx.counter.count_many([format_passage(p) + "\n\n" for p in golds + negs])
        n_gold = len(golds)

        def arrange(k: int, perm: int) -> list[Passage]:
            ps = golds + negs[: k - n_gold]
            random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(ps)
            return ps

        def render(k: int, perm: int = 0) -> str:
            return PROMPTS[RAG].format(demos=demos, context="\n\n".join(map(format_passage, arrange(k, perm))),
                                       question=item["question"])

        fit = _fit(render, costs, _rag_base(ctx, item, demos), ctx.target, ctx.counter, floor=n_gold)
        k = fit.n
        perms = range(ctx.cfg.n_permutations)
        while k > n_gold and max(ctx.counter.count(render(k, p)) for p in perms) > ctx.target:
            k -= 1
        _shortfall(RAG_MULTI, ctx.level, _Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                   f"passages, {len(negs)} hard negatives for item {item['item_id']!r}")
        gold_ids = {g.passage_id for g in golds}
        for perm in perms:
            ps = arrange(k, perm)
            rows.append(ctx.finish(_Row(
                item_id=item["item_id"], source=item["source"], language=item["language"], task=RAG_MULTI,
                question=item["question"], answers=list(item["answers"]),
                answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=[g.doc_id for g in golds],
                blocks=[(p.passage_id, format_passage(p)) for p in ps], separator="\n\n",
                gold_blocks=[i for i, p in enumerate(ps) if p.passage_id in gold_ids], depth=None,
                variant_key=f"p{perm}", n_hard_negatives=k - n_gold, n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows


# ----------------------------------------------------------------- re-rank


def _graded(ctx: _Ctx, item: dict, gold: Passage) -> list[tuple[Passage, int]]:
    """Candidates with grades: 2 the answer passage, 1 the evidence document's other passages, 0 negatives."""
    same_doc = [p for p in ctx.pools.passages_by_doc[gold.doc_id] if p.passage_id != gold.passage_id]
    return [(gold, 2)] + [(p, 1) for p in same_doc] + [(p, 0) for p in ctx.pools.clean_negatives(item)]


def _ids(rng: random.Random, n: int) -> list[str]:
    # Random numeric IDs, like MS MARCO's passage ids: position tells the model nothing.
    return [str(x) for x in rng.sample(range(10_000, 100_000), n)]


def build_rerank(ctx: _Ctx) -> list[dict]:
    pool = _qa_items(ctx.pools, 1)
    chosen = _pick(pool, ctx.cfg.n_per_task, ctx.seed, RERANK, "QA items with one evidence document", ctx.level)
    rows = []
    for item, (gold,) in chosen:
        demos = ""
        if ctx.cfg.shots:
            rng = random.Random(derive_seed(ctx.seed, "helmet-rerank-demos", item["item_id"]))
            others = [(it, g) for it, (g,) in pool if it["item_id"] != item["item_id"]]
            rng.shuffle(others)
            if len(others) < ctx.cfg.shots:
                raise ValueError(f"item {item['item_id']!r}: {ctx.cfg.shots} re-rank demonstrations need other items")
            for it, g in others[: ctx.cfg.shots]:
                cands = _graded(ctx, it, g)[:RERANK_DEMO_PASSAGES]
                ids = _ids(rng, len(cands))
                shown = list(zip(ids, cands))
                rng.shuffle(shown)
                ranking = " > ".join(pid for pid, (_, grade) in sorted(shown, key=lambda s: -s[1][1]))
                demos += ("\n\n".join(format_ranked_passage(pid, p) for pid, (p, _) in shown)
                          + f"\n\nQuery: {it['question']}\nRanking: {ranking}\n\n")
        cands = _graded(ctx, item, gold)
        rng = random.Random(derive_seed(ctx.seed, "helmet-rerank", item["item_id"], ctx.level))
        ids = _ids(rng, len(cands))
        blocks = [format_ranked_passage(pid, p) for pid, (p, _) in zip(ids, cands)]
        costs = ctx.counter.count_many([b + "\n\n" for b in blocks])

        def arrange(k: int, perm: int) -> list[int]:
            order = list(range(k))
            random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(order)
            return order

        def render(k: int, perm: int = 0) -> str:
            return PROMPTS[RERANK].format(demos=demos, context="\n\n".join(blocks[i] for i in arrange(k, perm)),
                                          question=item["question"])

        base = ctx.counter.count(PROMPTS[RERANK].format(demos=demos, context="", question=item["question"]))
        n_rel = sum(1 for _, g in cands if g > 0)
        fit = _fit(render, costs, base, ctx.target, ctx.counter, floor=n_rel)
        k = fit.n
        perms = range(ctx.cfg.n_permutations)
        while k > n_rel and max(ctx.counter.count(render(k, p)) for p in perms) > ctx.target:
            k -= 1
        _shortfall(RERANK, ctx.level, _Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                   f"passages for item {item['item_id']!r}")
        qrels = [f"{ids[i]}:{g}" for i, (_, g) in enumerate(cands[:k]) if g > 0]
        for perm in perms:
            order = arrange(k, perm)
            rows.append(ctx.finish(_Row(
                item_id=item["item_id"], source=item["source"], language=item["language"], task=RERANK,
                question=item["question"], answers=qrels, answer_keywords=[],
                evidence_doc_ids=[gold.doc_id],
                blocks=[(cands[i][0].passage_id, blocks[i]) for i in order], separator="\n\n",
                gold_blocks=[j for j, i in enumerate(order) if cands[i][1] == 2], depth=None, variant_key=f"p{perm}",
                n_hard_negatives=sum(1 for i in order if cands[i][1] == 0), n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows


# ----------------------------------------------------------------- synthetic recall


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def build_json_kv(ctx: _Ctx) -> list[dict]:
    depths = evenly_spaced_depths(ctx.cfg.n_depths)
    rows = []
    for index in range(ctx.cfg.n_per_task):
        # The queried pair is the same at every level; the other pairs are drawn per level.
        key, value = (lambda r: (_uuid(r), _uuid(r)))(random.Random(derive_seed(ctx.seed, JSON_KV, index)))
        rng = random.Random(derive_seed(ctx.seed, JSON_KV, index, ctx.level))
        demo_pairs = [(_uuid(rng), _uuid(rng)) for _ in range(ctx.cfg.shots)]
        demos = "".join(f"Key: \"{k}\"\nCorresponding value: {v}\n\n" for k, v in demo_pairs)
        pair_text = lambda k, v: f"{json.dumps(k)}: {json.dumps(v)}"  # noqa: E731
        per_pair = ctx.counter.count(pair_text(key, value) + ", ")
        base = ctx.counter.count(PROMPTS[JSON_KV].format(context="{}", demos=demos, question=key))
        n_max = max(1, 2 * (ctx.target - base) // per_pair + 10)  # generous: pairs differ in cost
        others = [(_uuid(rng), _uuid(rng)) for _ in range(n_max)]
        # The demo pairs belong to the object too (HELMET draws demos from the sample's own pairs).
        for i, (k, v) in enumerate(demo_pairs):
            others[i] = (k, v)
        rng.shuffle(others)

        def pairs(n: int, depth: float) -> list[tuple[str, str]]:
            ps = list(others[: n - 1])
            ps.insert(depth_position(depth, n), (key, value))
            return ps

        def render(n: int, depth: float = 0.0) -> str:
            obj = "{" + ", ".join(pair_text(k, v) for k, v in pairs(n, depth)) + "}"
            return PROMPTS[JSON_KV].format(context=obj, demos=demos, question=key)

        fit = _fit(render, [per_pair] * n_max, base, ctx.target, ctx.counter, floor=max(1, ctx.cfg.shots + 1))
        n = fit.n
        while n > 1 and max(ctx.counter.count(render(n, d)) for d in depths) > ctx.target:
            n -= 1
        _shortfall(JSON_KV, ctx.level, _Fit(n, "", ctx.counter.count(render(n))), ctx.target, ctx.tolerance, "pairs")
        item_id = f"helmet-jsonkv-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}"
        for d in depths:
            ps = pairs(n, d)
            # The context is the JSON object itself; blocks are its pairs (ids = keys).
            blocks = [(k, pair_text(k, v)) for k, v in ps]
            obj = "{" + ", ".join(t for _, t in blocks) + "}"
            row = _Row(
                item_id=item_id, source="synthetic", language="en", task=JSON_KV, question=key, answers=[value],
                answer_keywords=[value], evidence_doc_ids=[], blocks=blocks, separator=", ",
                gold_blocks=[depth_position(d, n)], depth=d, variant_key=f"d{d}", n_hard_negatives=0, n_filler=n - 1,
                prompt_fields={"demos": demos, "question": key},
            )
            out = ctx.finish(row, prompt=PROMPTS[JSON_KV].format(context=obj, demos=demos, question=key))
            # Keep the braces in the stored context (the prompt shows the object whole); depths are
            # measured inside the object, one token ("{") off at most.
            out["context"] = obj
            out["context_tokens"] = ctx.counter.count(obj)
            rows.append(out)
    return rows


def _word_key(rng: random.Random, used: set[str]) -> str:
    for _ in range(1000):
        k = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}"
        if k not in used:
            used.add(k)
            return k
    k = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}-{rng.choice(_NOUNS)}"  # the 2-word space is full
    used.add(k)
    return k


def _number(rng: random.Random) -> str:
    return str(rng.randint(1_000_000, 9_999_999))  # RULER's 7-digit values


def build_multikey(ctx: _Ctx, task: str) -> list[dict]:
    """RULER MK variant 2 (word keys, number values) or 3 (UUID keys and values): all needles."""
    kind = "number" if task == MK_NEEDLE else "uuid"
    rows = []
    for index in range(ctx.cfg.n_per_task):
        g = random.Random(derive_seed(ctx.seed, task, index))
        used: set[str] = set()
        key = _word_key(g, used) if task == MK_NEEDLE else _uuid(g)
        value = _number(g) if task == MK_NEEDLE else _uuid(g)
        rng = random.Random(derive_seed(ctx.seed, task, index, ctx.level))
        gold = NEEDLE.format(kind=kind, key=key, value=value)
        per = ctx.counter.count(gold + "\n")
        base = ctx.counter.count(PROMPTS[task].format(kind=kind, context="", question=key))
        n_max = max(1, 2 * (ctx.target - base) // per + 10)  # generous: needles differ in cost
        needles = []
        for _ in range(n_max):
            k = _word_key(rng, used) if task == MK_NEEDLE else _uuid(rng)
            needles.append((k, NEEDLE.format(kind=kind, key=k, value=_number(rng) if task == MK_NEEDLE else _uuid(rng))))
        position_seed = rng.random()

        def blocks(n: int) -> list[tuple[str, str]]:
            bs = list(needles[: n - 1])
            bs.insert(int(position_seed * n), (key, gold))  # RULER places the gold needle at a random depth
            return bs

        def render(n: int) -> str:
            return PROMPTS[task].format(kind=kind, context="\n".join(t for _, t in blocks(n)), question=key)

        fit = _fit(render, [per] * n_max, base, ctx.target, ctx.counter, floor=1)
        _shortfall(task, ctx.level, fit, ctx.target, ctx.tolerance, "needles")
        bs = blocks(fit.n)
        rows.append(ctx.finish(_Row(
            item_id=f"helmet-{task}-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}",
            source="synthetic", language="en", task=task, question=key, answers=[value], answer_keywords=[value],
            evidence_doc_ids=[], blocks=bs, separator="\n", gold_blocks=[int(position_seed * fit.n)], depth=None,
            variant_key=str(index), n_hard_negatives=0, n_filler=fit.n - 1,
            prompt_fields={"kind": kind, "question": key},
        ), prompt=fit.prompt))
    return rows


def build_multivalue(ctx: _Ctx) -> list[dict]:
    """RULER MV: four values of one key hidden between corpus documents (RULER uses essays)."""
    docs = sorted((d for d in ctx.pools.docs.values() if (d["text"] or "").strip()), key=lambda d: d["doc_id"])
    if not docs:
        raise ValueError(f"task {MV!r} at {ctx.level}: needs documents for the haystack")
    rows = []
    for index in range(ctx.cfg.n_per_task):
        g = random.Random(derive_seed(ctx.seed, MV, index))
        key = _word_key(g, set())
        values = []
        while len(values) < MV_VALUES:
            v = _number(g)
            if v not in values:
                values.append(v)
        needles = [NEEDLE.format(kind="number", key=key, value=v) for v in values]
        rng = random.Random(derive_seed(ctx.seed, MV, index, ctx.level))
        order = list(docs)
        rng.shuffle(order)
        base = ctx.counter.count(PROMPTS[MV].format(kind="number", context="\n\n".join(needles), question=key))
        budget = ctx.target - base
        hay, used = [], 0
        for d in order:
            if used >= budget:
                break
            c = ctx.pools.tokens(d["doc_id"]) + 1
            text = d["text"].strip()
            if used + c > budget:  # the last document is cut at a word to close the gap
                text = _cut_to_tokens(text, budget - used - 2, ctx.counter)
                if not text:
                    break
                hay.append((d["doc_id"] + ":cut", text))
                break
            hay.append((d["doc_id"], text))
            used += c
        if len(hay) < 1:
            raise ValueError(f"task {MV!r} at {ctx.level}: no document fits the haystack budget of {budget} tokens")
        # Needles go between haystack documents, at seeded positions, in value order.
        slots = sorted(rng.randint(0, len(hay)) for _ in needles)
        blocks: list[tuple[str, str]] = []
        gold_idx = []
        ni = 0
        for i in range(len(hay) + 1):
            while ni < len(needles) and slots[ni] == i:
                gold_idx.append(len(blocks))
                blocks.append((f"needle:{ni}", needles[ni]))
                ni += 1
            if i < len(hay):
                blocks.append(hay[i])
        row = _Row(
            item_id=f"helmet-mv-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}", source="synthetic",
            language="en", task=MV, question=key, answers=values, answer_keywords=values, evidence_doc_ids=[],
            blocks=blocks, separator="\n\n", gold_blocks=gold_idx, depth=None, variant_key=str(index),
            n_hard_negatives=0, n_filler=len(hay), prompt_fields={"kind": "number", "question": key},
        )
        out = ctx.finish(row)
        while out["input_tokens"] > ctx.target and blocks:  # rare: counted text merged differently
            last = max(i for i, (b, _) in enumerate(blocks) if not b.startswith("needle:"))
            bid, text = blocks[last]
            blocks[last] = (bid.removesuffix(":cut") + ":cut",
                            _cut_to_tokens(text, ctx.counter.count(text) - (out["input_tokens"] - ctx.target) - 2,
                                           ctx.counter))
            out = ctx.finish(row)
        rows.append(out)
    return rows


# ----------------------------------------------------------------- long documents


def _long_doc_items(ctx: _Ctx, task: str) -> list[dict]:
    if task == LONGQA:
        return [it for it in ctx.pools.items
                if it["category"] in QA_CATEGORIES and len(it["evidence_doc_ids"] or []) == 1 and it["answers"]]
    return [it for it in ctx.pools.items if it["category"] == SUMMARIZATION_CATEGORY and it["answers"]
            and it["evidence_doc_ids"]]


def build_long_document(ctx: _Ctx, task: str) -> list[dict]:
    """LongQA / summarization: the item's document(s) cut from the end to fill the level."""
    candidates = _long_doc_items(ctx, task)
    order = list(candidates)
    random.Random(derive_seed(ctx.seed, "helmet", task)).shuffle(order)
    rows = []
    picked = 0
    too_short = 0
    for item in order:
        if picked == ctx.cfg.n_per_task:
            break
        text = "\n\n".join(ctx.pools.docs[d]["text"].strip() for d in item["evidence_doc_ids"])
        demos = ""
        if ctx.cfg.shots:
            others = [o for o in candidates if o["item_id"] != item["item_id"]
                      and (task == SUMM or o["question"] != item["question"])]
            random.Random(derive_seed(ctx.seed, "helmet-demos", item["item_id"])).shuffle(others)
            if len(others) < ctx.cfg.shots:
                raise ValueError(f"task {task!r}: {ctx.cfg.shots} demonstrations need other items; found {len(others)}")
            if task == LONGQA:
                shots = [f"{DEMO_PLACEHOLDER}\nQuestion: {o['question']}\nAnswer: {o['answers'][0]}"
                         for o in others[: ctx.cfg.shots]]
                demos = "For example:\n\n" + "\n\n".join(shots) + "\n\nNow, read the following document:\n\n"
            else:
                shots = [f"Summary: {o['answers'][0]}" for o in others[: ctx.cfg.shots]]
                demos = "Example summaries:\n\n" + "\n\n".join(shots) + "\n\nNow, the documents to summarize.\n"
        question = item["question"] if task == LONGQA else ""
        fields = {"demos": demos, "question": question}
        base = ctx.counter.count(PROMPTS[task].format(context=OMITTED.strip(), **fields))
        budget = ctx.target - base
        if ctx.counter.count(text) <= budget:
            too_short += 1  # HELMET keeps only documents longer than the length: no cut, no fill
            continue
        body = _cut_to_tokens(text, budget - 2, ctx.counter) + OMITTED
        prompt = PROMPTS[task].format(context=body, **fields)
        over = ctx.counter.count(prompt) - ctx.target
        while over > 0:
            body = _cut_to_tokens(body.removesuffix(OMITTED), ctx.counter.count(body) - over - 4 - len(OMITTED) // 4,
                                  ctx.counter) + OMITTED
            prompt = PROMPTS[task].format(context=body, **fields)
            over = ctx.counter.count(prompt) - ctx.target
        ev = list(item["evidence_doc_ids"])
        rows.append(ctx.finish(_Row(
            item_id=item["item_id"], source=item["source"], language=item["language"], task=task,
            question=question or "Summarize the documents.", answers=list(item["answers"]),
            answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=ev,
            blocks=[(f"{ev[0]}:cut" if len(ev) == 1 else "+".join(ev) + ":cut", body)], separator="",
            gold_blocks=[0], depth=0.0, variant_key="doc", n_hard_negatives=0, n_filler=0, prompt_fields=fields,
        ), prompt=prompt))
        picked += 1
    if picked < ctx.cfg.n_per_task:
        what = "single-document QA items" if task == LONGQA else "summarization items"
        raise ValueError(
            f"task {task!r} at {ctx.level}: needs {ctx.cfg.n_per_task} {what} whose documents are longer than the "
            f"level's budget; {len(candidates)} such items exist, {too_short} of them too short for {ctx.target} tokens"
        )
    return rows


# --------------------------------------------------------------------------- suite

_BUILDERS: dict[str, Callable[[_Ctx], list[dict]]] = {
    RAG: build_rag,
    RAG_MULTI: build_rag_multi,
    RERANK: build_rerank,
    JSON_KV: build_json_kv,
    MK_NEEDLE: lambda ctx: build_multikey(ctx, MK_NEEDLE),
    MK_UUID: lambda ctx: build_multikey(ctx, MK_UUID),
    MV: build_multivalue,
    LONGQA: lambda ctx: build_long_document(ctx, LONGQA),
    SUMM: lambda ctx: build_long_document(ctx, SUMM),
}


def build_helmet(
    documents: pl.DataFrame,
    items: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: HelmetConfig,
    seed: int,
    counter: TokenCounter,
    length_tolerance: float = 0.05,
) -> pl.DataFrame:
    """All HELMET instances of one length level for ``config.tasks`` (INSTANCES rows, suite "helmet").

    A configured task that the sources cannot feed raises ValueError naming the task and
    what it lacks; a prompt that cannot be filled to within ``length_tolerance`` of the
    target raises too (never a silently short row).
    """
    unknown = [t for t in config.tasks if t not in _BUILDERS]
    if unknown:
        raise ValueError(f"helmet.tasks: unknown {unknown}; known tasks are {list(TASKS)}")
    pools = Pools.build(items, documents, passages, hard_negatives, counter)
    ctx = _Ctx(pools, config, level, level_tokens(level), seed, length_tolerance,
               short_id(CONSTRUCTION_VERSION, seed, config, counter.name, length=16))
    rows = [r for task in config.tasks for r in _BUILDERS[task](ctx)]
    over = [r["instance_id"] for r in rows if r["input_tokens"] > ctx.target]
    if over:  # a construction bug, not bad input: say so loudly
        raise AssertionError(f"helmet instances over the {ctx.target}-token target: {over[:5]}")
    return conform(pl.DataFrame(rows, schema=INSTANCES), "instances")


def gold_depth_violations(instances: pl.DataFrame, n_depths: int) -> list[str]:
    """RAG (one gold passage) instances whose gold passage is not at its depth, or items that lack a depth.

    The gold block is the context block from the evidence document; with k blocks it must
    sit at index ``depth_position(depth, k)``, and each (item, level) must have exactly the
    ``n_depths`` evenly spaced depths.
    """
    rag = instances.filter((pl.col("suite") == SUITE) & (pl.col("task") == RAG))
    want = set(evenly_spaced_depths(n_depths))
    bad: list[str] = []
    seen: dict[tuple[str, int], list[float]] = defaultdict(list)
    for iid, item, depth, target, ev, ctx in rag.select(
        "instance_id", "item_id", "depth", "target_tokens", "evidence_doc_ids", "context_doc_ids"
    ).iter_rows():
        seen[(item, target)].append(round(depth, 10))
        gold = [i for i, b in enumerate(ctx) if b.split("#")[0] in set(ev)]
        if len(gold) != 1 or gold[0] != depth_position(depth, len(ctx)):
            bad.append(iid)
    for (item, target), depths in seen.items():
        if sorted(depths) != sorted(want):
            bad.append(f"{item}@{target}: depths {sorted(depths)}")
    return bad

