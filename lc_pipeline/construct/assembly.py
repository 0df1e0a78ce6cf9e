"""Length-controlled assembly of QA instances (HELMET RAG x 100-LongBench style).

One instance = our QA prompt around a context of numbered document blocks:

* the item's evidence documents (always, whole);
* hard negatives: retrieved passages that contain no gold answer, in retrieval-rank order
  (HELMET §2.2), as many as fit;
* same-domain filler documents that contain no gold answer, in a seeded order, as many as
  fit (100-LongBench's greedy fill);
* one filler cut at a word (preferably sentence) boundary that closes the remaining gap.

The first evidence document is placed at the configured depth; the whole prompt is then
counted exactly and the cut filler lengthened/shortened until ``input_tokens`` sits just
below the target. An instance that cannot get within ``length_tolerance`` is an error,
never a silently short row.

Counting: each block is encoded once per level; a prompt's count (and each evidence block's
token offset) is the sum of its blocks' counts, which is exact for cl100k_base because every
block starts a new pre-token (``_pieces_add_up``). So no prompt is encoded to build a level;
its first instance is, as a check.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import json
import operator
import random
import string
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import tiktoken

from lc_pipeline.config import BenchmarkConfig, level_tokens
from lc_pipeline.construct.chunking import word_spans
from lc_pipeline.construct.prompts import (
    BLOCK_SEPARATOR,
    PROMPT_VERSION,
    build_prompt,
    format_block,
    format_context,
    join_blocks,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import INSTANCE_CONTENT_FIELDS, short_id
from lc_pipeline.schemas import INSTANCES, conform
from lc_pipeline.text import normalize_answer


SUITE = "qa"  # INSTANCES.suite of rows built here
AIM = 0.005  # aim for input_tokens in [target * (1 - AIM), target]: well inside +-1 %
AIM_MAX_TOKENS = 32  # ... and never more than this short: about one sentence
MIN_CUT_TOKENS = 8  # a cut filler shorter than this is a scrap, not a document
CORRECTION_ROUNDS = 6
_ESTIMATE_INDEX = 1  # block costs are estimated with this index; the exact count fixes the rest
_SENTENCE_END = frozenset(".!?")
_CLOSERS = frozenset("\"')]\u201d\u2019")
_PUNCT_DELETE = str.maketrans("", "", string.punctuation)
_DOC_ID = operator.itemgetter("doc_id")


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any parts (sha256; Python's hash() is salted per process)."""
    blob = json.dumps([str(p) for p in parts]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def instance_id(item_id: str, level: str, target: int, depth: float, variant: str, fingerprint: str) -> str:
    # The prompt wording is part of an instance: rewording yields new ids, not reused rows.
    return short_id(item_id, level, target, depth, variant, fingerprint, PROMPT_VERSION, length=16)


# --------------------------------------------------------------------------- items


def select_items(items: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """A seeded choice of ``n`` items, balanced across tasks, used at every length level.

    Levels share their QA pairs and differ only in context (LV-Eval), so score changes
    across lengths are not item-sampling noise. Each task's items are shuffled with a seed
    of their own, then tasks are taken round-robin (in a seeded task order).
    """
    if n > items.height:
        raise ValueError(f"select_items: asked for {n} items but only {items.height} exist")
    if n <= 0:
        return items.clear()
    rows = sorted(items.iter_rows(named=True), key=lambda r: r["item_id"])  # independent of input row order
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[r["task"]].append(r)
    for task, task_rows in by_task.items():
        random.Random(derive_seed(seed, "select_items", task)).shuffle(task_rows)
    tasks = sorted(by_task)
    random.Random(derive_seed(seed, "task_order")).shuffle(tasks)
    picked: list[dict] = []
    depth = 0
    while len(picked) < n:
        for task in tasks:
            if depth < len(by_task[task]) and len(picked) < n:
                picked.append(by_task[task][depth])
        depth += 1
    return pl.DataFrame(picked, schema=items.schema, orient="row")


# --------------------------------------------------------------------------- fillers


def _answer_words(answers: Iterable[str]) -> list[list[str]]:
    """The words of each normalized answer (answers that normalize to nothing left out).

    If contains_answer(text, answers) holds, every word of one of the answers occurs in
    text.lower() with ASCII punctuation deleted (each word of the normalized text is a
    substring of that string), so a document lacking a word of every answer cannot contain
    one; for the others the full check (contains_answer's) makes the decision.
    """
    return [words for words in (normalize_answer(a).split() for a in answers) if words]


def _contains_normalized(cache: dict[str, str], key: str, text: str, normalized_answers: Sequence[str]) -> bool:
    """``contains_answer(text, answers)`` for ``normalized_answers = [normalize_answer(a) for a in answers]``,
    with the text normalized once per ``key`` (a document or passage id) in ``cache``: a level
    screens the same documents for every item, and normalizing one takes ~0.2 ms."""
    norm = cache.get(key)
    if norm is None:
        norm = cache[key] = normalize_answer(text)
    return any(na and na in norm for na in normalized_answers)


class _PassageScreen:
    """``contains_answer`` for passages met again and again (a level's hard negatives), exact and cheap:
    a passage is lower-cased and stripped of ASCII punctuation once, and normalized only when it
    holds every word of an answer (see :func:`_answer_words`)."""

    def __init__(self) -> None:
        self.stripped: dict[str, str] = {}
        self.normalized: dict[str, str] = {}

    def contains_answer(self, key: str, text: str, answer_words: list[list[str]],
                        normalized_answers: Sequence[str]) -> bool:
        stripped = self.stripped.get(key)
        if stripped is None:
            stripped = self.stripped[key] = (text or "").lower().translate(_PUNCT_DELETE)
        if not any(all(w in stripped for w in words) for words in answer_words):
            return False
        return _contains_normalized(self.normalized, key, text, normalized_answers)


class DocumentIndex:
    """Documents by id and by domain, with answer pre-screening reused across items."""

    def __init__(self, documents: pl.DataFrame) -> None:
        self.rows = documents.select("doc_id", "title", "text", "domain", "language").sort("doc_id").to_dicts()
        self.by_id = {r["doc_id"]: r for r in self.rows}
        if len(self.by_id) != len(self.rows):
            raise ValueError("documents: field 'doc_id' has duplicates")
        self.index = {r["doc_id"]: i for i, r in enumerate(self.rows)}
        self.by_domain: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(self.rows):
            self.by_domain[r["domain"]].append(i)
        self.normalized: dict[str, str] = {}  # doc id -> normalize_answer(text), filled as items ask
        self._candidates: dict[tuple, list[tuple[int, dict]]] = {}
        self._tiered: dict[tuple[int, int], dict] = {}
        self._word_docs: dict[str, set[int]] = {}

    # The answer screen's texts are made when a filler pool is first asked for (evidence lookups,
    # as in fitting_items, need none of them).
    @functools.cached_property
    def stripped(self) -> list[str]:
        """Each document lower-cased without ASCII punctuation (C-speed, once, not per item and document)."""
        return [(r["text"] or "").lower().translate(_PUNCT_DELETE) for r in self.rows]

    @functools.cached_property
    def _all_stripped(self) -> str:
        # One string of them all, so an answer word is looked up with str.find, not per document.
        return "\x00".join(self.stripped)

    @functools.cached_property
    def _starts(self) -> list[int]:
        return list(itertools.accumulate((len(t) + 1 for t in self.stripped[:-1]), initial=0))

    def evidence(self, item: dict) -> list[dict]:
        missing = [d for d in item["evidence_doc_ids"] if d not in self.by_id]
        if missing or not item["evidence_doc_ids"]:
            raise ValueError(
                f"item {item['item_id']!r}: field 'evidence_doc_ids' {list(item['evidence_doc_ids'])} "
                f"names documents not in the documents table: {missing or 'none given'}"
            )
        return [self.by_id[d] for d in item["evidence_doc_ids"]]

    def _docs_containing(self, word: str) -> set[int]:
        """Indices of the documents whose stripped text contains ``word`` (cached: items share words)."""
        found = self._word_docs.get(word)
        if found is not None:
            return found
        found = self._word_docs[word] = set()
        pos = self._all_stripped.find(word)
        while pos >= 0:
            i = bisect.bisect_right(self._starts, pos) - 1
            found.add(i)
            if i + 1 >= len(self._starts):
                break
            pos = self._all_stripped.find(word, self._starts[i + 1])  # on to the next document
        return found

    def screen_answers(self, answer_lists: Iterable[Iterable[str]]) -> None:
        """Find, for many items at once, the documents holding each answer's rarest word.

        One Aho-Corasick pass over all documents (polars ``extract_many``, every occurrence of
        every word) instead of one ``str.find`` sweep per word: what :meth:`filler_pool` then
        asks for is cached. Same sets as the sweep: a byte string is in a UTF-8 text exactly
        when its characters are.
        """
        words = sorted({max(w, key=len) for answers in answer_lists for w in _answer_words(answers)}
                       - self._word_docs.keys())
        if not words:
            return
        found: dict[str, set[int]] = {w: set() for w in words}
        hits = pl.Series(self.stripped, dtype=pl.String).str.extract_many(words, overlapping=True)
        for i, matched in enumerate(hits.to_list()):
            for w in matched:
                found[w].add(i)
        self._word_docs.update(found)

    def _may_contain_answer(self, answers: Iterable[str]) -> set[int]:
        """Indices of the documents with every word of at least one answer (see :func:`_answer_words`)."""
        found: set[int] = set()
        for words in _answer_words(answers):  # the longest word is the rarest, usually
            found.update(i for i in self._docs_containing(max(words, key=len))
                         if all(w in self.stripped[i] for w in words))
        return found

    def filler_pool(self, item: dict, cross_domain: bool = True) -> list[dict]:
        """Documents that may fill the item's context: not evidence, not blank, no gold answer.

        Same-domain documents come first (``tier`` 0). With ``cross_domain``, documents of the
        other domains in the evidence's language follow (``tier`` 1): a real corpus sample can
        hold too little same-domain text for long levels, and 100-LongBench fills from a
        broad multi-domain noise pool anyway. The assembler uses tier 1 only when tier 0 runs out.
        """
        evidence = self.evidence(item)
        evidence_ids = {d["doc_id"] for d in evidence}
        domains = tuple(sorted({d["domain"] for d in evidence}))
        languages = tuple(sorted({d["language"] for d in evidence}))
        answers = list(item["answers"])
        normalized_answers = [normalize_answer(a) for a in answers]
        # Items share domains: the candidates (not blank, in doc_id order per tier) are listed once.
        key = (domains, languages, cross_domain)
        if key not in self._candidates:
            candidates = [(0, i) for domain in domains for i in self.by_domain[domain]]
            if cross_domain:
                candidates += [
                    (1, i)
                    for domain in sorted(set(self.by_domain) - set(domains))
                    for i in self.by_domain[domain]
                    if self.rows[i]["language"] in languages
                ]
            # Pool rows are shared by the items' pools (and keys); nobody changes a pool row.
            self._candidates[key] = [
                (i, self._tiered.get((i, tier)) or self._tiered.setdefault((i, tier), {**self.rows[i], "tier": tier}))
                for tier, i in candidates if self.stripped[i].strip()
            ]
        excluded = {i for i in self._may_contain_answer(answers)
                    if _contains_normalized(self.normalized, self.rows[i]["doc_id"], self.rows[i]["text"],
                                            normalized_answers)}
        excluded.update(self.index[d] for d in evidence_ids)
        return [row for i, row in self._candidates[key] if i not in excluded]


def filler_pool(documents: pl.DataFrame, item: dict, cross_domain: bool = True) -> list[dict]:
    """Documents that may fill ``item``'s context (see :meth:`DocumentIndex.filler_pool`), doc_id order per tier."""
    return DocumentIndex(documents).filler_pool(item, cross_domain)


# --------------------------------------------------------------------------- assembly


@dataclass
class _Block:
    block_id: str  # doc id, passage id, or "<doc id>:cut"
    kind: str  # evidence | hard_negative | filler | cut
    title: str
    text: str
    cost: int  # estimated tokens of the formatted block


class _Costs:
    """Tokens a block adds to the prompt, counted once per block id (batched, cached).

    A block is counted together with the separator after it: cl100k merges a final "."
    with the following "\\n\\n", and "Document"/"Question" always start a new pre-token, so
    these per-block counts (plus ``_index_extra`` for numbers of 4+ digits) add up to the
    exact prompt length.
    """

    def __init__(self, counter: TokenCounter, cache: dict[str, int] | None) -> None:
        self.counter = counter
        self.cache = {} if cache is None else cache

    def block(self, title: str, text: str) -> int:
        return self.counter.count(format_block(_ESTIMATE_INDEX, title, text) + BLOCK_SEPARATOR)

    def ensure(self, rows: Sequence[dict], key: str) -> None:
        todo = [r for r in rows if r[key] not in self.cache]
        if todo:
            texts = [format_block(_ESTIMATE_INDEX, r["title"], r["text"]) + BLOCK_SEPARATOR for r in todo]
            # One at a time: count_many starts a thread pool per call, which costs more CPU than
            # these few hundred-token blocks (64 a call) take to encode.
            for r, text in zip(todo, texts):
                self.cache[r[key]] = self.counter.count(text)

    def get(self, row: dict, key: str) -> int:
        self.ensure([row], key)
        return self.cache[row[key]]


@functools.lru_cache(maxsize=None)
def _index_extra(counter: TokenCounter, digits: int) -> int:
    """Extra tokens of a block numbered with ``digits`` digits over one numbered 1."""
    return counter.count(format_block(10 ** (digits - 1), "x", "")) - counter.count(format_block(_ESTIMATE_INDEX, "x", ""))


class _Cutter:
    """Prefixes of one filler document cut at word (preferably sentence) boundaries."""

    def __init__(self, row: dict, counter: TokenCounter) -> None:
        self.row = row
        self.counter = counter
        self.ids = counter.encode(row["text"])
        text = row["text"]
        self.word_ends = [e for _, e in word_spans(text)]
        self.sentence_ends = [
            e
            for e in self.word_ends
            if text[e - 1] in _SENTENCE_END or (e >= 2 and text[e - 1] in _CLOSERS and text[e - 2] in _SENTENCE_END)
        ]

    def cut(self, body_tokens: int, sentence_slack: int) -> str:
        """The longest word-boundary prefix of at most about ``body_tokens`` tokens; the last
        sentence end before it is taken instead when that costs at most ``sentence_slack``."""
        text = self.row["text"]
        body_tokens = max(1, min(body_tokens, len(self.ids)))
        # A token prefix decodes to a byte prefix of the text; dropping a split UTF-8 tail
        # leaves an exact character prefix.
        limit = len(self.counter.encoding.decode_bytes(self.ids[:body_tokens]).decode("utf-8", errors="ignore"))
        i = bisect.bisect_right(self.word_ends, limit)
        end = self.word_ends[i - 1] if i else self.word_ends[0]
        j = bisect.bisect_right(self.sentence_ends, end)
        if j and limit > 0:
            chars_per_token = limit / body_tokens
            if (end - self.sentence_ends[j - 1]) / chars_per_token <= sentence_slack:
                end = self.sentence_ends[j - 1]
        return text[:end]


@functools.lru_cache(maxsize=None)
def _token_byte_lengths(encoding: tiktoken.Encoding) -> np.ndarray:
    """Bytes of each token id of ``encoding`` (0 for ids it does not use)."""
    lengths = np.zeros(encoding.n_vocab, dtype=np.int64)
    for i in range(encoding.n_vocab):
        try:
            lengths[i] = len(encoding.decode_single_token_bytes(i))
        except KeyError:  # a gap in the id space; encode_ordinary never yields it
            pass
    return lengths


class _TokenPositions:
    """Where character positions of an encoded text fall in its token ids.

    Lets the one exact encoding of a prompt also give the token offset of every block, instead
    of re-encoding prefixes. Each token decodes to a whole number of bytes, so a character
    position is a token boundary exactly when its UTF-8 byte offset is a cumulative token length.
    """

    def __init__(self, counter: TokenCounter, text: str, ids: np.ndarray, vocabulary_table: bool = True) -> None:
        self.text = text
        self.ascii = text.isascii()  # then byte offset == character offset
        if vocabulary_table:  # 0.2 s once per process, then a numpy lookup per prompt
            lengths = _token_byte_lengths(counter.encoding)[ids]
        else:  # one text: the bytes of its distinct tokens
            distinct, where = np.unique(ids, return_inverse=True)
            decode = counter.encoding.decode_single_token_bytes
            lengths = np.fromiter((len(decode(int(t))) for t in distinct), np.int64, len(distinct))[where]
        self.token_ends = np.cumsum(lengths)

    def tokens_before(self, char_pos: int) -> int | None:
        """How many tokens the text before ``char_pos`` spans, or None if a token straddles it."""
        if char_pos == 0:
            return 0
        byte_pos = char_pos if self.ascii else len(self.text[:char_pos].encode("utf-8"))
        i = int(np.searchsorted(self.token_ends, byte_pos))
        return i + 1 if i < len(self.token_ends) and self.token_ends[i] == byte_pos else None


# Pre-tokenizer patterns for which a text's tokens are its pieces' tokens laid end to end when
# each cut is a "\n" followed by a non-space character (as before every "Document [" block and
# the "Question:" line). No alternative matches across such a cut: the letter/number/symbol
# runs never take a "\n" as their optional first character, and the whitespace ones stop before
# a non-space; the whitespace run that ends at the cut is one pre-token whether the text goes on
# (``\s*[\r\n]``) or ends there (``\s++$``, ``\s*[\r\n]+``); nothing looks behind. BPE works within a
# pre-token, so counts add up. cl100k_base as tiktoken writes it now and before 0.7.
_ADDITIVE_PATTERNS = frozenset({
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
})


@functools.lru_cache(maxsize=None)
def _pieces_add_up(encoding: tiktoken.Encoding) -> bool:
    """Whether a prompt's token count is the sum of its blocks' counts (see _ADDITIVE_PATTERNS).

    Also needs every 1-3 digit group to be one token, so that a block numbered ``i`` costs its
    count with index 1 plus ``_index_extra`` (the number is a pre-token between "[" and "]").
    Other encodings take the slow way: the whole prompt is encoded.
    """
    if getattr(encoding, "_pat_str", None) not in _ADDITIVE_PATTERNS:
        return False
    groups = [str(i) for i in range(1000)] + [f"{i:02d}" for i in range(10)] + [f"{i:03d}" for i in range(100)]
    return all(len(encoding.encode_ordinary(g)) == 1 for g in groups)


def _offsets_from_encoding(counter: TokenCounter, item: dict, sequence: Sequence[_Block], context: str, prompt: str,
                           prompt_ids: np.ndarray, ev_ids: list[str], last_alone: int,
                           vocabulary_table: bool = True) -> tuple[int, list[int]]:
    """(context tokens, each evidence block's token offset in the context), read off the prompt's encoding."""
    context_start = build_prompt("\x00", item["question"]).index("\x00")  # what precedes the context
    starts: dict[str, int] = {}
    pos = last_start = 0
    for i, b in enumerate(sequence, start=1):
        if b.kind == "evidence":
            starts[b.block_id] = pos
        last_start = pos
        pos += len(format_block(i, b.title, b.text)) + len(BLOCK_SEPARATOR)
    positions = _TokenPositions(counter, prompt, prompt_ids, vocabulary_table)
    at = [positions.tokens_before(context_start + p) for p in (0, last_start, *(starts[d] for d in ev_ids))]
    if None in at:  # a token straddles a block start: count the prefixes alone
        counts = counter.count_many([context] + [context[: starts[d]] for d in ev_ids])
        return counts[0], counts[1:]
    return at[1] - at[0] + last_alone, [a - at[0] for a in at[2:]]


def _verify_additive(counter: TokenCounter, item: dict, sequence: Sequence[_Block], context: str, prompt: str,
                     ev_ids: list[str], last_alone: int, added_up: tuple[int, int, list[int]]) -> None:
    """Encode one instance the slow way and compare: a broken assumption is an error, never a wrong length."""
    ids = counter.encoding.encode_to_numpy(prompt, allowed_special=set(), disallowed_special=())
    exact = (len(ids), *_offsets_from_encoding(counter, item, sequence, context, prompt, ids, ev_ids, last_alone,
                                               vocabulary_table=False))
    if exact != added_up:
        raise RuntimeError(
            f"item {item['item_id']!r}: block counts add up to (prompt tokens, context tokens, evidence offsets) "
            f"{added_up} but {counter.name} encodes {exact}: its pre-tokenizer splits differently than "
            "_ADDITIVE_PATTERNS assume"
        )


def _fail(item: dict, target: int, why: str) -> ValueError:
    return ValueError(f"item {item['item_id']!r}, target {target} tokens: {why}")


def assemble_instance(
    item: dict,
    evidence_docs: Sequence[dict],
    hard_negatives: Sequence[dict],
    fillers: Sequence[dict],
    *,
    target_tokens: int,
    depth: float,
    seed: int,
    counter: TokenCounter,
    max_new_tokens: int,
    length_tolerance: float,
    variant: str = "plain",
    token_cache: dict[str, int] | None = None,
    normalized_cache: _PassageScreen | None = None,
    verify: bool = False,
) -> dict:
    """One INSTANCES row (without ``instance_id``) whose prompt is ``target_tokens`` long.

    ``evidence_docs`` / ``fillers``: document rows (doc_id, title, text); ``hard_negatives``:
    passage rows (passage_id, doc_id, title, text) in rank order. ``seed`` drives every
    random choice; the evidence position depends on ``depth`` alone, so instances that
    differ only in depth have the same distractors in the same order.
    ``token_cache`` (block id -> tokens) and ``normalized_cache`` (passages' screened and
    normalized text, for the answer check) let many instances share that work. Token counts are added up
    from the blocks' counts (exact for cl100k_base, see ``_pieces_add_up``); ``verify`` also
    encodes the whole prompt and raises if the two disagree.
    """
    target = int(target_tokens)
    answers = list(item["answers"])
    rng = random.Random(seed)
    costs = _Costs(counter, token_cache)
    placeholder = format_block(_ESTIMATE_INDEX, "x", "x.")
    # Prompt tokens outside the context: instruction + question (see _Costs for additivity).
    base = counter.count(build_prompt(placeholder, item["question"])) - costs.block("x", "x.")
    budget = target - base  # tokens available to the blocks
    aim_slack = max(1, min(int(target * AIM), AIM_MAX_TOKENS))
    n_blocks = 0

    def add_cost(cost: int) -> int:
        # Block numbers of 4+ digits cost extra tokens; numbering follows block count.
        nonlocal n_blocks
        n_blocks += 1
        return cost + _index_extra(counter, len(str(n_blocks)))

    evidence_ids = {d["doc_id"] for d in evidence_docs}
    if not evidence_docs:
        raise _fail(item, target, "no evidence documents")
    costs.ensure(evidence_docs, "doc_id")
    evidence = [_Block(d["doc_id"], "evidence", d["title"], d["text"], costs.get(d, "doc_id")) for d in evidence_docs]
    used = sum(add_cost(b.cost) for b in evidence)
    if used > budget:
        raise _fail(
            item, target, f"the evidence documents alone need about {used + base} prompt tokens; use a longer level"
        )

    # Hard negatives in rank order while they fit (the best distractors first).
    distractors: list[_Block] = []
    negatives, seen = [], set()
    screen = _PassageScreen() if normalized_cache is None else normalized_cache
    answer_words = _answer_words(answers)
    normalized_answers = [normalize_answer(a) for a in answers]
    for h in hard_negatives:  # re-checked here: a leaked answer would make the item trivial
        if h["passage_id"] in seen or h["doc_id"] in evidence_ids or screen.contains_answer(
            h["passage_id"], h["text"], answer_words, normalized_answers
        ):
            continue
        seen.add(h["passage_id"])
        negatives.append(h)
    costs.ensure(negatives, "passage_id")
    for h in negatives:
        c = costs.get(h, "passage_id")
        if used + c + _index_extra(counter, len(str(n_blocks + 1))) > budget:
            break
        distractors.append(_Block(h["passage_id"], "hard_negative", h["title"], h["text"], c))
        used += add_cost(c)

    # Filler documents in a seeded order while they fit. A document that lent a passage to
    # the hard negatives is left out so no text appears twice.
    left_out = evidence_ids | {h["doc_id"] for h in negatives[: len(distractors)]}
    tiers: dict[int, list[dict]] = defaultdict(list)
    for f in fillers:
        if f["doc_id"] not in left_out:
            tiers[f.get("tier", 0)].append(f)
    order = []
    for tier in sorted(tiers):  # same-domain first, then the fallback tier
        part = sorted(tiers[tier], key=_DOC_ID)  # the seeded shuffle must not depend on input order
        rng.shuffle(part)
        order += part
    n_taken = 0
    for start in range(0, len(order), 64):  # count lazily: a short level needs few fillers
        chunk = order[start : start + 64]
        costs.ensure(chunk, "doc_id")
        stop = False
        for f in chunk:
            c = costs.get(f, "doc_id")
            if used + c + _index_extra(counter, len(str(n_blocks + 1))) > budget:
                stop = True
                break
            distractors.append(_Block(f["doc_id"], "filler", f["title"], f["text"], c))
            used += add_cost(c)
            n_taken += 1
        if stop:
            break
    remaining = order[n_taken:]

    # Close the gap with one filler cut to size. When the gap is too small for a real cut,
    # give back the last block or two and cut a longer document instead.
    def plan_cut(gap: int) -> tuple[dict, int] | None:
        gap -= _index_extra(counter, len(str(n_blocks + 1)))
        for f in remaining:
            body = gap - costs.block(f["title"], "")
            if body >= MIN_CUT_TOKENS and costs.get(f, "doc_id") > gap:
                return f, body
        return None

    cut_plan = None
    if budget - used > aim_slack and remaining:
        cut_plan = plan_cut(budget - used)
        kept = (list(distractors), used, list(remaining), n_blocks)
        for _ in range(3):
            if cut_plan is not None or not distractors:
                break
            give_back = distractors.pop()
            n_blocks -= 1
            used -= give_back.cost + _index_extra(counter, len(str(n_blocks + 1)))
            if give_back.kind == "filler":
                remaining.insert(0, next(f for f in order if f["doc_id"] == give_back.block_id))
            cut_plan = plan_cut(budget - used)
        if cut_plan is None:  # giving back did not help: keep the fuller context
            distractors[:], used, remaining[:], n_blocks = kept[0], kept[1], kept[2], kept[3]

    cutter = None
    cut_block = None
    if cut_plan is not None:
        row, body = cut_plan
        remaining.remove(row)
        cutter = _Cutter(row, counter)
        text = cutter.cut(body, aim_slack)
        cut_block = _Block(f"{row['doc_id']}:cut", "cut", row["title"], text, costs.block(row["title"], text))
        distractors.append(cut_block)

    # Order: distractors shuffled, other evidence at random places, then the first evidence
    # document where its start offset / context tokens is closest to depth (0 = first
    # block, 1 = last block).
    rng.shuffle(distractors)
    sequence = list(distractors)
    for b in evidence[1:]:
        sequence.insert(rng.randint(0, len(sequence)), b)
    first = evidence[0]
    offsets = [0]
    for b in sequence:
        offsets.append(offsets[-1] + b.cost)
    desired = depth * offsets[-1]  # offsets[-1] = start of a last block
    k = min(range(len(offsets)), key=lambda i: (abs(offsets[i] - desired), i))
    sequence.insert(k, first)

    def render() -> tuple[str, str]:
        context = join_blocks(format_block(i, b.title, b.text) for i, b in enumerate(sequence, start=1))
        return context, build_prompt(context, item["question"])

    # Block i's tokens in the prompt: its count with index 1 and the separator, plus what a longer
    # number adds. With an encoding whose pieces add up (see _pieces_add_up) these sum to the exact
    # prompt, so only the cut filler is re-counted as it is resized, and no prompt is encoded.
    additive = _pieces_add_up(counter.encoding)
    block_tokens = [b.cost + _index_extra(counter, len(str(i))) for i, b in enumerate(sequence, start=1)]
    cut_at = next((i for i, b in enumerate(sequence) if b is cut_block), None)

    def cut_tokens() -> int:
        return costs.block(cut_block.title, cut_block.text) + _index_extra(counter, len(str(cut_at + 1)))

    if cut_block is not None:
        block_tokens[cut_at] = 0  # counted by cut_tokens() for the current cut
    fixed_tokens = base + sum(block_tokens)

    # Exact count, then resize the cut filler; keep the best attempt (at or just below the
    # target if possible, else the closest).
    def score(n: int) -> tuple[int, int]:
        return (0, target - n) if n <= target else (1, n - target)

    best: tuple[tuple[int, int], int, str, np.ndarray | None] | None = None
    tried: set[str] = set()

    def measure() -> int:
        nonlocal best
        ids = None
        if additive:
            n = fixed_tokens + (cut_tokens() if cut_block is not None else 0)
        else:
            # = encode_ordinary (no special token allowed, none refused), as a numpy array: kept,
            # the block offsets below come from the same encoding.
            ids = counter.encoding.encode_to_numpy(render()[1], allowed_special=set(), disallowed_special=())
            n = len(ids)
        if best is None or score(n) < best[0]:
            best = (score(n), n, cut_block.text if cut_block else "", ids)
        if cut_block is not None:
            tried.add(cut_block.text)
        return n

    n = measure()
    for _ in range(CORRECTION_ROUNDS):
        delta = target - n
        if 0 <= delta <= aim_slack or cut_block is None:
            break
        body = counter.count(cut_block.text) + delta
        if body < MIN_CUT_TOKENS:
            break
        new_text = cutter.cut(body, aim_slack)
        if new_text in tried:  # a sentence end keeps us short: take a word end
            new_text = cutter.cut(body, 0)
        if new_text in tried:
            break
        cut_block.text = new_text
        n = measure()
    assert best is not None
    if cut_block is not None and best[0][0] == 0 and best[0][1] > aim_slack:
        # Still short (token/word granularity made the resizing oscillate): walk word by
        # word from the best cut while the prompt stays within the target.
        cut_block.text = best[2]
        i = bisect.bisect_right(cutter.word_ends, len(cut_block.text))
        for end in cutter.word_ends[i : i + 8]:
            cut_block.text = cutter.row["text"][:end]
            if measure() > target:
                break
    _, input_tokens, best_cut_text, prompt_ids = best
    if cut_block is not None:  # the resizing may have stopped on another attempt than the best
        cut_block.text = best_cut_text
        block_tokens[cut_at] = cut_tokens()

    error = abs(input_tokens - target) / target
    if error > length_tolerance:
        if input_tokens < target and not remaining:
            why = "the distractor pool is exhausted (not enough hard negatives and same-domain fillers)"
        elif input_tokens > target:
            why = "the prompt cannot be shortened to the target"
        else:
            why = "no filler document could close the gap"
        raise _fail(
            item, target,
            f"{why}: got {input_tokens} prompt tokens, {error:.1%} off, beyond length_tolerance {length_tolerance:.1%}",
        )
    context, prompt = render()

    # Measured depths: exact token offset of each evidence block's start / context tokens. A block
    # starts a new pre-token (it follows "\n\n"), so the prompt's tokens from the context start to a
    # block start are the tokens of that context prefix alone. The context alone differs only in
    # its last block, whose end merges with the "\n\n" after it in the prompt: that block is
    # encoded alone.
    ev_ids = [d["doc_id"] for d in evidence_docs]
    last_block = len(sequence) - 1
    last_alone = counter.count(format_block(last_block + 1, sequence[-1].title, sequence[-1].text))
    if additive:
        before = list(itertools.accumulate(block_tokens, initial=0))  # context tokens before each block
        starts = {b.block_id: before[i] for i, b in enumerate(sequence) if b.kind == "evidence"}
        context_tokens = before[last_block] + last_alone
        evidence_offsets = [starts[d] for d in ev_ids]
        if verify:
            _verify_additive(counter, item, sequence, context, prompt, ev_ids, last_alone,
                             (input_tokens, context_tokens, evidence_offsets))
    else:
        context_tokens, evidence_offsets = _offsets_from_encoding(
            counter, item, sequence, context, prompt, prompt_ids, ev_ids, last_alone)

    return {
        "item_id": item["item_id"],
        "source": item["source"],
        "suite": SUITE,
        "task": item["task"],
        "category": item["category"],
        "language": item["language"],
        "variant": variant,
        "depth": float(depth),
        "evidence_depths": [c / context_tokens for c in evidence_offsets],
        "question": item["question"],
        "answers": answers,
        "answer_keywords": list(item["answer_keywords"] or []),
        "evidence_doc_ids": ev_ids,
        "context_doc_ids": [b.block_id for b in sequence],
        "n_hard_negatives": sum(b.kind == "hard_negative" for b in sequence),
        "n_filler_documents": sum(b.kind in ("filler", "cut") for b in sequence),
        "context": context,
        "prompt": prompt,
        "tokenizer": counter.name,
        "target_tokens": target,
        "input_tokens": input_tokens,
        "context_tokens": context_tokens,
        "max_new_tokens": int(max_new_tokens),
    }


# --------------------------------------------------------------------------- level


def _hard_negative_rows(hard_negatives: pl.DataFrame, passages: pl.DataFrame, item_ids: list[str]) -> dict[str, list[dict]]:
    hn = (
        hard_negatives.filter(pl.col("item_id").is_in(item_ids))
        .select("item_id", "rank", "passage_id", "doc_id")
        .join(passages.select("passage_id", "title", "text"), on="passage_id", how="left")
        .sort("item_id", "rank")
    )
    missing = hn.filter(pl.col("text").is_null())
    if missing.height:
        r = missing.row(0, named=True)
        raise ValueError(
            f"item {r['item_id']!r}: hard negative passage_id {r['passage_id']!r} is not in the passages table "
            f"({missing.height} missing in all)"
        )
    out: dict[str, list[dict]] = defaultdict(list)
    for r in hn.iter_rows(named=True):
        out[r["item_id"]].append(r)
    return out


def fitting_items(
    items: pl.DataFrame, documents: pl.DataFrame, counter: TokenCounter, target_tokens: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split items into those whose prompt with only their evidence fits ``target_tokens``, and the rest.

    Real corpora have long evidence (a LongBench hotpotqa record's passages are ~10k tokens):
    such an item cannot be an instance at a short level. Callers choose items that fit the
    SMALLEST level so every level shares them, and report the rest (``item_id``,
    ``evidence_tokens``) instead of dropping them silently.
    """
    docs = DocumentIndex(documents)
    rows = list(items.iter_rows(named=True))
    prompts = [
        build_prompt(format_context((d["title"], d["text"]) for d in docs.evidence(item)), item["question"])
        for item in rows
    ]
    tokens = [counter.count(p) for p in prompts]  # short prompts: a thread pool (count_many) costs more CPU
    fits = [t <= target_tokens for t in tokens]
    too_long = pl.DataFrame(
        {"item_id": [r["item_id"] for r, f in zip(rows, fits) if not f],
         "evidence_tokens": [t for t, f in zip(tokens, fits) if not f]},
        schema={"item_id": pl.String, "evidence_tokens": pl.Int64},
    )
    return items.filter(pl.Series(fits, dtype=pl.Boolean)), too_long


# A batch is one Parquet row group when written. Up to 50 items a group keeps zstd's sharing of
# the filler documents rows have in common (64k: 3.6 MB a level vs 4.2 MB in groups of 16). A
# process building and writing a batch peaks at ~7x the batch's strings (Python rows, the
# frame, its Arrow copy, the writer's pages), so batches also stop at ~4M prompt tokens
# (~35 MB of context + prompt text, ~300 MB of peak memory); 256k levels lose 5 % of file size.
ITEMS_PER_BATCH = 50
BATCH_TOKENS = 2**22


def items_per_batch_at(target_tokens: int, rows_per_item: int, cap: int = ITEMS_PER_BATCH) -> int:
    """Items per batch so that a batch of ``rows_per_item`` rows per item (depths x variants) holds
    at most about BATCH_TOKENS prompt tokens: 50 items at 64k x 1 depth, 16 at 256k x 1 depth."""
    return max(1, min(cap, BATCH_TOKENS // max(1, target_tokens * rows_per_item)))


def iter_instance_batches(
    items: pl.DataFrame,
    documents: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: BenchmarkConfig,
    counter: TokenCounter,
    items_per_batch: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The instances of one length level (the selected items x the configured depths), as
    INSTANCES frames of ``items_per_batch`` items each (default: :func:`items_per_batch_at`), in item order.

    A level at 256k tokens x 100 items x 1 depth is ~230 MB of strings (a peak of ~1.9 GB when
    built as one frame and written); a caller that writes each batch before asking for the next
    holds one batch at a time. The rows do not depend on the batch size: items are selected
    once, and each instance depends only on its item and the level.
    """
    if counter.name != config.tokenizer:
        raise ValueError(f"config tokenizer {config.tokenizer!r} but the counter is {counter.name!r}")
    target = level_tokens(level)
    if items_per_batch is None:
        items_per_batch = items_per_batch_at(target, len(config.depths))
    if items_per_batch < 1:
        raise ValueError(f"items_per_batch must be >= 1, got {items_per_batch}")
    selected = select_items(items, config.items_per_length, config.seed)
    docs = DocumentIndex(documents)
    docs.screen_answers(selected["answers"].to_list())
    negatives = _hard_negative_rows(hard_negatives, passages, selected["item_id"].to_list())
    fingerprint = config.fingerprint(*INSTANCE_CONTENT_FIELDS)
    token_cache: dict[str, int] = {}  # block counts, shared by every batch of the level
    normalized_cache = _PassageScreen()  # hard negatives' screened / normalized text, likewise
    verify = True  # the level's first instance is also encoded whole: added-up counts are checked once per level
    for batch in selected.iter_slices(items_per_batch):
        rows = []
        for item in batch.iter_rows(named=True):
            evidence = docs.evidence(item)
            evidence_ids = {d["doc_id"] for d in evidence}
            item_negatives = [h for h in negatives.get(item["item_id"], []) if h["doc_id"] not in evidence_ids]
            pool = docs.filler_pool(item, config.cross_domain_fill)
            # Shared by all depths of (item, level): depth is then the only thing that differs.
            seed = derive_seed(config.seed, item["item_id"], level, target)
            for depth in config.depths:
                row = assemble_instance(
                    item,
                    evidence,
                    item_negatives,
                    pool,
                    target_tokens=target,
                    depth=depth,
                    seed=seed,
                    counter=counter,
                    max_new_tokens=config.max_new_tokens,
                    length_tolerance=config.length_tolerance,
                    token_cache=token_cache,
                    normalized_cache=normalized_cache,
                    verify=verify,
                )
                verify = False
                row["instance_id"] = instance_id(item["item_id"], level, target, float(depth), row["variant"],
                                                 fingerprint)
                rows.append(row)
        frame = conform(pl.DataFrame(rows, schema=INSTANCES), "instances")
        del rows  # the frame holds its own copy of the strings: do not keep both while the caller writes
        yield frame
        del frame


def build_instances(
    items: pl.DataFrame,
    documents: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: BenchmarkConfig,
    counter: TokenCounter,
) -> pl.DataFrame:
    """All instances of one length level as one frame (see :func:`iter_instance_batches`)."""
    batches = list(iter_instance_batches(items, documents, passages, hard_negatives, level=level, config=config,
                                         counter=counter))
    return pl.concat(batches) if batches else conform(pl.DataFrame([], schema=INSTANCES), "instances")
