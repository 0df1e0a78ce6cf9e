"""HELMET LongQA and summarization (spec helmet.md §2.5, §2.6, §5.1): one long document cut from its end.

``kind: long_document``; ``options.items`` picks the items:

* ``qa``: a QA item with one evidence document (NarrativeQA / ∞Bench QA);
* ``choice``: a multiple-choice item (∞Bench MC): its ``record_fields.options`` are rendered
  ``A. …`` on lines of their own (the prompt's ``{options}``), and the row's answers are
  ``[letter, "letter. option"]`` (spec §2.5), the options kept in the row's ``record_fields``;
* ``summarization``: a summarization item, its documents joined by a blank line (Multi-LexSum /
  ∞Bench Sum); the item's ``key_points`` and ``reference_summary`` (Multi-LexSum's long summary,
  §4.2 step 4) go to the row's ``record_fields`` for the ``helmet_summ`` judge.

Two ways to fill a level:

* Without ``options.buffer`` (the generic ``longqa`` / ``summ`` tasks on any corpus): only items
  whose document is longer than the level's budget qualify, and the prompt is filled to just
  under the level.
* With ``options.buffer`` (HELMET's per-dataset tasks; spec §2 table): the document is cut from
  the end to ``level - buffer - max_new_tokens`` tokens, the "rest omitted" marker's own tokens
  inside that budget (buffer 200; Multi-LexSum 300); a shorter document is used whole (the
  source's length filter decides which items qualify, as HELMET's does). If the whole prompt
  then exceeds ``level - max_new_tokens`` (long demonstrations: ∞Bench Sum's are gold
  summaries), the document is cut further from its end, as HELMET's model-side fit does (§5.2,
  §9.1). Up to ``n_per_task`` items are used (HELMET: up to 100), an error only when none is.

Demonstrations (``shots`` of the config; spec §2.5-§2.6, §9.5): ``options.demos: other_items``
(default) shows other items of the task; ``train`` shows items of the source's train split (items
whose ``record_fields.split`` is ``train``: NarrativeQA's Q/A pairs, Multi-LexSum's short
summaries). ``options.placeholder`` (default: true for qa / choice, false for summarization) puts
:data:`DEMO_PLACEHOLDER` where a demonstration's document would be (∞Bench). Train-split items are
never test items. Lengths are counted with the pipeline's tokenizer (cl100k), not Llama-2's.
"""

from __future__ import annotations

import json
import random
from typing import Any

from lc_pipeline.benchmarks.helmet.construction.context import BuildContext, Row
from lc_pipeline.benchmarks.helmet.construction.fitting import cut_to_tokens
from lc_pipeline.benchmarks.helmet.construction.pools import QA_CATEGORIES
from lc_pipeline.construct.assembly import derive_seed

# LONG_DOCUMENT_QA: the category of the sources' long-document QA items (NarrativeQA, ∞Bench, the demo dossiers):
# QA over a long document, never a RAG item (rag's ``pools.qa_items`` takes only ``QA_CATEGORIES``).
from lc_pipeline.construct.categories import LONG_DOCUMENT_QA, SUMMARIZATION_CATEGORY
from lc_pipeline.text import template_fields

OMITTED = " ... [the rest of the document is left out]"
DEMO_PLACEHOLDER = "[document text]"
QA_ITEMS, CHOICE_ITEMS, SUMMARIZATION_ITEMS = "qa", "choice", "summarization"  # options.items
ITEM_KINDS = (QA_ITEMS, CHOICE_ITEMS, SUMMARIZATION_ITEMS)
TRAIN_SPLIT = "train"  # record_fields.split of items that only serve as demonstrations
OTHER_ITEMS = "other_items"  # options.demos
DEMO_SOURCES = (OTHER_ITEMS, TRAIN_SPLIT)
# Optional options of the kind (suite.KINDS): None = any value, checked here.
OPTIONAL = {"buffer": None, "demos": DEMO_SOURCES, "placeholder": None}
# What a row keeps of its item's record_fields (for its metric or judge), when the item has it.
JUDGE_FIELDS = ("key_points", "reference_summary")
LETTERS = "ABCDEFGHIJ"


def item_fields(item: dict) -> dict[str, Any]:
    """The item's ``record_fields`` (a JSON object; ``{}`` when absent)."""
    raw = item.get("record_fields") or "{}"
    fields = json.loads(raw) if isinstance(raw, str) else dict(raw)
    return fields if isinstance(fields, dict) else {}


def is_train(item: dict) -> bool:
    return item_fields(item).get("split") == TRAIN_SPLIT


def choice_answers(options: list[str], answer: str) -> list[str]:
    """∞Bench MC's golds: ``[letter, "letter. option"]`` of the option equal to ``answer`` (spec §2.5)."""
    letter = LETTERS[options.index(answer)]
    return [letter, f"{letter}. {answer}"]


def render_options(options: list[str]) -> str:
    """``A. first\\nB. second …`` (HELMET's options block)."""
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def _options(item: dict) -> list[str] | None:
    opts = item_fields(item).get("options")
    return [str(o) for o in opts] if isinstance(opts, list) and opts else None


def _is_candidate(item: dict, kind: str, train: bool) -> bool:
    if is_train(item) != train or not item["answers"]:
        return False
    if kind == SUMMARIZATION_ITEMS:
        return item["category"] == SUMMARIZATION_CATEGORY and (train or bool(item["evidence_doc_ids"]))
    if item["category"] not in (*QA_CATEGORIES, LONG_DOCUMENT_QA):
        return False
    if not train and len(item["evidence_doc_ids"] or []) != 1:
        return False
    return (_options(item) is not None) == (kind == CHOICE_ITEMS)


def _candidates(ctx: BuildContext, kind: str, train: bool = False) -> list[dict]:
    return [it for it in ctx.pools.items if _is_candidate(it, kind, train)]


def _shot(ctx: BuildContext, o: dict, kind: str, placeholder: bool) -> str:
    head = [DEMO_PLACEHOLDER] if placeholder else []
    if kind == SUMMARIZATION_ITEMS:
        return "\n".join([*head, ctx.answer_line(o["answers"][0])])
    if kind == CHOICE_ITEMS:
        opts = _options(o)
        letter = choice_answers(opts, o["answers"][0])[0] if o["answers"][0] in opts else o["answers"][0]
        return "\n".join([*head, f"Question: {o['question']}", "Options:", render_options(opts),
                          ctx.answer_line(letter)])
    return "\n".join([*head, f"Question: {o['question']}", ctx.answer_line(o["answers"][0])])


def _demos(ctx: BuildContext, item: dict, pool: list[dict], kind: str, placeholder: bool) -> str:
    if not ctx.cfg.shots:
        return ""
    qa = kind != SUMMARIZATION_ITEMS
    others = [o for o in pool if o["item_id"] != item["item_id"] and (not qa or o["question"] != item["question"])]
    random.Random(derive_seed(ctx.seed, "helmet-demos", item["item_id"])).shuffle(others)
    if len(others) < ctx.cfg.shots:
        where = "train-split items of its source" if ctx.options.get("demos") == TRAIN_SPLIT else "other items"
        raise ValueError(f"task {ctx.task!r}: {ctx.cfg.shots} demonstrations need {where}; found {len(others)}")
    shots = [_shot(ctx, o, kind, placeholder) for o in others[: ctx.cfg.shots]]
    if qa:
        return "For example:\n\n" + "\n\n".join(shots) + "\n\nNow, read the following document:\n\n"
    return "Example summaries:\n\n" + "\n\n".join(shots) + "\n\nNow, the documents to summarize.\n"


def _settings(ctx: BuildContext) -> tuple[str, int | None, bool]:
    """(items kind, buffer or None, placeholder), checked: a ValueError names the task and the option."""
    kind = ctx.options["items"]
    buffer = ctx.options.get("buffer")
    if buffer is not None and (isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 0):
        raise ValueError(f"task {ctx.task!r}: field 'builder.options.buffer': expected tokens (an int >= 0), "
                         f"got {buffer!r}")
    placeholder = ctx.options.get("placeholder", kind != SUMMARIZATION_ITEMS)
    if not isinstance(placeholder, bool):
        raise ValueError(f"task {ctx.task!r}: field 'builder.options.placeholder': expected true or false, "
                         f"got {placeholder!r}")
    uses_options = "options" in template_fields(ctx.spec.prompt or "") if ctx.spec is not None else False
    if uses_options != (kind == CHOICE_ITEMS):
        raise ValueError(f"task {ctx.task!r}: field 'prompt': " + (
            "a multiple-choice task's prompt shows the options: it needs {options}" if kind == CHOICE_ITEMS
            else f"{{options}} is filled only for items: {CHOICE_ITEMS}"))
    return kind, buffer, placeholder


def build_long_document(ctx: BuildContext) -> list[dict]:
    """The item's document(s) cut from the end to fill the level (module docstring: options)."""
    kind, buffer, placeholder = _settings(ctx)
    candidates = _candidates(ctx, kind)
    demo_pool = _candidates(ctx, kind, train=True) if ctx.options.get("demos") == TRAIN_SPLIT else candidates
    order = list(candidates)
    random.Random(derive_seed(ctx.seed, "helmet", ctx.task)).shuffle(order)
    rows = []
    too_short = 0
    for item in order:
        if len(rows) == ctx.cfg.n_per_task:
            break
        text = "\n\n".join(ctx.pools.docs[d]["text"].strip() for d in item["evidence_doc_ids"])
        demos = _demos(ctx, item, demo_pool, kind, placeholder)
        question = item["question"] if kind != SUMMARIZATION_ITEMS else ""
        fields: dict[str, Any] = {"demos": demos, "question": question}
        answers = list(item["answers"])
        record_fields = {k: v for k, v in item_fields(item).items() if k in JUDGE_FIELDS}
        if kind == CHOICE_ITEMS:
            opts = _options(item)
            if answers[0] not in opts:
                raise ValueError(f"item {item['item_id']!r}: field 'answers': {answers[0]!r} is not one of its "
                                 f"options {opts}")
            fields["options"] = render_options(opts)
            answers = choice_answers(opts, answers[0])
            record_fields["options"] = opts
        if buffer is None:
            fitted = _fill_level(ctx, text, fields)
            if fitted is None:
                too_short += 1  # HELMET keeps only documents longer than the length: no cut, no fill
                continue
        else:
            fitted = _cut_by_table(ctx, item, text, fields, buffer)
        body, prompt = fitted
        ev = list(item["evidence_doc_ids"])
        rows.append(ctx.finish(Row(
            item_id=item["item_id"], source=item["source"], language=item["language"],
            question=question or "Summarize the documents.", answers=answers,
            answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=ev,
            blocks=[(f"{ev[0]}:cut" if len(ev) == 1 else "+".join(ev) + ":cut", body)], separator="",
            gold_blocks=[0], depth=0.0, variant_key="doc", n_hard_negatives=0, n_filler=0, prompt_fields=fields,
            record_fields=record_fields,
        ), prompt=prompt))
    if len(rows) < ctx.cfg.n_per_task and (buffer is None or not rows):
        what = {QA_ITEMS: "single-document QA items", CHOICE_ITEMS: "multiple-choice items",
                SUMMARIZATION_ITEMS: "summarization items"}[kind]
        if buffer is not None:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: no {what} (test split) among its items")
        raise ValueError(
            f"task {ctx.task!r} at {ctx.level}: needs {ctx.cfg.n_per_task} {what} whose documents are longer than the "
            f"level's budget; {len(candidates)} such items exist, {too_short} of them too short for {ctx.target} tokens"
        )
    return rows


def _fill_level(ctx: BuildContext, text: str, fields: dict) -> tuple[str, str] | None:
    """(body, prompt) filled to just under the level; None when the document is not longer than the budget."""
    budget = ctx.target - ctx.counter.count(ctx.render(context=OMITTED.strip(), **fields))
    if ctx.counter.count(text) <= budget:
        return None
    body = cut_to_tokens(text, budget - 2, ctx.counter) + OMITTED
    prompt = ctx.render(context=body, **fields)
    over = ctx.counter.count(prompt) - ctx.target
    while over > 0:
        body = cut_to_tokens(body.removesuffix(OMITTED), ctx.counter.count(body) - over - 4 - len(OMITTED) // 4,
                             ctx.counter) + OMITTED
        prompt = ctx.render(context=body, **fields)
        over = ctx.counter.count(prompt) - ctx.target
    return body, prompt


def document_budget(level_tokens: int, buffer: int, max_new_tokens: int) -> int:
    """HELMET's data-side cut (spec §2 table): ``L - buffer - max_new_tokens`` tokens of the document."""
    return level_tokens - buffer - max_new_tokens


def _cut_by_table(ctx: BuildContext, item: dict, text: str, fields: dict, buffer: int) -> tuple[str, str]:
    """(body, prompt): the document cut to the table's budget, then further while the prompt and the
    generation exceed the level (spec §2.5 truncation, §5.2 final length fit)."""
    max_new = ctx.spec.max_new_tokens if ctx.spec is not None else 0
    budget = document_budget(ctx.target, buffer, max_new)
    limit = ctx.target - max_new
    marker = ctx.counter.count(OMITTED)
    body = text if ctx.counter.count(text) <= budget else cut_to_tokens(text, budget - marker, ctx.counter) + OMITTED
    prompt = ctx.render(context=body, **fields)
    over = ctx.counter.count(prompt) - limit
    while over > 0:
        keep = ctx.counter.count(body.removesuffix(OMITTED)) - over - (0 if body.endswith(OMITTED) else marker)
        if keep <= 0:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: item {item['item_id']!r}: the prompt without its "
                             f"document already exceeds {limit} tokens (level minus max_new_tokens); fewer or "
                             f"shorter demonstrations are needed")
        body = cut_to_tokens(body.removesuffix(OMITTED), keep, ctx.counter) + OMITTED
        prompt = ctx.render(context=body, **fields)
        over = ctx.counter.count(prompt) - limit
    return body, prompt
