"""HELMET RAG (spec helmet.md §2, §5): a QA item's gold passage(s) among its dense-retrieval hard negatives.

``kind: rag``: one evidence document; its gold passage + the top hard negatives (no gold answer),
the gold at ``n_depths`` evenly spaced positions (NQ / TriviaQA / PopQA). ``kind: rag_multi``: two
evidence documents; one gold passage from each + hard negatives, in ``n_permutations`` shuffled
orders (HotpotQA). Two demonstrations (``shots``) from other items, as HELMET's "k3" demo files:
three passages each.
"""

from __future__ import annotations

import random

from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.construct.helmet.context import BuildContext, Row
from lc_pipeline.construct.helmet.fitting import (
    Fit,
    depth_position,
    evenly_spaced_depths,
    fit,
    shortfall,
)
from lc_pipeline.construct.helmet.pools import Passage, format_passage, pick, qa_items

DEMO_PASSAGES = 3  # HELMET's RAG demo files are "k3": three passages per demonstration


def rag_demos(ctx: BuildContext, item: dict, pool: list[tuple[dict, list[Passage]]]) -> str:
    """Mini-RAG examples from other items: their gold passage(s) and top negatives, shuffled."""
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
        demos.append("\n\n".join(map(format_passage, ps))
                     + f"\n\nQuestion: {it['question']}\n{ctx.answer_line(it['answers'][0])}")
        if len(demos) == ctx.cfg.shots:
            break
    if len(demos) < ctx.cfg.shots:
        raise ValueError(f"item {item['item_id']!r}: {ctx.cfg.shots} demonstrations needed, only {len(demos)} other items")
    return "".join(d + "\n\n" for d in demos)


def _base(ctx: BuildContext, item: dict, demos: str) -> int:
    return ctx.counter.count(ctx.render(demos=demos, context="", question=item["question"]))


def build_rag(ctx: BuildContext) -> list[dict]:
    pool = qa_items(ctx.pools, 1)
    chosen = pick(pool, ctx.cfg.n_per_task, ctx.seed, ctx.task, "QA items with one evidence document whose passage "
                  "holds the answer", ctx.level)
    depths = evenly_spaced_depths(ctx.cfg.n_depths)
    rows = []
    for item, (gold,) in chosen:
        demos = rag_demos(ctx, item, pool)
        negs = ctx.pools.clean_negatives(item)
        blocks = [format_passage(p) for p in [gold, *negs]]
        costs = ctx.counter.count_many([b + "\n\n" for b in blocks])

        def arrange(k: int, depth: float) -> list[tuple[str, str]]:
            # k passages: the top k-1 negatives in rank order, the gold inserted at the depth.
            order = [(p.passage_id, b) for p, b in zip(negs[: k - 1], blocks[1:k])]
            order.insert(depth_position(depth, k), (gold.passage_id, blocks[0]))
            return order

        def render(k: int, depth: float = 0.0) -> str:
            return ctx.render(demos=demos, context="\n\n".join(t for _, t in arrange(k, depth)),
                              question=item["question"])

        k = fit(render, costs, _base(ctx, item, demos), ctx.target, ctx.counter, floor=1).n
        # Every depth must fit with the same k passages (only the order differs).
        while k > 1 and max(ctx.counter.count(render(k, d)) for d in depths) > ctx.target:
            k -= 1
        shortfall(ctx.task, ctx.level, Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                  f"passages, {len(negs)} hard negatives for item {item['item_id']!r}")
        for d in depths:
            rows.append(ctx.finish(Row(
                item_id=item["item_id"], source=item["source"], language=item["language"],
                question=item["question"], answers=list(item["answers"]),
                answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=[gold.doc_id],
                blocks=arrange(k, d), separator="\n\n", gold_blocks=[depth_position(d, k)], depth=d,
                variant_key=f"d{d}", n_hard_negatives=k - 1, n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows


def build_rag_multi(ctx: BuildContext) -> list[dict]:
    pool = qa_items(ctx.pools, 2)
    chosen = pick(pool, ctx.cfg.n_per_task, ctx.seed, ctx.task, "QA items with two evidence documents", ctx.level)
    rows = []
    for item, golds in chosen:
        demos = rag_demos(ctx, item, pool)
        negs = ctx.pools.clean_negatives(item)
        costs = ctx.counter.count_many([format_passage(p) + "\n\n" for p in golds + negs])
        n_gold = len(golds)

        def arrange(k: int, perm: int) -> list[Passage]:
            ps = golds + negs[: k - n_gold]
            random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(ps)
            return ps

        def render(k: int, perm: int = 0) -> str:
            return ctx.render(demos=demos, context="\n\n".join(map(format_passage, arrange(k, perm))),
                              question=item["question"])

        k = fit(render, costs, _base(ctx, item, demos), ctx.target, ctx.counter, floor=n_gold).n
        perms = range(ctx.cfg.n_permutations)
        while k > n_gold and max(ctx.counter.count(render(k, p)) for p in perms) > ctx.target:
            k -= 1
        shortfall(ctx.task, ctx.level, Fit(k, "", ctx.counter.count(render(k))), ctx.target, ctx.tolerance,
                  f"passages, {len(negs)} hard negatives for item {item['item_id']!r}")
        gold_ids = {g.passage_id for g in golds}
        for perm in perms:
            ps = arrange(k, perm)
            rows.append(ctx.finish(Row(
                item_id=item["item_id"], source=item["source"], language=item["language"],
                question=item["question"], answers=list(item["answers"]),
                answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=[g.doc_id for g in golds],
                blocks=[(p.passage_id, format_passage(p)) for p in ps], separator="\n\n",
                gold_blocks=[i for i, p in enumerate(ps) if p.passage_id in gold_ids], depth=None,
                variant_key=f"p{perm}", n_hard_negatives=k - n_gold, n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            )))
    return rows
