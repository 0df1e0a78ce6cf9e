"""LV-Eval's length unit and text positions: words (English) / characters (Chinese), sentence
boundaries, word-level context mixing and a factrecall-style needle at evenly spaced depths.

LV-Eval's levels 16k ... 256k count **words for English and characters for Chinese**, never
model tokens (spec ``lveval.md`` §1): "punctuation marks are taken into account, while tabs,
blank spaces, and newlines are not included". We count English as whitespace-separated words
(LongBench's reading, spec §11 #8) and Chinese as non-whitespace characters; "k" is 1,000
(spec §1.1). A level is a target, not an exact size: distractors are sampled one by one until
the target is reached, then every unit is shuffled (spec §4.2).

Pure functions, no Dagster; every random choice comes from the ``seed`` argument.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PROTECTED",
    "LEVELS",
    "MixedContext",
    "NeedlePlacement",
    "count_units",
    "insert_sentence",
    "level_units",
    "mix_order",
    "mix_to_level",
    "needle_depths",
    "place_needle",
    "record_length",
    "sentence_boundaries",
]

LEVELS = ("16k", "32k", "64k", "128k", "256k")
_LEVEL = re.compile(r"^(?P<n>\d+)k$")

# Headers a sentence boundary must never fall inside: our block header (construct.prompts) and
# LV-Eval's passage header (spec §11 #9). A title such as "St. Mary" has a sentence-like end.
DEFAULT_PROTECTED = (
    re.compile(r"^Document \[\d+\] \(Title: [^\n]*?\): ", re.MULTILINE),
    re.compile(r"^(?:#+[ \t]*)?Passage \d+[ \t]*:?[ \t]*$", re.MULTILINE),
)

_EN_END = re.compile(r"[.!?][\"')\]\u201d\u2019]*(?=\s|$)")
_ZH_END = re.compile(r"[。！？!?][\u201d\u2019\u300d\u300f\uff09\"')]*")
# A period after these is not a sentence end ("Dr. Ostik", "J. Smith").
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st prof jr sr vs etc e.g i.e no nos co inc ltd mt ft gen col capt lt sgt rev fig vol ch pp".split()
)


def _check_language(language: str) -> None:
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")


def level_units(level: str) -> int:
    """``"16k"`` -> 16000 words (en) or characters (zh); any ``<n>k`` level is accepted."""
    m = _LEVEL.match(level.strip()) if isinstance(level, str) else None
    if m is None or int(m.group("n")) == 0:
        raise ValueError(f"invalid length level {level!r}: expected e.g. '16k' (k = 1,000 words or characters)")
    return int(m.group("n")) * 1000


def count_units(text: str, language: str) -> int:
    """Words (en, whitespace-separated) or characters without whitespace (zh)."""
    _check_language(language)
    if language == "zh":
        return sum(1 for ch in text if not ch.isspace())
    return len(text.split())


def record_length(question: str, context: str, answers: Sequence[str], language: str) -> int:
    """LV-Eval's ``length`` field: units of input + context + answers (spec §1.2)."""
    return count_units(question, language) + count_units(context, language) + sum(
        count_units(a, language) for a in answers
    )


# --------------------------------------------------------------------------- sentences


def _protected_spans(text: str, protected: Sequence[re.Pattern]) -> list[tuple[int, int]]:
    return sorted((m.start(), m.end()) for p in protected for m in p.finditer(text))


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < pos < e for s, e in spans)


def sentence_boundaries(
    text: str,
    language: str,
    protected: Sequence[re.Pattern] = DEFAULT_PROTECTED,
) -> list[int]:
    """Character offsets between two sentences, ascending: just after a sentence's final
    punctuation (and closing quotes), before the following whitespace.

    English ends are ``. ! ?`` followed by whitespace, not after a known abbreviation or a
    single-letter initial; Chinese ends are ``。！？``. Offsets inside a ``protected`` match (a
    block or passage header) are left out, and so is the very end of the text.
    """
    _check_language(language)
    spans = _protected_spans(text, protected)
    ends = []
    pattern = _ZH_END if language == "zh" else _EN_END
    for m in pattern.finditer(text):
        end = m.end()
        if end >= len(text.rstrip()):
            continue
        if language == "en" and text[m.start()] == ".":
            start = m.start()
            while start > 0 and not text[start - 1].isspace():  # the word before the period
                start -= 1
            token = text[start : m.start()].lower().lstrip("(\"'")
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                continue
        if not _inside(end, spans):
            ends.append(end)
    return ends


def insert_sentence(text: str, offset: int, sentence: str, language: str) -> tuple[str, int]:
    """Insert ``sentence`` at a boundary ``offset``; returns (new text, offset of its first character).

    English gets a separating space on the side that lacks whitespace; Chinese is joined as is.
    """
    _check_language(language)
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} is outside the text (length {len(text)})")
    if language == "zh":
        return text[:offset] + sentence + text[offset:], offset
    before = "" if offset == 0 or text[offset - 1].isspace() else " "
    after = "" if offset == len(text) or text[offset].isspace() else " "
    return text[:offset] + before + sentence + after + text[offset:], offset + len(before)


# --------------------------------------------------------------------------- mixing


@dataclass(frozen=True)
class MixedContext:
    units: list[str]  # supporting and distracting documents in context order
    kinds: list[str]  # "support" | "distractor", per unit
    length: int  # realised words (en) / characters (zh) of all units


def mix_order(
    support_sizes: Sequence[int],
    candidate_sizes: Sequence[int],
    target: int,
    rng: random.Random,
    max_total: int | None = None,
) -> tuple[list[tuple[str, int]], int]:
    """The mixing step on sizes alone: candidates are taken in the order given until the total
    (support included) reaches ``target``; then every unit is shuffled with ``rng``.

    Returns the context order as ("support", i) / ("distractor", j) indices into the two
    sequences, and the total. ``max_total`` skips a candidate that would push the total past
    it (the next one is tried): LV-Eval itself stops at the first document that reaches the
    target, overshooting by up to one document. Raises when the candidates run out short.
    """
    order = [("support", i) for i in range(len(support_sizes))]
    total = sum(support_sizes)
    for j, size in enumerate(candidate_sizes):
        if total >= target:
            break
        if max_total is not None and total + size > max_total:
            continue
        order.append(("distractor", j))
        total += size
    if total < target:
        raise ValueError(f"the distractor pool ({len(candidate_sizes)} documents) reaches only {total} of {target}")
    rng.shuffle(order)
    return order, total


def mix_to_level(
    support_units: Sequence[str],
    distractor_pool: Sequence[str],
    target: int,
    language: str,
    seed: int,
) -> MixedContext:
    """LV-Eval context mixing (spec §4.2): distractors in a seeded order are added one by one
    until the realised length (support included) reaches ``target``; then all units are shuffled.

    The result may overshoot the target (whole documents only) and falls short only when the
    pool runs out, which raises: a short context would silently sit at a lower level.
    """
    _check_language(language)
    if not support_units:
        raise ValueError("mix_to_level: no supporting documents")
    rng = random.Random(seed)
    candidates = [d for d in distractor_pool if d not in set(support_units)]
    rng.shuffle(candidates)
    try:
        order, total = mix_order([count_units(u, language) for u in support_units],
                                 [count_units(d, language) for d in candidates], target, rng)
    except ValueError as exc:
        raise ValueError(f"mix_to_level: {exc} {'characters' if language == 'zh' else 'words'}") from None
    units = [support_units[i] if kind == "support" else candidates[i] for kind, i in order]
    return MixedContext(units, [kind for kind, _ in order], total)


# --------------------------------------------------------------------------- needle


@dataclass(frozen=True)
class NeedlePlacement:
    depth: float  # requested relative position, 0 = before the first sentence, 1 = after the last
    sentence_index: int  # number of haystack sentences before the needle
    char_offset: int  # offset of the needle's first character in the resulting context


def needle_depths(n: int) -> list[float]:
    """``n`` evenly spaced depths from 0 to 1 inclusive (j / (n - 1), spec §11 #14); one needle sits at 0.5."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"number of needle positions must be a positive int, got {n!r}")
    return [0.5] if n == 1 else [j / (n - 1) for j in range(n)]


def place_needle(haystack: str, needle: str, n: int, language: str) -> Iterator[tuple[NeedlePlacement, str]]:
    """The factrecall construction: the needle at ``n`` evenly spaced sentence boundaries, one
    context per position (generated lazily: 200 copies of a 256k haystack do not fit in memory)."""
    cuts = [0, *sentence_boundaries(haystack, language), len(haystack)]
    for depth in needle_depths(n):
        k = round(depth * (len(cuts) - 1))
        context, offset = insert_sentence(haystack, cuts[k], needle, language)
        yield NeedlePlacement(depth, k, offset), context
