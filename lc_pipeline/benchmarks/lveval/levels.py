"""LV-Eval's own construction for the QA suite: levels counted in words, and factrecall.

``length_unit: words`` (spec lveval.md §1, §4.2): a level such as ``16k`` is 16,000 words of
context for English and 16,000 characters for Chinese (k = 1,000). The context is the item's
supporting documents plus distractor documents taken one by one in a seeded order until the
level is reached, then all shuffled: the evidence lands at a random document position (LV-Eval
does not control depth; the row's ``depth`` is where it landed). Distractors come from the
item's own domain first, then (``cross_domain_fill``) other domains of its language, never a
document that contains a gold answer. One deliberate change: a distractor that would push the
context past ``target * (1 + length_tolerance)`` is skipped for the next one, so a level is a
level (LV-Eval overshoots by up to one whole document).

factrecall (§4.3): one fact sentence, the needle, in a haystack of distractor documents, at
``n`` evenly spaced sentence boundaries (LV-Eval: 200 positions, one needle per language).
Here the needle is the sentence of an item's single evidence document that states its
answer; the haystack is filled in the level's unit (words, or prompt tokens for token
levels). Rows are task ``factrecall_en`` / ``factrecall_zh``, scored like LV-Eval's datasets.

Pure logic, no Dagster; every random choice comes from the config's seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping

import polars as pl

from lc_pipeline.config import BenchmarkConfig, level_size
from lc_pipeline.construct.assembly import (
    DocumentIndex,
    derive_seed,
    instance_id,
    select_items,
)
from lc_pipeline.construct.prompts import (
    PromptFor,
    QAPrompt,
    format_block,
    join_blocks,
    prompt_for_items,
)
from lc_pipeline.construct.rows import instance_row, instances_frame
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.word_levels import (
    count_units,
    mix_order,
    place_needle,
    sentence_boundaries,
)
from lc_pipeline.fingerprints import INSTANCE_CONTENT_FIELDS
from lc_pipeline.text import contains_answer

SUITE = "qa"


def unit_of(language: str) -> str:
    """What a word level counts in ``language``: words (English) or characters (Chinese)."""
    return "characters" if language == "zh" else "words"


def _language(item: dict) -> str:
    lang = item.get("language") or "en"
    if lang not in ("en", "zh"):
        raise ValueError(f"item {item['item_id']!r}: field 'language' {lang!r}: word levels know 'en' and 'zh'")
    return lang


def _render(blocks: list[dict]) -> tuple[str, list[int]]:
    """Numbered blocks joined; the character offset where each block starts."""
    texts = [format_block(i, b["title"], b["text"]) for i, b in enumerate(blocks, start=1)]
    starts, pos = [], 0
    for t in texts:
        starts.append(pos)
        pos += len(t) + 2  # BLOCK_SEPARATOR
    return join_blocks(texts), starts


def _block_units(block: dict, language: str) -> int:
    # The number is one word ("[7]") in English and a few characters in Chinese; 99 stands in for
    # the real index (the length check measures the finished context anyway).
    return count_units(format_block(99, block["title"], block["text"]), language)


def _relative_offsets(counter: TokenCounter, context: str, prompt: str, starts: list[int]) -> tuple[int, int, list[float]]:
    counts = counter.count_many([prompt, context] + [context[:s] for s in starts])
    input_tokens, context_tokens = counts[0], counts[1]
    return input_tokens, context_tokens, [round(c / max(context_tokens, 1), 4) for c in counts[2:]]


def _row(item: dict, *, instance_id: str, prompt: QAPrompt, task: str | None = None, context: str, question: str,
         evidence_ids: list[str], context_ids: list[str], depth: float, evidence_depths: list[float],
         input_tokens: int, context_tokens: int, n_fillers: int, counter: TokenCounter, unit: str,
         target: int) -> dict:
    """The INSTANCES row; ``unit`` is the level's ("tokens", or "words" with ``target`` in words / characters)."""
    language = item.get("language") or "en"
    units = (dict(target_tokens=target) if unit == "tokens" else
             dict(target_tokens=None, length_unit=unit_of(language), target_units=target,
                  context_units=count_units(context, language)))
    return instance_row(
        instance_id=instance_id, item_id=item["item_id"], source=item["source"], suite=SUITE,
        task=task or item["task"], category=item["category"], language=language, depth=depth,
        evidence_depths=evidence_depths, question=question, answers=list(item["answers"]),
        answer_keywords=list(item.get("answer_keywords") or []), evidence_doc_ids=evidence_ids,
        context_doc_ids=context_ids, n_hard_negatives=0, n_filler_documents=n_fillers, context=context,
        prompt=prompt.render(context, question), tokenizer=counter.name, input_tokens=input_tokens,
        context_tokens=context_tokens, max_new_tokens=prompt.max_new_tokens, **units,
    )


def word_level_items(items: pl.DataFrame, documents: pl.DataFrame, config: BenchmarkConfig) -> tuple[pl.DataFrame, int]:
    """The items the word-level QA suite uses at every level (levels share their QA pairs, as
    in LV-Eval): evidence shorter than the smallest level, then the seeded balanced choice.
    Returns them and how many items were too long."""
    smallest = min(level_size(lv, "words") for lv in config.lengths)
    docs = DocumentIndex(documents)
    fits, too_long = [], 0
    for item in items.iter_rows(named=True):
        lang = _language(item)
        if sum(_block_units(d, lang) for d in docs.evidence(item)) < smallest:
            fits.append(item)
        else:
            too_long += 1
    if len(fits) < config.items_per_length:
        raise ValueError(f"only {len(fits)} of {items.height} items have evidence shorter than the smallest level "
                         f"({smallest} words / characters); items_per_length is {config.items_per_length}")
    eligible = pl.DataFrame(fits, schema=items.schema, orient="row")
    return select_items(eligible, config.items_per_length, config.seed), too_long


def _mix_documents(support: list[dict], candidates: list[dict], target: int, ceiling: int,
                   measure: Callable[[str], int], lang: str, rng: random.Random, where: str) -> list[dict]:
    """Whole documents to ``[target, ceiling]`` units (``measure`` of each block), shuffled. When no
    choice of whole documents lands there (short levels, long documents), LV-Eval's rule is taken
    (stop at the first document that reaches the target) and that last document is cut at a
    sentence boundary, else a word (character) boundary; its block id gets ``:cut``."""
    def size(d: dict) -> int:
        return measure(format_block(99, d["title"], d["text"]))

    sizes = [size(d) for d in support], [size(d) for d in candidates]
    state = rng.getstate()
    try:
        order, _ = mix_order(*sizes, target, rng, ceiling)
        return [support[i] if kind == "support" else candidates[i] for kind, i in order]
    except ValueError:
        rng.setstate(state)
    try:
        order, total = mix_order(*sizes, target, rng)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    blocks = [support[i] if kind == "support" else candidates[i] for kind, i in order]
    last = max(j for kind, j in order if kind == "distractor")  # the document that crossed the target
    doc = candidates[last]
    text_units = measure(doc["text"])
    keep = _cut_text(doc["text"], text_units - (total - target), text_units - max(total - ceiling, 0), measure, lang)
    cut = {**doc, "doc_id": f"{doc['doc_id']}:cut", "text": keep}
    return [cut if b is doc else b for b in blocks]


def _cut_text(text: str, keep_min: int, keep_max: int, measure: Callable[[str], int], lang: str) -> str:
    """The longest prefix of ``text`` ending at a sentence boundary with ``keep_min..keep_max``
    units; else the longest prefix ending at a word (Chinese: character) that is at most ``keep_max``."""
    for end in reversed(sentence_boundaries(text, lang)):
        if keep_min <= measure(text[:end]) <= keep_max:
            return text[:end]
    ends = [i + 1 for i, ch in enumerate(text) if not ch.isspace()] if lang == "zh" else [
        m.end() for m in re.finditer(r"\S+", text)]
    lo, hi = 0, len(ends) - 1  # binary search: measure grows with the prefix
    best = ends[0] if ends else len(text)
    while lo <= hi:
        mid = (lo + hi) // 2
        if measure(text[: ends[mid]]) <= keep_max:
            best, lo = ends[mid], mid + 1
        else:
            hi = mid - 1
    return text[:best]


def build_word_level_instances(
    items: pl.DataFrame, documents: pl.DataFrame, *, level: str, config: BenchmarkConfig, counter: TokenCounter,
    prompt_for: PromptFor | None = None,
) -> tuple[pl.DataFrame, dict]:
    """The QA suite at a word level: ``items_per_length`` items, one instance each (LV-Eval
    builds one context per QA pair and level). Returns the rows and counts for the metadata.
    ``prompt_for``: each item's QAPrompt (None: our QA prompt with ``config.max_new_tokens``)."""
    target = level_size(level, "words")
    docs = DocumentIndex(documents)
    selected, too_long = word_level_items(items, documents, config)
    prompt_of = prompt_for_items(prompt_for, config.max_new_tokens)
    fingerprint = config.fingerprint(*INSTANCE_CONTENT_FIELDS)
    ceiling = int(target * (1 + config.length_tolerance))
    rows = []
    for item in selected.iter_rows(named=True):
        lang = _language(item)
        qa = prompt_of(item)
        evidence = docs.evidence(item)
        rng = random.Random(derive_seed(config.seed, item["item_id"], level, "words"))
        pool = docs.filler_pool(item, config.cross_domain_fill)
        # Same-domain documents first, each tier in a seeded order (LV-Eval samples at random).
        tiers = [[d for d in pool if d["tier"] == t] for t in (0, 1)]
        for tier in tiers:
            rng.shuffle(tier)
        candidates = tiers[0] + tiers[1]
        blocks = _mix_documents(evidence, candidates, target, ceiling, lambda t, lang=lang: count_units(t, lang),
                                lang, rng, f"item {item['item_id']!r} at level {level} ({unit_of(lang)})")
        context, starts = _render(blocks)
        evidence_ids = [d["doc_id"] for d in evidence]
        ev_pos = [k for k, b in enumerate(blocks) if b["doc_id"] in set(evidence_ids)]
        prompt = qa.render(context, item["question"])
        input_tokens, context_tokens, ev_depths = _relative_offsets(counter, context, prompt, [starts[k] for k in ev_pos])
        units_before = count_units(context[: starts[ev_pos[0]]], lang)
        rows.append(_row(
            item, instance_id=instance_id(item["item_id"], f"{level}/words", target, -1.0, "plain", fingerprint,
                                          qa.id_salt),
            prompt=qa, context=context, question=item["question"], evidence_ids=evidence_ids,
            context_ids=[b["doc_id"] for b in blocks], depth=round(units_before / max(target, 1), 4),
            evidence_depths=ev_depths, input_tokens=input_tokens, context_tokens=context_tokens,
            n_fillers=len(blocks) - len(evidence), counter=counter, unit="words", target=target))
    return instances_frame(rows), {"items_too_long_for_smallest_level": too_long, "length_unit": "words"}


def needle_sentence(item: dict, evidence_text: str) -> str | None:
    """The sentence of the evidence that states a gold answer (the factrecall needle), if any."""
    lang = _language(item)
    cuts = [0, *sentence_boundaries(evidence_text, lang), len(evidence_text)]
    for a, b in zip(cuts, cuts[1:]):
        sentence = evidence_text[a:b].strip()
        if sentence and contains_answer(sentence, list(item["answers"])):
            return sentence
    return None


def factrecall_needles(items: pl.DataFrame, documents: pl.DataFrame, config: BenchmarkConfig) -> list[tuple[dict, str]]:
    """(item, needle sentence) for ``factrecall_items`` items, in a seeded order: items with one
    evidence document holding a sentence that states the answer."""
    n_needles = config.lveval.factrecall_items
    docs = DocumentIndex(documents)
    needles: list[tuple[dict, str]] = []
    candidates = items.filter(items["evidence_doc_ids"].list.len() == 1)
    for item in select_items(candidates, candidates.height, derive_seed(config.seed, "factrecall")).iter_rows(named=True):
        sentence = needle_sentence(item, docs.evidence(item)[0]["text"])
        if sentence:
            needles.append((item, sentence))
        if len(needles) == n_needles:
            return needles
    raise ValueError(f"factrecall: only {len(needles)} items have a single evidence document with a sentence "
                     f"that states the answer; factrecall_items is {n_needles}")


def build_factrecall_instances(
    items: pl.DataFrame, documents: pl.DataFrame, *, level: str, config: BenchmarkConfig, counter: TokenCounter,
    prompt_for: PromptFor | None = None, task_by_language: Mapping[str, str],
) -> pl.DataFrame:
    """``factrecall_items`` needles x ``factrecall_positions`` evenly spaced positions, at one level.

    The haystack is the same for every position of a needle (only the needle moves); in token
    mode its target is the prompt's, in word mode the context's. A row's task is the factrecall task
    of its needle's language (``task_by_language``: LV-Eval's ``factrecall_en`` / ``factrecall_zh``,
    from its task file); ``prompt_for`` is asked with the item as the row will be, that task (None:
    our QA prompt with ``config.max_new_tokens``).
    """
    n_positions, unit = config.lveval.factrecall_positions, config.length_unit
    docs = DocumentIndex(documents)
    needles = factrecall_needles(items, documents, config)
    prompt_of = prompt_for_items(prompt_for, config.max_new_tokens)
    fingerprint = config.fingerprint(*INSTANCE_CONTENT_FIELDS)
    target = level_size(level, unit)
    rows = []
    for item, needle in needles:
        lang = _language(item)
        if lang not in task_by_language:
            raise ValueError(f"item {item['item_id']!r}: no factrecall task for language {lang!r} "
                             f"(the task files declare {dict(task_by_language)})")
        task = task_by_language[lang]
        qa = prompt_of({**item, "task": task})
        measure: Callable[[str], int]
        if unit == "words":
            measure = lambda text, lang=lang: count_units(text, lang)  # noqa: E731
            room = target - measure(needle)
        else:  # the prompt's tokens: leave room for the instruction, question and needle
            measure = counter.count
            room = target - counter.count(qa.render("", item["question"])) - counter.count(needle)
        rng = random.Random(derive_seed(config.seed, item["item_id"], level, "factrecall"))
        pool = docs.filler_pool(item, config.cross_domain_fill)
        rng.shuffle(pool)
        blocks = _mix_documents([], pool, room, int(room * (1 + config.length_tolerance / 2)), measure, lang, rng,
                                f"factrecall item {item['item_id']!r} at level {level}")
        haystack, _ = _render(blocks)
        for placement, context in place_needle(haystack, needle, n_positions, lang):
            prompt = qa.render(context, item["question"])
            input_tokens, context_tokens, depths = _relative_offsets(counter, context, prompt, [placement.char_offset])
            rows.append(_row(
                item, instance_id=instance_id(item["item_id"], f"{level}/factrecall/{unit}", target,
                                              placement.depth, "plain", fingerprint, qa.id_salt),
                prompt=qa, task=task, context=context, question=item["question"], evidence_ids=[],
                context_ids=[b["doc_id"] for b in blocks], depth=round(placement.depth, 4), evidence_depths=depths,
                input_tokens=input_tokens, context_tokens=context_tokens, n_fillers=len(blocks), counter=counter,
                unit=unit, target=target))
    return instances_frame(rows)
