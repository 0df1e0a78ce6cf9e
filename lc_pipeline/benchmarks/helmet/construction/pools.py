"""HELMET's inputs indexed once per level: items, documents, passages and each item's hard negatives,
and the gold passages that stand in for KILT provenance (spec helmet.md §10.1).

Gold passages: the evidence document's first passage containing a gold answer; for the bridge
document of a two-document item, its passage naming the other document's title (else the one
sharing most words with the question).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.text import contains_answer, normalize_answer

QA_CATEGORIES = ("single-doc QA", "multi-doc QA")


@dataclass(frozen=True)
class Passage:
    passage_id: str
    doc_id: str
    title: str
    text: str


def format_passage(p: Passage) -> str:
    """HELMET's RAG passage format, ``Document (Title: …): text``."""
    return f"Document (Title: {p.title}): {p.text}"


def format_ranked_passage(pid: str, p: Passage) -> str:
    """HELMET's re-rank passage format, ``[ID: …] Document (Title: …): text``."""
    return f"[ID: {pid}] Document (Title: {p.title}): {p.text}" if p.title else f"[ID: {pid}] Document: {p.text}"


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

    def of_source(self, source: str, task: str) -> Pools:
        """The pools with only the items of configured source ``source`` (documents, passages and hard negatives
        stay whole: distractors may come from anywhere); ValueError naming the task when it has none."""
        mine = [it for it in self.items if it["source"] == source]
        if not mine:
            have = sorted({it["source"] for it in self.items})
            raise ValueError(f"task {task!r}: builder.options.source {source!r}: no items of that source "
                             f"(sources with items: {have})")
        return dataclasses.replace(self, items=mine)

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


def qa_items(pools: Pools, n_evidence: int) -> list[tuple[dict, list[Passage]]]:
    """QA items with ``n_evidence`` evidence documents whose gold passages can be found, with them."""
    out = []
    for it in pools.items:
        if it["category"] in QA_CATEGORIES and len(it["evidence_doc_ids"] or []) == n_evidence:
            golds = gold_passages(pools, it)
            if golds is not None:
                out.append((it, golds))
    return out


def pick(candidates: list, n: int, seed: int, task: str, what: str, level: str) -> list:
    """A seeded choice of ``n`` candidates, the same at every level (seeded by the task's name)."""
    if len(candidates) < n:
        raise ValueError(f"task {task!r} at {level}: needs {n} {what}, found {len(candidates)}")
    order = list(candidates)
    random.Random(derive_seed(seed, "helmet", task)).shuffle(order)
    return order[:n]


# --------------------------------------------------------------------------- HELMET's per-dataset tasks
# (nq, triviaqa, popqa, hotpotqa, msmarco: spec helmet.md §2.2-§2.3). Their size is the spec's table, data in the
# task file (``builder.options.per_level``); their gold passages are the dataset's own (KILT provenance), or for
# PopQA, which has none, a passage of the collection that holds an answer.


def per_level_count(options: dict, task: str, level: str) -> int | None:
    """``builder.options.per_level[level]`` (passages per level, spec §2 table); None when the task has no table.

    A level missing from the table, or a count that is not a positive int, is a ValueError naming the task and the
    level: a per-dataset task is never built at a size the spec does not give.
    """
    table = options.get("per_level")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ValueError(f"task {task!r}: field 'builder.options.per_level': expected a mapping of level -> count, "
                         f"got {table!r}")
    if level not in table:
        raise ValueError(f"task {task!r}: field 'builder.options.per_level' has no count for level {level!r} "
                         f"(levels given: {sorted(table)})")
    n = table[level]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"task {task!r}: field 'builder.options.per_level.{level}': expected a positive int, got {n!r}")
    return n


def record_fields(item: dict) -> dict:
    """An item's ``record_fields`` (JSON text in SOURCE_ITEMS) as a dict."""
    raw = item.get("record_fields") or "{}"
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def provenance_golds(pools: Pools, item: dict, n_gold: int) -> list[Passage] | None:
    """The gold passages of a KILT item: its provenance passages (``evidence_doc_ids``), one per page (title).

    Of a page's provenance passages the first holding an answer is taken, else its first (HotpotQA's bridge page
    need not name the answer). None unless the provenance spans exactly ``n_gold`` pages.
    """
    pages: dict[str, list[Passage]] = {}
    for d in item["evidence_doc_ids"] or []:
        pages.setdefault(pools.docs[d]["title"] or d, []).extend(pools.passages_by_doc.get(d, []))
    if len(pages) != n_gold or any(not ps for ps in pages.values()):
        return None
    return [next((p for p in ps if contains_answer(p.text, item["answers"])), ps[0]) for ps in pages.values()]


def answer_search_gold(pools: Pools, item: dict) -> Passage | None:
    """PopQA's gold passage (it has no provenance): a passage of the item's own collection holding an answer.

    HELMET takes the best-ranked *retrieved* passage holding an answer (spec §2.2). The ``hard_negatives`` asset
    keeps only the passages without one, so their ranks are not at hand here. Deviation: among the collection's
    passages holding an answer (the same normalized-substring test that made them non-negatives), the one on the
    subject's page (``s_wiki_title`` / ``subj``) comes first, then the one sharing most words with the question, then
    collection order.
    """
    fields = record_fields(item)
    subject = normalize_answer(str(fields.get("s_wiki_title") or fields.get("subj") or ""))
    words = set(normalize_answer(item["question"]).split())
    answers = [normalize_answer(a) for a in item["answers"]]
    best, best_key = None, None
    for doc_id in sorted(pools.passages_by_doc):
        if pools.docs[doc_id]["source"] != item["source"]:
            continue
        for p in pools.passages_by_doc[doc_id]:
            norm = normalize_answer(p.text)
            if not any(a and a in norm for a in answers):
                continue
            key = (bool(subject) and normalize_answer(p.title) == subject, len(words & set(norm.split())))
            if best_key is None or key > best_key:
                best, best_key = p, key
    return best


def dataset_golds(pools: Pools, item: dict, n_gold: int) -> list[Passage] | None:
    """Gold passages of a per-dataset item: KILT provenance, or (no provenance, one gold) PopQA's answer search."""
    if item["evidence_doc_ids"]:
        return provenance_golds(pools, item, n_gold)
    if n_gold == 1:
        p = answer_search_gold(pools, item)
        return [p] if p is not None else None
    return None


def dataset_negatives(pools: Pools, item: dict, golds: Sequence[Passage]) -> list[Passage]:
    """The item's clean hard negatives in rank order, each text once, none from a gold passage's document and none a
    copy of a gold passage (sources that load one collection each hold their own copy of every passage)."""
    seen = {(p.title, p.text) for p in golds}
    gold_docs = {p.doc_id for p in golds}
    out = []
    for p in pools.clean_negatives(item):
        if p.doc_id not in gold_docs and (p.title, p.text) not in seen:  # one copy of a passage several sources load
            seen.add((p.title, p.text))
            out.append(p)
    return out


class GoldsOf:
    """Memoized ``dataset_golds`` of the items of one task (PopQA's search reads the whole collection once per item)."""

    def __init__(self, pools: Pools, n_gold: int) -> None:
        self.pools, self.n_gold = pools, n_gold
        self._known: dict[str, list[Passage] | None] = {}

    def __call__(self, item: dict) -> list[Passage] | None:
        if item["item_id"] not in self._known:
            self._known[item["item_id"]] = dataset_golds(self.pools, item, self.n_gold)
        return self._known[item["item_id"]]


def pick_with(items: list[dict], n: int, accept, seed: int, task: str, what: str, level: str) -> list[dict]:
    """Like :func:`pick`, for items whose eligibility is costly to decide: the first ``n`` accepted items of the
    same seeded order (seeded by the task's name: the same items at every level); ValueError when fewer exist."""
    order = list(items)
    random.Random(derive_seed(seed, "helmet", task)).shuffle(order)
    chosen = []
    for it in order:
        if accept(it):
            chosen.append(it)
            if len(chosen) == n:
                return chosen
    raise ValueError(f"task {task!r} at {level}: needs {n} {what}, found {len(chosen)}")
