"""LV-Eval keyword and phrase replacement (KPR): rules, their checks, and their application.

A rule maps an ``old`` term to a ``new`` one for one item (spec ``lveval.md`` §6). Rules come
from a user file (CSV or JSONL with ``item_id, old, new``) or are proposed automatically: the
name-like terms of the item's answer, question and evidence get invented substitutes.

Matching is whole-word and case-aware: an old term matches in any letter case, never inside a
longer word, and its replacement copies the case of what it replaced (``KESSIK`` -> ``MOLVAR``,
``Kessik`` -> ``Molvar``). Chinese has no word boundaries, so Chinese characters match as
substrings. All rules of an item are applied in one pass, longer olds first, so rules never
feed each other. They apply to the question, the answers, the answer keywords, the context
and the confusing facts alike (spec §6.4), and :func:`remaining_terms` checks afterwards that
no old term is left anywhere.

A rule set is refused (``ValueError`` naming the item and the rule) when an old term is empty,
equals its new term, is listed twice, when two olds map to one new, or when a new term
contains an old one (the old would survive or chain). :func:`check_new_terms_absent` refuses a
new term that already occurs in the text to be rewritten: replacing A by an existing B would
merge two entities.

Pure functions, no Dagster.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import polars as pl

from lc_pipeline.fingerprints import short_id

__all__ = [
    "ReplacementRule",
    "TermIndex",
    "apply_rules",
    "check_new_terms_absent",
    "check_rules",
    "entity_spans",
    "load_rules",
    "propose_rules",
    "remaining_terms",
    "rule_id",
    "rules_by_item",
    "rules_frame",
    "term_pattern",
]


@dataclass(frozen=True)
class ReplacementRule:
    item_id: str
    old: str
    new: str
    origin: str = "user"  # "user" (a rules file) | "auto" (propose_rules)


def rule_id(rule: ReplacementRule) -> str:
    return short_id(rule.item_id, rule.old, rule.new, length=16)


# --------------------------------------------------------------------------- matching

# Letters and digits that make a word longer: Latin (with accents), Greek, Cyrillic. CJK
# characters do not (Chinese has no spaces), so a name next to a Chinese character still
# matches. An explicit class: Unicode-wide classes cost ~50 ms to compile per term.
_WORD = r"[0-9A-Za-z_\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]"
_WORD_CHAR = re.compile(_WORD)


@lru_cache(maxsize=4096)
def term_pattern(term: str) -> re.Pattern:
    """Whole-word, case-insensitive pattern of a term; inner whitespace matches any whitespace."""
    body = r"\s+".join(re.escape(part) for part in term.split())
    left = rf"(?<!{_WORD})" if _WORD_CHAR.match(term[0]) else ""
    right = rf"(?!{_WORD})" if _WORD_CHAR.match(term[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _with_case_of(matched: str, old: str, new: str) -> str:
    if matched == old:
        return new
    letters = [c for c in matched if c.isalpha()]
    if letters and all(c.isupper() for c in letters) and len(letters) > 1:
        return new.upper()
    if letters and all(c.islower() for c in letters):
        return new.lower()
    if matched[:1].isupper() and not old[:1].isupper():  # capitalized at a sentence start
        return new[:1].upper() + new[1:]
    return new


class _Replacer:
    """All rules of one item as a single alternation, longest old first."""

    def __init__(self, rules: Sequence[ReplacementRule]) -> None:
        self.rules = sorted(rules, key=lambda r: (-len(r.old), r.old.lower()))
        parts = [f"({term_pattern(r.old).pattern})" for r in self.rules]
        self.pattern = re.compile("|".join(parts), re.IGNORECASE) if parts else None

    def sub(self, text: str, counts: Counter | None = None) -> str:
        if self.pattern is None or not text:
            return text

        def repl(m: re.Match) -> str:
            rule = self.rules[m.lastindex - 1]
            if counts is not None:
                counts[rule.old] += 1
            return _with_case_of(m.group(0), rule.old, rule.new)

        return self.pattern.sub(repl, text)


def apply_rules(texts: Mapping[str, str | Sequence[str]], rules: Sequence[ReplacementRule]) -> tuple[dict, Counter]:
    """Rewrite every text of ``texts`` (field name -> string or list of strings) with ``rules``.

    Returns the rewritten fields (same shapes) and how often each old term was replaced.
    """
    replacer = _Replacer(rules)
    counts: Counter = Counter()
    out: dict = {}
    for field, value in texts.items():
        if isinstance(value, str):
            out[field] = replacer.sub(value, counts)
        else:
            out[field] = [replacer.sub(v, counts) for v in value]
    return out, counts


def remaining_terms(
    texts: Mapping[str, str | Sequence[str]], rules: Sequence[ReplacementRule]
) -> list[tuple[str, str, int]]:
    """``(field, old term, char offset)`` for every old term still present: empty after a correct KPR."""
    found = []
    for rule in rules:
        pattern = term_pattern(rule.old)
        for field, value in texts.items():
            values = [value] if isinstance(value, str) else list(value)
            for i, text in enumerate(values):
                name = field if isinstance(value, str) else f"{field}[{i}]"
                found.extend((name, rule.old, m.start()) for m in pattern.finditer(text or ""))
    return found


# --------------------------------------------------------------------------- rule sets


def check_rules(rules: Iterable[ReplacementRule]) -> None:
    """Refuse rule sets that cannot be applied consistently (see the module docstring)."""
    by_item: dict[str, list[ReplacementRule]] = defaultdict(list)
    for rule in rules:
        where = f"item {rule.item_id!r}, rule {rule.old!r} -> {rule.new!r}"
        for field in ("item_id", "old", "new"):
            value = getattr(rule, field)
            if not isinstance(value, str) or not value.strip() or value != value.strip():
                raise ValueError(f"{where}: field {field!r} must be a non-empty string without surrounding spaces")
        if rule.old.lower() == rule.new.lower():
            raise ValueError(f"{where}: field 'new' equals the old term")
        by_item[rule.item_id].append(rule)
    for item_id, item_rules in by_item.items():
        olds: dict[str, ReplacementRule] = {}
        news: dict[str, ReplacementRule] = {}
        for rule in item_rules:
            where = f"item {item_id!r}, rule {rule.old!r} -> {rule.new!r}"
            key_old, key_new = " ".join(rule.old.lower().split()), " ".join(rule.new.lower().split())
            if key_old in olds:
                raise ValueError(f"{where}: field 'old': the term is already replaced by {olds[key_old].new!r}")
            if key_new in news:
                raise ValueError(f"{where}: field 'new': {news[key_new].old!r} is already "
                                 "replaced by the same term (never two olds to one new)")
            olds[key_old], news[key_new] = rule, rule
        for rule in item_rules:
            for other in item_rules:
                if term_pattern(other.old).search(rule.new):
                    raise ValueError(
                        f"item {item_id!r}, rule {rule.old!r} -> {rule.new!r}: field 'new' contains the old term "
                        f"{other.old!r}, which would remain after replacement"
                    )


def check_new_terms_absent(
    texts: Mapping[str, str | Sequence[str]], rules: Sequence[ReplacementRule], where: str
) -> None:
    """Refuse a rule whose new term already occurs in the texts it is about to rewrite."""
    for rule in rules:
        pattern = term_pattern(rule.new)
        for field, value in texts.items():
            values = [value] if isinstance(value, str) else list(value)
            if any(pattern.search(v or "") for v in values):
                raise ValueError(
                    f"{where}: rule {rule.old!r} -> {rule.new!r} (item {rule.item_id!r}): field 'new': the term "
                    f"already occurs in {field}; replacing would merge two different things"
                )


_RULE_FIELDS = ("item_id", "old", "new")


def load_rules(path: str | Path) -> list[ReplacementRule]:
    """Rules from a ``.csv`` (header with ``item_id,old,new``) or ``.jsonl``/``.json`` file.

    Extra columns (e.g. a note) are allowed and ignored. Errors name the file, the row or line,
    the item and the field. The returned rules passed :func:`check_rules`.
    """
    path = Path(path)
    rows: list[tuple[str, dict]] = []
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in _RULE_FIELDS if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path}: header lacks column(s) {missing}; expected item_id,old,new")
            for i, row in enumerate(reader, start=2):  # row 1 is the header
                rows.append((f"row {i}", row))
    elif suffix in (".jsonl", ".json"):
        with path.open(encoding="utf-8") as f:
            for i, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {i}: not valid JSON ({exc.msg})") from None
                if not isinstance(rec, dict):
                    raise ValueError(f"{path}: line {i}: expected a JSON object with item_id, old, new")
                rows.append((f"line {i}", rec))
    else:
        raise ValueError(f"{path}: replacement rules must be a .csv or .jsonl file")
    rules = []
    for where, rec in rows:
        item = rec.get("item_id")
        label = f"{path}: {where}" + (f" (item {item!r})" if isinstance(item, str) and item else "")
        values = {}
        for field in _RULE_FIELDS:
            value = rec.get(field)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{label}: field {field!r}: missing or empty")
            values[field] = value.strip()
        rules.append(ReplacementRule(values["item_id"], values["old"], values["new"], "user"))
    if not rules:
        raise ValueError(f"{path}: no rules")
    try:
        check_rules(rules)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return rules


def rules_frame(rules: Sequence[ReplacementRule]) -> pl.DataFrame:
    """REPLACEMENT_RULES rows, one per rule, ``rule_index`` = order within its item."""
    from lc_pipeline import schemas

    index: Counter = Counter()
    rows = []
    for r in rules:
        rows.append({"rule_id": rule_id(r), "item_id": r.item_id, "rule_index": index[r.item_id],
                     "old": r.old, "new": r.new, "origin": r.origin})
        index[r.item_id] += 1
    return schemas.conform(pl.DataFrame(rows, schema=schemas.REPLACEMENT_RULES), "replacement_rules")


def rules_by_item(frame: pl.DataFrame) -> dict[str, list[ReplacementRule]]:
    """REPLACEMENT_RULES rows back to rules, per item, in rule_index order."""
    out: dict[str, list[ReplacementRule]] = defaultdict(list)
    for r in frame.sort("item_id", "rule_index").iter_rows(named=True):
        out[r["item_id"]].append(ReplacementRule(r["item_id"], r["old"], r["new"], r["origin"]))
    return dict(out)


# --------------------------------------------------------------------------- proposal

_STOP = frozenset(
    """a an the and or but of in on at to for from by with as is was were be been are this that these those it its
    he she they his her their him them we our you your i my me what which who whom whose where when why how whether
    in what year which organisation did does do on which river one two three four five six seven eight nine ten
    first second third there here then after before during while since until under over between about into
    january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday mr mrs ms dr st passage document title question answer""".split()
)
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*[A-Za-z]|[A-Za-z]")
_ZH_ENTITY_FLAGS = ("nr", "ns", "nt", "nz")


@cache
def _posseg():
    from lc_pipeline.text import jieba_tokenizer

    jieba_tokenizer()  # quiet logger first
    import jieba.posseg

    return jieba.posseg


def _sentence_initial(text: str, start: int) -> bool:
    j = start - 1
    while j >= 0 and (text[j].isspace() or text[j] in "\"'(\u201c\u2018["):
        j -= 1
    return j < 0 or text[j] in ".!?:;\n"


class TermIndex:
    """What a corpus already contains, so invented substitutes never collide with real text.

    English: the set of words (lower-cased) and the words ever seen in lower case (common
    words, not names). Chinese: the texts themselves, searched as substrings.
    """

    def __init__(self, texts: Iterable[str], language: str) -> None:
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        self.language = language
        self.words: set[str] = set()
        self.lower_seen: set[str] = set()
        self.capitalized_inside: set[str] = set()  # seen capitalized not at a sentence start
        chunks = []
        for text in texts:
            text = text or ""
            if language == "zh":
                chunks.append(text)
            for m in _EN_WORD.finditer(text):
                w = m.group(0)
                self.words.add(w.lower())
                if w.islower():
                    self.lower_seen.add(w)
                elif w[:1].isupper() and not _sentence_initial(text, m.start()):
                    self.capitalized_inside.add(w.lower())
        self.text = "\n".join(chunks)

    def contains(self, term: str) -> bool:
        if self.language == "zh" and not _WORD_CHAR.match(term[0]):
            return term in self.text
        words = [w.lower() for w in _EN_WORD.findall(term)]
        return bool(words) and all(w in self.words for w in words)

    def add(self, term: str) -> None:
        for w in _EN_WORD.findall(term):
            self.words.add(w.lower())
        if self.language == "zh":
            self.text += "\n" + term

    def is_name_like(self, word: str) -> bool:
        """Capitalized, not a function word, never written in lower case in the corpus, and
        capitalized somewhere inside a sentence (a word seen capitalized only at sentence starts,
        "Roads were built ...", is an ordinary word)."""
        key = word.lower()
        return (word[:1].isupper() and len(word) >= 3 and key not in _STOP and key not in self.lower_seen
                and key in self.capitalized_inside)


def entity_spans(text: str, language: str, index: TermIndex | None = None) -> list[str]:
    """Name-like terms of a text, in order of first occurrence, without duplicates.

    English: capitalized words that are not function words (and, with an ``index``, never
    written in lower case in the corpus), so "Rilos Ostik" gives "Rilos" and "Ostik": replacing
    each word also rewrites the surname standing alone. Chinese: jieba's person, place,
    organisation and other proper-noun words (nr, ns, nt, nz) and the titles inside 《》.
    """
    seen: dict[str, None] = {}
    if language == "zh":
        for title in re.findall(r"《([^《》]{2,20})》", text):
            seen.setdefault(title)
        for pair in _posseg().cut(text):
            if pair.flag in _ZH_ENTITY_FLAGS and len(pair.word) >= 2 and not pair.word.isascii():
                seen.setdefault(pair.word)
        return list(seen)
    if language != "en":
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    for w in _EN_WORD.findall(text):
        w = w.rstrip("'\u2019").removesuffix("'s").removesuffix("\u2019s")
        if not w[:1].isupper() or len(w) < 3 or w.lower() in _STOP:
            continue
        if index is not None and not index.is_name_like(w):
            continue
        seen.setdefault(w)
    return list(seen)


_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kl", "tr", "sk"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"]
_CODAS = ["", "", "n", "r", "l", "s", "k", "th", "m", "nd", "rd", "sk"]
# Characters that read as names in Chinese, for invented Chinese substitutes.
_ZH_NAME_CHARS = "安柏岑戴范葛韩霍纪柯黎陆梅穆聂欧潘秦饶苏谭汪夏严尹詹卓辰澜朔宸瑶琪璟珂屿岚渊霁墨澄"


def _invent_en(old: str, rng: random.Random) -> str:
    target = max(4, min(12, len(old)))
    word = ""
    while len(word) < target - 1:
        word += rng.choice(_ONSETS) + rng.choice(_VOWELS)
    word += rng.choice(_CODAS)
    word = word[: target + 2]
    return word.capitalize() if old[:1].isupper() else word


def _invent_zh(old: str, rng: random.Random) -> str:
    pool = [c for c in _ZH_NAME_CHARS if c not in old]
    return "".join(rng.choice(pool) for _ in range(max(2, len(old))))


def _shares_characters(old: str, new: str) -> bool:
    # LV-Eval guideline a): the substitute should differ entirely from the original.
    if any("\u3400" <= c <= "\u9fff" for c in old):
        return bool(set(old) & set(new))
    return old[:3].lower() == new[:3].lower()


def propose_rules(
    item: Mapping,
    evidence_texts: Sequence[str],
    index: TermIndex,
    *,
    seed: int,
    max_rules: int = 4,
) -> list[ReplacementRule]:
    """Invented substitutes for the item's name-like terms: answers first, then the question,
    then the evidence's names by frequency (LV-Eval replaces answer terms, and question terms
    with them; guideline b: as many as possible, up to ``max_rules``).

    ``item`` needs ``item_id, language, question, answers``. Each substitute is new to
    ``index`` (the corpus the contexts are drawn from plus every substitute already handed out:
    call this for items in a fixed order), shares no leading letters (en) or characters (zh)
    with its term, and is never reused for a second term.
    """
    language = item["language"]
    rng = random.Random(seed)
    evidence = "\n".join(evidence_texts)
    name_index = index if language == "en" else None
    ordered: dict[str, str] = {}  # lower-case key -> term as first written
    for text in [*item["answers"], item["question"]]:
        for term in entity_spans(text, language, name_index):
            ordered.setdefault(term.lower(), term)
    # Then the evidence's own names, the most frequent first (fixed terms, LV-Eval guideline c).
    in_evidence = entity_spans(evidence, language, name_index)
    frequency = {t: len(term_pattern(t).findall(evidence)) for t in in_evidence}
    for term in sorted(in_evidence, key=lambda t: -frequency[t]):  # stable: ties keep first-occurrence order
        ordered.setdefault(term.lower(), term)
    candidates = list(ordered.values())
    rules: list[ReplacementRule] = []
    used_news: set[str] = set()
    for term in candidates:
        if len(rules) >= max_rules:
            break
        if any(term_pattern(r.old).search(term) or term_pattern(term).search(r.old) for r in rules):
            continue  # one term inside another: the longer one already covers it
        for _ in range(200):
            new = _invent_en(term, rng) if language == "en" else _invent_zh(term, rng)
            if new.lower() in used_news or index.contains(new) or _shares_characters(term, new):
                continue
            if any(term_pattern(r.old).search(new) for r in rules) or term_pattern(term).search(new):
                continue
            break
        else:  # pragma: no cover - 200 collisions would need an exhausted name space
            raise ValueError(f"item {item['item_id']!r}: no unused substitute found for {term!r}")
        used_news.add(new.lower())
        index.add(new)
        rules.append(ReplacementRule(item["item_id"], term, new, "auto"))
    check_rules(rules)
    return rules
