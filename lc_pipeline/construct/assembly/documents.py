"""Documents by id and domain, and the answer screens: which documents and passages may fill an
item's context (HELMET §2.2: no distractor may contain a gold answer; 100-LongBench's same-domain fill).

The screens decide exactly as ``lc_pipeline.text.contains_answer`` (SubEM's normalization), and
cheaply: a level asks the same documents about many items.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import string
from collections import defaultdict
from collections.abc import Iterable, Sequence

import polars as pl

from lc_pipeline.text import normalize_answer

_PUNCT_DELETE = str.maketrans("", "", string.punctuation)


def answer_words(answers: Iterable[str]) -> list[list[str]]:
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


class PassageScreen:
    """``contains_answer`` for passages met again and again (a level's hard negatives), exact and cheap:
    a passage is lower-cased and stripped of ASCII punctuation once, and normalized only when it
    holds every word of an answer (see :func:`answer_words`)."""

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
        words = sorted({max(w, key=len) for answers in answer_lists for w in answer_words(answers)}
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
        """Indices of the documents with every word of at least one answer (see :func:`answer_words`)."""
        found: set[int] = set()
        for words in answer_words(answers):  # the longest word is the rarest, usually
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
