"""HELMET many-shot in-context learning (spec helmet.md §2.7, §5.1, §9.6): ``kind: icl``.

The context is demonstrations of one labelled dataset (items of a ``kind: icl`` or ``demo_labels``
source, category :data:`~lc_pipeline.sources.icl.ICL_CATEGORY`); the length lever is their number,
``builder.options.per_level`` (level -> shots, the spec's table, e.g. TREC coarse 8k 400 ... 128k 6600).

Per test item (seeded by the run's seed, the task and the item, so the same at every level and new
with another seed):

* a random permutation maps the n label names to the integers 0..n-1 and every label is written as
  its integer, so the model must learn the mapping from the demonstrations, not from its priors;
* demonstrations come from the demo split in balanced rounds: each round holds one example of every
  label, in shuffled order; rounds are concatenated and the last one cut to the level's shot count.
  A label with fewer examples than rounds repeats its examples (each once before any twice), as
  HELMET's ``balance_labels`` does;
* a demonstration is ``{text}\\nlabel: {integer}`` (the task's answer prefix), joined by blank lines;
  the prompt ends with the test text and the prefix; ``answers`` = [its integer as a string].

Test items: ``n_per_task`` of the test split, label-balanced (rounds of one per label, seeded by the
task), the same items at every level. ``record_fields`` of a row: the mapping (label name ->
integer), the label name and the number of shots. A prompt over the level's target is an error
naming the task, the level, the shots and the token counts (never a silently short row); a prompt
well under it is what the table gives (the shot counts are data, as in HELMET).

Deviation: HELMET seeds an item by ``sha256(text) + seed`` and draws with Python's global state
in places (§10.12); we derive every seed from (seed, task, item id) with ``derive_seed``.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from lc_pipeline.benchmarks.helmet.construction.context import BuildContext, Row
from lc_pipeline.config import ConfigError, level_tokens
from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.sources.icl import ICL_CATEGORY

__all__ = ["DEMO_SEPARATOR", "balanced_rounds", "build_icl", "label_mapping", "shots_for_level"]

DEMO_SEPARATOR = "\n\n"


def shots_for_level(per_level: Any, level: str, task: str) -> int:
    """The shot count ``per_level`` gives ``level`` (keys are level names: ``8k`` = 8192 tokens)."""
    where = f"task {task!r}: field 'builder.options.per_level'"
    if not isinstance(per_level, dict) or not per_level:
        raise ValueError(f"{where}: expected a mapping of length levels to shot counts (e.g. {{8k: 400}}), "
                         f"got {per_level!r}")
    by_tokens: dict[int, int] = {}
    for key, value in per_level.items():
        try:
            tokens = level_tokens(str(key))
        except ConfigError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: level {key}: expected a positive number of demonstrations, got {value!r}")
        by_tokens[tokens] = value
    tokens = level_tokens(level)
    if tokens not in by_tokens:
        raise ValueError(f"{where}: no shot count for level {level!r} (levels given: {list(per_level)})")
    return by_tokens[tokens]


def label_mapping(labels: Sequence[str], rng: random.Random) -> dict[str, int]:
    """Label name -> integer: a random permutation of 0..n-1 (spec §2.7)."""
    ints = list(range(len(labels)))
    rng.shuffle(ints)
    return dict(zip(labels, ints, strict=True))


def balanced_rounds(by_label: dict[str, list], n: int, rng: random.Random, *, repeat: bool = True) -> list:
    """``n`` examples in rounds of one per label (the labels in a new random order every round).

    Each label's examples come in a random order; with ``repeat`` a label with fewer examples than
    rounds starts a new pass (a new random order: every example once before any twice), without it
    the label sits out the later rounds. The sequence does not depend on ``n``: fewer examples are a
    prefix of more (the 8k demonstrations begin the 16k ones).
    """
    def draws(examples: list) -> Iterator:
        while True:
            yield from rng.sample(examples, len(examples))
            if not repeat:
                return

    streams = {lab: draws(ex) for lab, ex in by_label.items() if ex}
    out: list = []
    while len(out) < n and streams:
        round_ = []
        for lab in list(streams):
            nxt = next(streams[lab], None)
            if nxt is None:
                del streams[lab]
            else:
                round_.append(nxt)
        rng.shuffle(round_)
        out.extend(round_)
    return out[:n]


def _icl_items(ctx: BuildContext) -> tuple[str, list[str], list[dict], list[dict]]:
    """(source, label names, demo items, test items) of the task's ICL source."""
    items = [it for it in ctx.pools.items if it["category"] == ICL_CATEGORY]
    sources = sorted({it["source"] for it in items})
    if not sources:
        raise ValueError(f"task {ctx.task!r}: no labelled items (sources of kind icl or demo_labels, category "
                         f"{ICL_CATEGORY!r}) among the configured sources")
    if len(sources) > 1:
        raise ValueError(f"task {ctx.task!r}: labelled items of several sources {sources}; name one with "
                         "builder.options.source")
    labels = list(items[0]["all_classes"] or [])
    demos, tests = [], []
    for it in items:
        if list(it["all_classes"] or []) != labels:
            raise ValueError(f"task {ctx.task!r}: item {it['item_id']!r}: field 'all_classes' differs from the "
                             f"label set of source {sources[0]!r} ({len(labels)} labels)")
        role = json.loads(it["record_fields"] or "{}").get("split")
        if role not in ("demo", "test"):
            raise ValueError(f"task {ctx.task!r}: item {it['item_id']!r}: field 'record_fields.split': expected "
                             f"'demo' or 'test', got {role!r}")
        if not it["answers"] or it["answers"][0] not in labels:
            raise ValueError(f"task {ctx.task!r}: item {it['item_id']!r}: field 'answers': {it['answers']!r} is "
                             "not one of its label names")
        (demos if role == "demo" else tests).append(it)
    if not demos or not tests:
        raise ValueError(f"task {ctx.task!r}: source {sources[0]!r} has {len(demos)} demonstration items and "
                         f"{len(tests)} test items; it needs both")
    return sources[0], labels, demos, tests


def _by_label(items: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        out[it["answers"][0]].append(it)
    return out


def build_icl(ctx: BuildContext) -> list[dict]:
    prefix = ctx.spec.answer_prefix if ctx.spec is not None else None
    if not prefix:
        raise ValueError(f"task {ctx.task!r}: field 'answer_prefix': missing; ICL demonstrations end with it "
                         "(HELMET: 'label:')")
    shots = shots_for_level(ctx.options.get("per_level"), ctx.level, ctx.task)
    source, labels, demos, tests = _icl_items(ctx)
    test_rng = random.Random(derive_seed(ctx.seed, "helmet-icl-tests", ctx.task, source))
    chosen = balanced_rounds(_by_label(tests), ctx.cfg.n_per_task, test_rng, repeat=False)
    if len(chosen) < ctx.cfg.n_per_task:
        raise ValueError(f"task {ctx.task!r} at {ctx.level}: needs {ctx.cfg.n_per_task} test items, source "
                         f"{source!r} has {len(tests)}")
    demo_pool = _by_label(demos)
    rows = []
    for item in chosen:
        rng = random.Random(derive_seed(ctx.seed, "helmet-icl", ctx.task, item["item_id"]))
        mapping = label_mapping(labels, rng)
        shown = balanced_rounds(demo_pool, shots, rng)
        blocks = [(d["item_id"], f"{d['question']}\n{prefix} {mapping[d['answers'][0]]}") for d in shown]
        context = DEMO_SEPARATOR.join(t for _, t in blocks)
        prompt = ctx.render(context=context, question=item["question"])
        tokens = ctx.counter.count(prompt)
        if tokens > ctx.target:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: {shots} demonstrations (per_level) make a prompt "
                             f"of {tokens} tokens, over the level's {ctx.target}-token target (item "
                             f"{item['item_id']!r}); lower per_level for {ctx.level}")
        label = item["answers"][0]
        rows.append(ctx.finish(Row(
            item_id=item["item_id"], source=item["source"], language=item["language"], question=item["question"],
            answers=[str(mapping[label])], answer_keywords=[], evidence_doc_ids=[], blocks=blocks,
            separator=DEMO_SEPARATOR, gold_blocks=[], depth=0.0, variant_key=f"icl{shots}", n_hard_negatives=0,
            n_filler=0, prompt_fields={"question": item["question"]},
            record_fields={"label": label, "label_mapping": mapping, "shots": shots},
        ), prompt=prompt))
    return rows
