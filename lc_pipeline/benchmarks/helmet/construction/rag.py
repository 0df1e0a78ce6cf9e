"""HELMET RAG (spec helmet.md §2, §5): a QA item's gold passage(s) among its dense-retrieval hard negatives.

``kind: rag``: one evidence document; its gold passage + the top hard negatives (no gold answer),
the gold at ``n_depths`` evenly spaced positions (NQ / TriviaQA / PopQA). ``kind: rag_multi``: two
evidence documents; one gold passage from each + hard negatives, in ``n_permutations`` shuffled
orders (HotpotQA). Two demonstrations (``shots``) from other items, as HELMET's "k3" demo files:
three passages each.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from lc_pipeline.benchmarks.helmet.construction.context import BuildContext, Row
from lc_pipeline.benchmarks.helmet.construction.fitting import (
    Fit,
    depth_position,
    evenly_spaced_depths,
    fit,
    shortfall,
)
from lc_pipeline.benchmarks.helmet.construction.pools import (
    GoldsOf,
    Passage,
    dataset_negatives,
    format_passage,
    per_level_count,
    pick,
    pick_with,
    qa_items,
)
from lc_pipeline.construct.assembly import derive_seed

DEMO_PASSAGES = 3  # HELMET's RAG demo files are "k3": three passages per demonstration


def rag_demos(ctx: BuildContext, item: dict, pool: list[tuple[dict, list[Passage]]],
              golds_of: Callable[[dict], list[Passage] | None] | None = None,
              negatives_of: Callable[[dict, list[Passage]], list[Passage]] | None = None) -> str:
    """Mini-RAG examples from other items: their gold passage(s) and top negatives, shuffled.

    ``golds_of`` / ``negatives_of`` (per-dataset tasks): an item's golds, found when it is drawn (an item without
    any is passed over), and its negatives; by default the pool's golds and the item's clean negatives.
    """
    if not ctx.cfg.shots:
        return ""
    rng = random.Random(derive_seed(ctx.seed, "helmet-demos", item["item_id"]))
    others = [(it, g) for it, g in pool if it["item_id"] != item["item_id"] and it["question"] != item["question"]]
    rng.shuffle(others)
    demos = []
    for it, golds in others:
        if golds_of is not None:
            golds = golds_of(it)
            if golds is None:
                continue
        negs = (negatives_of(it, golds) if negatives_of is not None
                else ctx.pools.clean_negatives(it))[: max(0, DEMO_PASSAGES - len(golds))]
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
    k = per_level_count(ctx.options, ctx.task, ctx.level)
    if k is not None:
        return build_rag_dataset(ctx, k, n_gold=1)
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
                  f"passages, {len(negs)} hard negatives for item {item['item_id']!r}", available=len(blocks))
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
    k = per_level_count(ctx.options, ctx.task, ctx.level)
    if k is not None:
        return build_rag_dataset(ctx, k, n_gold=2)
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
                  f"passages, {len(negs)} hard negatives for item {item['item_id']!r}", available=len(costs))
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


def _too_long(ctx: BuildContext, item: dict, k: int, tokens: int, where: str) -> ValueError:
    return ValueError(f"task {ctx.task!r} at {ctx.level}: item {item['item_id']!r}: the prompt with {k} passages "
                      f"({where}) is {tokens} tokens, over the level's {ctx.target}; the level's per_level count "
                      f"does not fit these passages")


def build_rag_dataset(ctx: BuildContext, k: int, n_gold: int) -> list[dict]:
    """HELMET's per-dataset RAG (spec §2.2): exactly ``k`` passages (``builder.options.per_level``).

    ``n_gold`` 1 (NQ, TriviaQA, PopQA): the gold + the top k-1 clean hard negatives in rank order, the gold at
    ``n_depths`` evenly spaced depths. ``n_gold`` 2 (HotpotQA): both golds + the top k-2 negatives in
    ``n_permutations`` seeded shuffles. Golds are the dataset's own (``pools.dataset_golds``). Too few negatives or a
    prompt over the level is a ValueError naming the task, the level, the item (and the tokens): never a short row.
    """
    if k < n_gold:
        raise ValueError(f"task {ctx.task!r} at {ctx.level}: per_level count {k} is below the {n_gold} gold passages")
    golds_of = GoldsOf(ctx.pools, n_gold)
    what = ("items whose provenance (or, without one, a collection passage) gives the gold passage" if n_gold == 1
            else f"items whose provenance spans {n_gold} pages")
    chosen = pick_with(ctx.pools.items, ctx.cfg.n_per_task, lambda it: golds_of(it) is not None, ctx.seed, ctx.task,
                       what, ctx.level)
    pool = [(it, []) for it in ctx.pools.items]
    rows = []
    for item in chosen:
        golds = golds_of(item)
        demos = rag_demos(ctx, item, pool, golds_of, lambda it, g: dataset_negatives(ctx.pools, it, g))
        negs = dataset_negatives(ctx.pools, item, golds)
        if len(negs) < k - n_gold:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: item {item['item_id']!r} has {len(negs)} clean hard "
                             f"negatives, needs {k - n_gold} for {k} passages; raise hard_negatives_per_item and "
                             f"retrieval_top_k")
        negs = negs[: k - n_gold]
        gold_ids = {g.passage_id for g in golds}
        if n_gold == 1:
            variants = []
            for d in evenly_spaced_depths(ctx.cfg.n_depths):
                order = list(negs)
                order.insert(depth_position(d, k), golds[0])
                variants.append((order, d, f"d{d}"))
        else:
            variants = []
            for perm in range(ctx.cfg.n_permutations):
                order = list(golds) + list(negs)
                random.Random(derive_seed(ctx.seed, "helmet-perm", item["item_id"], ctx.level, perm)).shuffle(order)
                variants.append((order, None, f"p{perm}"))
        for order, depth, key in variants:
            blocks = [(p.passage_id, format_passage(p)) for p in order]
            prompt = ctx.render(demos=demos, context="\n\n".join(t for _, t in blocks), question=item["question"])
            tokens = ctx.counter.count(prompt)
            if tokens > ctx.target:
                raise _too_long(ctx, item, k, tokens, f"variant {key}")
            rows.append(ctx.finish(Row(
                item_id=item["item_id"], source=item["source"], language=item["language"],
                question=item["question"], answers=list(item["answers"]),
                answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=[g.doc_id for g in golds],
                blocks=blocks, separator="\n\n", gold_blocks=[i for i, p in enumerate(order) if p.passage_id in gold_ids],
                depth=depth, variant_key=key, n_hard_negatives=k - n_gold, n_filler=0,
                prompt_fields={"demos": demos, "question": item["question"]},
            ), prompt=prompt))
    return rows
