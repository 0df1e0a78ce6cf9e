"""HELMET LongQA and summarization (spec helmet.md §2, §5): one long document cut from its end.

``kind: long_document`` with ``items: qa``: a QA item with one evidence document (NarrativeQA /
∞Bench QA style); ``items: summarization``: a summarization item, its documents joined
(Multi-LexSum / ∞Bench Sum style). Only items whose document is longer than the level's budget
qualify (HELMET keeps only > 128k-token books); the same items are used at every level where they
qualify. Demonstrations show other items' questions and answers (or summaries) with the document
left out, as HELMET's do.
"""

from __future__ import annotations

import random

from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.construct.helmet.context import BuildContext, Row
from lc_pipeline.construct.helmet.fitting import cut_to_tokens
from lc_pipeline.construct.helmet.pools import QA_CATEGORIES, SUMMARIZATION_CATEGORY

OMITTED = " ... [the rest of the document is left out]"
DEMO_PLACEHOLDER = "[document text]"
QA_ITEMS, SUMMARIZATION_ITEMS = "qa", "summarization"  # options.items
ITEM_KINDS = (QA_ITEMS, SUMMARIZATION_ITEMS)


def _candidates(ctx: BuildContext, qa: bool) -> list[dict]:
    if qa:
        return [it for it in ctx.pools.items
                if it["category"] in QA_CATEGORIES and len(it["evidence_doc_ids"] or []) == 1 and it["answers"]]
    return [it for it in ctx.pools.items if it["category"] == SUMMARIZATION_CATEGORY and it["answers"]
            and it["evidence_doc_ids"]]


def _demos(ctx: BuildContext, item: dict, candidates: list[dict], qa: bool) -> str:
    if not ctx.cfg.shots:
        return ""
    others = [o for o in candidates if o["item_id"] != item["item_id"] and (not qa or o["question"] != item["question"])]
    random.Random(derive_seed(ctx.seed, "helmet-demos", item["item_id"])).shuffle(others)
    if len(others) < ctx.cfg.shots:
        raise ValueError(f"task {ctx.task!r}: {ctx.cfg.shots} demonstrations need other items; found {len(others)}")
    if qa:
        shots = [f"{DEMO_PLACEHOLDER}\nQuestion: {o['question']}\n{ctx.answer_line(o['answers'][0])}"
                 for o in others[: ctx.cfg.shots]]
        return "For example:\n\n" + "\n\n".join(shots) + "\n\nNow, read the following document:\n\n"
    shots = [ctx.answer_line(o["answers"][0]) for o in others[: ctx.cfg.shots]]
    return "Example summaries:\n\n" + "\n\n".join(shots) + "\n\nNow, the documents to summarize.\n"


def build_long_document(ctx: BuildContext) -> list[dict]:
    """The item's document(s) cut from the end to fill the level (``options.items``: qa | summarization)."""
    qa = ctx.options["items"] == QA_ITEMS
    candidates = _candidates(ctx, qa)
    order = list(candidates)
    random.Random(derive_seed(ctx.seed, "helmet", ctx.task)).shuffle(order)
    rows = []
    too_short = 0
    for item in order:
        if len(rows) == ctx.cfg.n_per_task:
            break
        text = "\n\n".join(ctx.pools.docs[d]["text"].strip() for d in item["evidence_doc_ids"])
        demos = _demos(ctx, item, candidates, qa)
        question = item["question"] if qa else ""
        fields = {"demos": demos, "question": question}
        budget = ctx.target - ctx.counter.count(ctx.render(context=OMITTED.strip(), **fields))
        if ctx.counter.count(text) <= budget:
            too_short += 1  # HELMET keeps only documents longer than the length: no cut, no fill
            continue
        body = cut_to_tokens(text, budget - 2, ctx.counter) + OMITTED
        prompt = ctx.render(context=body, **fields)
        over = ctx.counter.count(prompt) - ctx.target
        while over > 0:
            body = cut_to_tokens(body.removesuffix(OMITTED), ctx.counter.count(body) - over - 4 - len(OMITTED) // 4,
                                 ctx.counter) + OMITTED
            prompt = ctx.render(context=body, **fields)
            over = ctx.counter.count(prompt) - ctx.target
        ev = list(item["evidence_doc_ids"])
        rows.append(ctx.finish(Row(
            item_id=item["item_id"], source=item["source"], language=item["language"],
            question=question or "Summarize the documents.", answers=list(item["answers"]),
            answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=ev,
            blocks=[(f"{ev[0]}:cut" if len(ev) == 1 else "+".join(ev) + ":cut", body)], separator="",
            gold_blocks=[0], depth=0.0, variant_key="doc", n_hard_negatives=0, n_filler=0, prompt_fields=fields,
        ), prompt=prompt))
    if len(rows) < ctx.cfg.n_per_task:
        what = "single-document QA items" if qa else "summarization items"
        raise ValueError(
            f"task {ctx.task!r} at {ctx.level}: needs {ctx.cfg.n_per_task} {what} whose documents are longer than the "
            f"level's budget; {len(candidates)} such items exist, {too_short} of them too short for {ctx.target} tokens"
        )
    return rows
