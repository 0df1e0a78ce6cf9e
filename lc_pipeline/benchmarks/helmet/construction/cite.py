"""HELMET generation with citations (spec helmet.md §2.4, §3, §5.1): ALCE ASQA / QAMPARI, ``kind: cite``.

**Released questions** (items of category ``cited QA``, sources/alce.py): at each level the question's
top-k retrieved passages in rank order (no depth manipulation), IDs 1..k, each as
``Document [i](Title: t): text`` on its own line. ``k`` is ``builder.options.per_level[level]`` (``pools.per_level_count``) (HELMET's
table, §2: 8k 30, 16k 75, 32k 165, 64k 345, 128k 700; a level missing from the table is an error naming
the task and the level); a question with fewer passages, or k passages over the level's target, is an
error naming the task, the level and the item, never a silently shorter context. Without ``per_level``
the passages are filled to just under the level's target.

**Demonstrations** (config ``shots``, HELMET 2): drawn once per task (seeded by its name, as HELMET's
``random.sample`` with seed 42) from the source's demos file (items of category ``cited QA
demonstration``), each with its first 5 passages and its cited answer; a demonstration asking the test
question is passed over (§9.5). Without a demos file they come from other questions of the source, their
top 5 passages and an answer we write from their gold answers, each cited to the first of the 5 passages
that contains it.

**Prompt**: every demonstration is the task's own template filled with the demonstration (no demos),
followed by its answer after the answer prefix; demonstrations are separated by blank lines (``\\n\\n\\n``)
and come before the test's instruction, as HELMET's ``{demo_1}\\n\\n\\n{demo_2}\\n\\n\\n{instruction}
\\n\\nQuestion: ...\\n\\n{context}``. The instruction is the task file's (our words).

**Any corpus** (task ``cite``, helmet-demo): items without released passages are QA items with one or two
evidence documents; the stand-in for GTR's retrieved list is the item's gold passage(s) among its dense
hard negatives (``pools``), each gold at a seeded relative position (the same at every level), filled to
the level's token budget (or ``per_level`` passages when given); the row is ASQA-style, its one QA pair
the item's answers.

``record_fields`` of every row (what the metrics read, benchmarks/helmet/alce_correctness.py and the citation
scorer): ``style`` (``asqa`` | ``qampari``), ``question``, ``passages`` (``[{title, text}]`` in ID order:
ID i is ``passages[i-1]``), and ``qa_pairs`` (ASQA: a list of short-answer lists) or ``answer_clusters``
(QAMPARI: a list of alias lists).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from lc_pipeline.benchmarks.helmet.construction.context import BuildContext, Row
from lc_pipeline.benchmarks.helmet.construction.fitting import (
    Fit,
    depth_position,
    fit,
    shortfall,
)
from lc_pipeline.benchmarks.helmet.construction.pools import (
    Passage,
    per_level_count,
    pick,
    qa_items,
)
from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.sources.alce import ASQA, CATEGORY, DEMO_CATEGORY, QAMPARI
from lc_pipeline.text import contains_answer, normalize_answer

DEMO_PASSAGES = 5  # HELMET's ALCE demonstrations show 5 passages each
PASSAGE_SEPARATOR = "\n"  # one passage per line (HELMET's doc_prompt ends with a newline)
DEMO_SEPARATOR = "\n\n\n"

Passages = list[dict[str, str]]  # [{title, text}] in ID order


def format_cited(i: int, title: str, text: str) -> str:
    """HELMET's ALCE passage format, ``Document [i](Title: t): text`` (IDs from 1)."""
    return f"Document [{i}](Title: {title}): {text}"


def context_of(passages: Passages) -> str:
    return PASSAGE_SEPARATOR.join(format_cited(i, p["title"], p["text"]) for i, p in enumerate(passages, 1))


def cited_answer(style: str, slots: Sequence[Sequence[str]], passages: Passages) -> str:
    """An answer in ALCE's form written from gold answers: per slot (QA pair or answer cluster) its first
    answer that a passage contains, cited to the first such passage (1-based); a slot no passage supports
    gives its first answer uncited. ASQA: one sentence per slot; QAMPARI: a comma-separated list."""
    pieces = []
    for slot in slots:
        answers = [a for a in slot if a.strip()]
        found = next(((a, i) for i, p in enumerate(passages, 1) for a in answers if contains_answer(p["text"], [a])),
                     None)
        if found:
            pieces.append(f"{found[0]} [{found[1]}]")
        elif answers:
            pieces.append(answers[0])
    return ", ".join(pieces) + "." if style == QAMPARI else " ".join(f"{p}." for p in pieces)


def _fields(item: dict) -> dict[str, Any]:
    raw = item.get("record_fields") or "{}"
    try:
        fields = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"item {item['item_id']!r}: field 'record_fields': not JSON ({exc})") from None
    for name in ("docs", "style") if item["category"] == CATEGORY else ("docs", "answer"):
        if name not in fields:
            raise ValueError(f"item {item['item_id']!r}: field 'record_fields.{name}' is missing (sources/alce.py "
                             "writes it)")
    return fields


def _slots(fields: dict[str, Any]) -> list[list[str]]:
    return fields["qa_pairs"] if fields["style"] == ASQA else fields["answer_clusters"]


def _demo(ctx: BuildContext, question: str, passages: Passages, answer: str) -> str:
    """One demonstration: the task's template filled without demos, then the answer after the prefix."""
    text = ctx.render(demos="", question=question, context=context_of(passages)).rstrip()
    prefix = ctx.spec.answer_prefix if ctx.spec is not None else None
    if prefix and text.endswith(prefix):
        return f"{text} {answer}"
    return f"{text}\n\n{ctx.answer_line(answer)}"


class _Demos:
    """The task's demonstrations: one seeded order of candidates, the first ``shots`` that do not ask the
    test question; ``candidates`` yields (item id, question, passages, answer) lazily in that order."""

    def __init__(self, ctx: BuildContext, candidates: Callable[[], Any]):
        self.ctx, self._candidates, self._cache = ctx, candidates, None

    def for_item(self, item: dict) -> str:
        shots = self.ctx.cfg.shots
        if not shots:
            return ""
        if self._cache is None:
            self._cache = []
            self._it = iter(self._candidates())
        question = normalize_answer(item["question"])
        chosen = []
        i = 0
        while len(chosen) < shots:
            if i == len(self._cache):
                nxt = next(self._it, None)
                if nxt is None:
                    raise ValueError(f"task {self.ctx.task!r}: {shots} demonstrations needed for item "
                                     f"{item['item_id']!r}, only {len(chosen)} that do not ask its question")
                self._cache.append(nxt)
            iid, q, passages, answer = self._cache[i]
            i += 1
            if iid != item["item_id"] and normalize_answer(q) != question:
                chosen.append(_demo(self.ctx, q, passages, answer))
        return "".join(d + DEMO_SEPARATOR for d in chosen)


def _rng(ctx: BuildContext, *parts: Any) -> random.Random:
    return random.Random(derive_seed(ctx.seed, "helmet-cite", ctx.task, *parts))


def _released_demos(ctx: BuildContext, questions: list[dict]) -> _Demos:
    shipped = [it for it in ctx.pools.items if it["category"] == DEMO_CATEGORY]

    def candidates():
        if shipped:  # the demos file: its worked answers, cited as ALCE wrote them
            order = list(shipped)
            _rng(ctx, "demos").shuffle(order)
            for it in order:
                f = _fields(it)
                yield it["item_id"], it["question"], f["docs"][:DEMO_PASSAGES], f["answer"]
            return
        order = list(questions)  # none shipped: other questions, an answer written from their gold answers
        _rng(ctx, "demos").shuffle(order)
        for it in order:
            f = _fields(it)
            docs = f["docs"][:DEMO_PASSAGES]
            yield it["item_id"], it["question"], docs, cited_answer(f["style"], _slots(f), docs)

    return _Demos(ctx, candidates)


def _row_fields(style: str, question: str, passages: Passages, slots: list[list[str]]) -> dict[str, Any]:
    key = "qa_pairs" if style == ASQA else "answer_clusters"
    return {"style": style, "question": question, "passages": passages, key: slots}


def _fill(ctx: BuildContext, render: Callable[[int], str], costs: list[int], floor: int, what: str) -> int:
    """The number of passages: per_level's, checked against the target, else filled to the target."""
    k = per_level_count(ctx.options, ctx.task, ctx.level)
    if k is not None:
        if k > len(costs):
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: {what} has {len(costs)} passages, "
                             f"builder.options.per_level asks for {k}")
        tokens = ctx.counter.count(render(k))
        if tokens > ctx.target:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: {k} passages (builder.options.per_level) of {what} "
                             f"make a {tokens}-token prompt, over the {ctx.target}-token target")
        return k
    base = ctx.counter.count(render(floor))
    fitted = fit(render, [0] * floor + costs[floor:], base, ctx.target, ctx.counter, floor=floor)
    shortfall(ctx.task, ctx.level, Fit(fitted.n, "", fitted.tokens), ctx.target, ctx.tolerance, f"passages of {what}",
              available=len(costs))
    return fitted.n


def build_cite(ctx: BuildContext) -> list[dict]:
    """HELMET Cite rows of one level: released ALCE questions when the pools have them, else any corpus."""
    questions = [it for it in ctx.pools.items if it["category"] == CATEGORY]
    return _build_released(ctx, questions) if questions else _build_any_corpus(ctx)


def _build_released(ctx: BuildContext, questions: list[dict]) -> list[dict]:
    chosen = pick(questions, ctx.cfg.n_per_task, ctx.seed, ctx.task, "ALCE questions (cited QA items)", ctx.level)
    demos = _released_demos(ctx, questions)
    rows = []
    for item in chosen:
        fields = _fields(item)
        docs: Passages = fields["docs"]
        shots = demos.for_item(item)

        def render(k: int, docs: Passages = docs, shots: str = shots, q: str = item["question"]) -> str:
            return ctx.render(demos=shots, context=context_of(docs[:k]), question=q)

        costs = ctx.counter.count_many([format_cited(i, d["title"], d["text"]) + PASSAGE_SEPARATOR
                                        for i, d in enumerate(docs, 1)])
        k = _fill(ctx, render, costs, 1, f"item {item['item_id']!r} (record {item['record_id']!r}, record_fields.docs)")
        passages = docs[:k]
        rid = item["record_id"] or item["item_id"]
        rows.append(ctx.finish(Row(
            item_id=item["item_id"], source=item["source"], language=item["language"], question=item["question"],
            answers=list(item["answers"]), answer_keywords=[], evidence_doc_ids=[],
            blocks=[(f"{rid}#{i}", format_cited(i, p["title"], p["text"])) for i, p in enumerate(passages, 1)],
            separator=PASSAGE_SEPARATOR, gold_blocks=[], depth=None, variant_key="top", n_hard_negatives=0,
            n_filler=0, prompt_fields={"demos": shots, "question": item["question"]},
            record_fields=_row_fields(fields["style"], item["question"], passages, _slots(fields)),
        )))
    return rows


def _as_dict(p: Passage) -> dict[str, str]:
    """A corpus passage as an ALCE passage: one line of text (ALCE's are), as shown and as cited."""
    return {"title": " ".join(p.title.split()), "text": " ".join(p.text.split())}


def _build_any_corpus(ctx: BuildContext) -> list[dict]:
    pool = qa_items(ctx.pools, 1) + qa_items(ctx.pools, 2)
    chosen = pick(pool, ctx.cfg.n_per_task, ctx.seed, ctx.task, "QA items with gold passages (or ALCE questions)",
                  ctx.level)

    def candidates():
        order = list(pool)
        _rng(ctx, "demos").shuffle(order)
        for it, golds in order:
            negs = ctx.pools.clean_negatives(it)[: max(0, DEMO_PASSAGES - len(golds))]
            ps = [*golds, *negs]
            _rng(ctx, "demo-order", it["item_id"]).shuffle(ps)
            docs = [_as_dict(p) for p in ps]
            yield it["item_id"], it["question"], docs, cited_answer(ASQA, [list(it["answers"])], docs)

    demos = _Demos(ctx, candidates)
    rows = []
    for item, golds in chosen:
        shots = demos.for_item(item)
        negs = ctx.pools.clean_negatives(item)
        gold_rng = _rng(ctx, "gold", item["item_id"])
        where = [gold_rng.random() for _ in golds]  # each gold's relative rank: the same at every level

        def arrange(k: int, golds: list[Passage] = golds, negs: list[Passage] = negs,
                    where: list[float] = where) -> list[Passage]:
            ps = list(negs[: k - len(golds)])
            for g, w in zip(golds, where):
                ps.insert(depth_position(w, len(ps) + 1), g)
            return ps

        def render(k: int, shots: str = shots, q: str = item["question"]) -> str:
            return ctx.render(demos=shots, context=context_of([_as_dict(p) for p in arrange(k)]), question=q)

        costs = ctx.counter.count_many([format_cited(i, **_as_dict(p)) + PASSAGE_SEPARATOR
                                        for i, p in enumerate([*golds, *negs], 1)])
        k = _fill(ctx, render, costs, len(golds), f"item {item['item_id']!r} (gold passages and hard negatives)")
        ps = arrange(k)
        gold_ids = {g.passage_id for g in golds}
        passages = [_as_dict(p) for p in ps]
        rows.append(ctx.finish(Row(
            item_id=item["item_id"], source=item["source"], language=item["language"], question=item["question"],
            answers=list(item["answers"]), answer_keywords=list(item["answer_keywords"] or []),
            evidence_doc_ids=[g.doc_id for g in golds],
            blocks=[(p.passage_id, format_cited(i, **d)) for i, (p, d) in enumerate(zip(ps, passages), 1)],
            separator=PASSAGE_SEPARATOR, gold_blocks=[i for i, p in enumerate(ps) if p.passage_id in gold_ids],
            depth=None, variant_key="top", n_hard_negatives=k - len(golds), n_filler=0,
            prompt_fields={"demos": shots, "question": item["question"]},
            record_fields=_row_fields(ASQA, item["question"], passages, [list(item["answers"])]),
        )))
    return rows
