"""HELMET re-rank (spec helmet.md §2, §3): a QA item's graded candidates in shuffled orders; NDCG@10.

Grades come from our items, not TREC DL qrels: 2 = the passage with the answer, 1 = another
passage of the evidence document, 0 = a hard negative. "Balanced labels" cannot be had from one
item's few relevant passages, so all relevant passages are kept and hard negatives fill the rest.
``answers`` holds the qrels as ``"<ID>:<grade>"`` for grades > 0; IDs are random 5-digit numbers
(like MS MARCO's), so a position tells the model nothing. Demonstrations: HELMET's k10 demos.
"""

from __future__ import annotations

import random

from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.construct.helmet.context import BuildContext, Row
from lc_pipeline.construct.helmet.fitting import Fit, fit, shortfall
from lc_pipeline.construct.helmet.pools import (
    Passage,
    format_ranked_passage,
    pick,
    qa_items,
)
from lc_pipeline.score.helmet import rerank_qrels

RERANK_DEMO_PASSAGES = 10  # HELMET's re-rank demos: k10
# Re-rank answers are "<ID>:<grade>" strings; their parser lives with the metric that reads them.
__all__ = ["RERANK_DEMO_PASSAGES", "build_rerank", "graded", "rerank_qrels"]


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
                  f"passages for item {item['item_id']!r}")
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
