"""HELMET re-rank (spec helmet.md §2, §3): a QA item's graded candidates in shuffled orders; NDCG@10.

Grades come from our items, not TREC DL qrels: 2 = the passage with the answer, 1 = another
passage of the evidence document, 0 = a hard negative. "Balanced labels" cannot be had from one
item's few relevant passages, so all relevant passages are kept and hard negatives fill the rest.
``answers`` holds the qrels as ``"<ID>:<grade>"`` for grades > 0; IDs are random 5-digit numbers
(like MS MARCO's), so a position tells the model nothing. Demonstrations: HELMET's k10 demos.

With ``builder.options.per_level`` (task ``msmarco``): MS MARCO's own graded qrels (``sources/msmarco.py``), see
:func:`build_rerank_qrels`.
"""

from __future__ import annotations

import random

from lc_pipeline.benchmarks.helmet.construction.context import BuildContext, Row
from lc_pipeline.benchmarks.helmet.construction.fitting import Fit, fit, shortfall
from lc_pipeline.benchmarks.helmet.construction.pools import (
    Passage,
    format_ranked_passage,
    per_level_count,
    pick,
    qa_items,
    record_fields,
)
from lc_pipeline.benchmarks.helmet.metrics import rerank_qrels
from lc_pipeline.construct.assembly import derive_seed

RERANK_DEMO_PASSAGES = 10  # HELMET's re-rank demos: k10
# Re-rank answers are "<ID>:<grade>" strings; their parser lives with the metric that reads them.
__all__ = ["RERANK_DEMO_PASSAGES", "balanced_sample", "build_rerank", "build_rerank_qrels", "graded", "rerank_qrels"]


def graded(ctx: BuildContext, item: dict, gold: Passage) -> list[tuple[Passage, int]]:
    """Candidates with grades: 2 the answer passage, 1 the evidence document's other passages, 0 negatives."""
    same_doc = [p for p in ctx.pools.passages_by_doc[gold.doc_id] if p.passage_id != gold.passage_id]
    return [(gold, 2)] + [(p, 1) for p in same_doc] + [(p, 0) for p in ctx.pools.clean_negatives(item)]


def _ids(rng: random.Random, n: int) -> list[str]:
    return [str(x) for x in rng.sample(range(10_000, 100_000), n)]


def _demos(ctx: BuildContext, item: dict, pool: list[tuple[dict, list[Passage]]]) -> str:
    if not ctx.cfg.shots:
        return ""
    rng = random.Random(derive_seed(ctx.seed, "helmet-rerank-demos", item["item_id"]))
    others = [(it, g) for it, (g,) in pool if it["item_id"] != item["item_id"]]
    rng.shuffle(others)
    if len(others) < ctx.cfg.shots:
        raise ValueError(f"item {item['item_id']!r}: {ctx.cfg.shots} re-rank demonstrations need other items")
    demos = ""
    for it, g in others[: ctx.cfg.shots]:
        cands = graded(ctx, it, g)[:RERANK_DEMO_PASSAGES]
        shown = list(zip(_ids(rng, len(cands)), cands))
        rng.shuffle(shown)
        ranking = " > ".join(pid for pid, (_, grade) in sorted(shown, key=lambda s: -s[1][1]))
        demos += ("\n\n".join(format_ranked_passage(pid, p) for pid, (p, _) in shown)
                  + f"\n\nQuery: {it['question']}\n{ctx.answer_line(ranking)}\n\n")
    return demos


def build_rerank(ctx: BuildContext) -> list[dict]:
    k = per_level_count(ctx.options, ctx.task, ctx.level)
    if k is not None:
        return build_rerank_qrels(ctx, k)
    pool = qa_items(ctx.pools, 1)
    chosen = pick(pool, ctx.cfg.n_per_task, ctx.seed, ctx.task, "QA items with one evidence document", ctx.level)
    rows = []
    for item, (gold,) in chosen:
        demos = _demos(ctx, item, pool)
        cands = graded(ctx, item, gold)
        rng = random.Random(derive_seed(ctx.seed, "helmet-rerank", item["item_id"], ctx.level))
        ids = _ids(rng, len(cands))
        blocks = [format_ranked_passage(pid, p) for pid, (p, _) in zip(ids, cands)]
        costs = ctx.counter.count_many([b + "\n\n" for b in blocks])

        def arrange(k: int, perm: int) -> list[int]:
            order = list(range(k))
            random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(order)
            return order

        def render(k: int, perm: int = 0) -> str:
            return ctx.render(demos=demos, context="\n\n".join(blocks[i] for i in arrange(k, perm)),
                              question=item["question"])

        base = ctx.counter.count(ctx.render(demos=demos, context="", question=item["question"]))
        n_rel = sum(1 for _, g in cands if g > 0)
        k = fit(render, costs, base, ctx.target, ctx.counter, floor=n_rel).n
        perms = range(ctx.cfg.n_permutations)
        while k > n_rel and max(ctx.counter.count(render(k, p)) for p in perms) > ctx.target:
            k -= 1
        shortfall(ctx.task, ctx.level, Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                  f"passages for item {item['item_id']!r}", available=len(cands))
        qrels = [f"{ids[i]}:{g}" for i, (_, g) in enumerate(cands[:k]) if g > 0]
        for perm in perms:
            order = arrange(k, perm)
            rows.append(ctx.finish(Row(
                item_id=item["item_id"], source=item["source"], language=item["language"],
                question=item["question"], answers=qrels, answer_keywords=[], evidence_doc_ids=[gold.doc_id],
                blocks=[(cands[i][0].passage_id, blocks[i]) for i in order], separator="\n\n",
                gold_blocks=[j for j, i in enumerate(order) if cands[i][1] == 2], depth=None, variant_key=f"p{perm}",
                n_hard_negatives=sum(1 for i in order if cands[i][1] == 0), n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows


# --------------------------------------------------------------------------- MS MARCO (TREC DL) qrels


def candidates(ctx: BuildContext, item: dict) -> list[tuple[Passage, int]]:
    """The item's BM25 candidates with their grades (``record_fields.candidates``: [pid, doc id, grade], written by
    ``sources/msmarco.py``), as passages whose id is the MS MARCO pid."""
    out = []
    for pid, doc_id, grade in record_fields(item).get("candidates", []):
        doc = ctx.pools.docs.get(doc_id)
        if doc is None:
            raise ValueError(f"task {ctx.task!r}: item {item['item_id']!r}: candidate {pid!r} names document "
                             f"{doc_id!r}, which is not among the source documents")
        out.append((Passage(str(pid), doc_id, doc["title"] or "", doc["text"]), int(grade)))
    return out


def balanced_sample(cands: list[tuple[Passage, int]], k: int, rng: random.Random) -> list[tuple[Passage, int]]:
    """``k`` candidates drawn with balanced labels (spec §2.3; "balanced" is undefined there, §10.5).

    Resolved as equal counts per grade present among the candidates (TREC DL: 0-3): each grade gets an equal share
    of ``k`` (the remainder to the higher grades); a grade with fewer candidates than its share gives all it has and
    the rest is shared out again among the others. Within a grade the draw is uniform (``rng``). Returned grade by
    grade, highest first; the caller shuffles. ValueError when there are fewer than ``k`` candidates.
    """
    if len(cands) < k:
        raise ValueError(f"{len(cands)} candidates, {k} needed")
    by_grade: dict[int, list[tuple[Passage, int]]] = {}
    for c in cands:
        by_grade.setdefault(c[1], []).append(c)
    grades = sorted(by_grade, reverse=True)
    for g in grades:
        rng.shuffle(by_grade[g])
    take = dict.fromkeys(grades, 0)
    remaining, open_ = k, list(grades)
    while remaining:
        share, extra = divmod(remaining, len(open_))
        for i, g in enumerate(open_):
            add = min(share + (1 if i < extra else 0), len(by_grade[g]) - take[g])
            take[g] += add
            remaining -= add
        open_ = [g for g in open_ if take[g] < len(by_grade[g])]
    return [c for g in grades for c in by_grade[g][: take[g]]]


def _qrels_demos(ctx: BuildContext, item: dict, pool: list[dict]) -> str:
    """HELMET's 2 re-rank demos: other queries, ``RERANK_DEMO_PASSAGES`` label-balanced candidates each, shuffled,
    with the gold ranking (grade descending); seeded by the item (HELMET: sha256 of the qid)."""
    if not ctx.cfg.shots:
        return ""
    rng = random.Random(derive_seed(ctx.seed, "helmet-rerank-demos", item["item_id"]))
    others = [it for it in pool if it["item_id"] != item["item_id"] and it["record_id"] != item["record_id"]]
    rng.shuffle(others)
    if len(others) < ctx.cfg.shots:
        raise ValueError(f"task {ctx.task!r}: item {item['item_id']!r}: {ctx.cfg.shots} re-rank demonstrations need "
                         f"other queries, found {len(others)}")
    demos = ""
    for it in others[: ctx.cfg.shots]:
        cands = candidates(ctx, it)
        shown = balanced_sample(cands, min(RERANK_DEMO_PASSAGES, len(cands)), rng)
        rng.shuffle(shown)
        ranking = " > ".join(p.passage_id for p, _ in sorted(shown, key=lambda c: -c[1]))
        demos += ("\n\n".join(format_ranked_passage(p.passage_id, p) for p, _ in shown)
                  + f"\n\nQuery: {it['question']}\n{ctx.answer_line(ranking)}\n\n")
    return demos


def build_rerank_qrels(ctx: BuildContext, k: int) -> list[dict]:
    """HELMET's MS MARCO re-ranking (spec §2.3): per query ``k`` label-balanced candidates
    (:func:`balanced_sample`, seeded by the task and query: the same draw at a level whatever the other tasks), in
    ``n_permutations`` seeded shuffles; passages ``[ID: pid] Document (Title: t): text`` (``Document: text`` without
    a title). ``answers`` are ``"<pid>:<grade>"`` of the relevant passages among the k (what ``helmet.ndcg10``
    reads), ``record_fields.qrels`` the grade of every one of the k (trec_eval's qrels). A query with fewer than k
    candidates, or whose prompt is over the level, is a ValueError naming the task, level and item."""
    pool = [it for it in ctx.pools.items if record_fields(it).get("candidates")]
    chosen = pick(pool, ctx.cfg.n_per_task, ctx.seed, ctx.task, "queries with graded candidates (a msmarco source)",
                  ctx.level)
    rows = []
    for item in chosen:
        cands = candidates(ctx, item)
        rng = random.Random(derive_seed(ctx.seed, "helmet-rerank-sample", ctx.task, item["item_id"], k))
        try:
            sample = balanced_sample(cands, k, rng)
        except ValueError as exc:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: item {item['item_id']!r}: {exc} (per_level)") from None
        demos = _qrels_demos(ctx, item, pool)
        top = max(g for _, g in sample)
        for perm in range(ctx.cfg.n_permutations):
            order = list(sample)
            random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(order)
            blocks = [(p.doc_id, format_ranked_passage(p.passage_id, p)) for p, _ in order]
            prompt = ctx.render(demos=demos, context="\n\n".join(t for _, t in blocks), question=item["question"])
            tokens = ctx.counter.count(prompt)
            if tokens > ctx.target:
                raise ValueError(f"task {ctx.task!r} at {ctx.level}: item {item['item_id']!r}: the prompt with {k} "
                                 f"passages (permutation {perm}) is {tokens} tokens, over the level's {ctx.target}")
            rows.append(ctx.finish(Row(
                item_id=item["item_id"], source=item["source"], language=item["language"],
                question=item["question"], answers=[f"{p.passage_id}:{g}" for p, g in sample if g > 0],
                answer_keywords=[], evidence_doc_ids=[p.doc_id for p, g in sample if g > 0],
                blocks=blocks, separator="\n\n", gold_blocks=[j for j, (_, g) in enumerate(order) if g == top],
                depth=None, variant_key=f"p{perm}", n_hard_negatives=sum(1 for _, g in sample if g == 0), n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
                record_fields={"qid": item["record_id"], "qrels": {p.passage_id: g for p, g in sample}},
            ), prompt=prompt))
    return rows
