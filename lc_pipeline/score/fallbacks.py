"""Silent zeros: records a metric scores 0 for a reason other than the answer (issue 22, defect 6).

The official numbers are kept (LongBench's ``metrics.py`` turns any ROUGE exception into 0, spec
longbench_metrics.md "Details that change numbers"); these records are *counted*, so a 0 that says
"the scorer failed" or "the texts differ only in Unicode normalization" is not read as a wrong answer.

Two reasons, each found where the zero comes from:

* ``rouge_recursion`` / ``rouge_error``: the ``rouge`` package (1.0.1, LongBench's and LV-Eval's ROUGE-L,
  100-LongBench's too) raised and the official code scored 0 (``score/token_scores.py`` ``rouge_l`` notes it
  here). Its LCS is reconstructed recursively, one call per word, so a sentence (text between two ASCII
  ``.``) of about 990 words or more raises RecursionError: a gold answer with no ``.`` followed by 600 words
  is one. An empty or dot-only *prediction* also raises; that 0 is the answer's own (nothing to score),
  not counted.
* ``unicode_normalization``: the record scores 0 and the same texts NFC-normalized score more (a prediction
  in NFD, ``e`` + U+0301, against a gold in NFC, ``é``: no metric of the official code normalizes, so every
  accented word is a different token).

The surface: :func:`note` (a scorer that falls back calls it), :func:`score_noted` (score one record and
say why its 0 is a fallback) and :class:`FallbackZeros` (the counts and a few record ids, for an asset's
metadata or ``lcp score``'s stderr). Pure, no Dagster.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = [
    "REASONS",
    "ROUGE_ERROR",
    "ROUGE_RECURSION",
    "TEXT_FIELDS",
    "UNICODE_NORMALIZATION",
    "FallbackZeros",
    "note",
    "noting",
    "score_noted",
]

ROUGE_RECURSION = "rouge_recursion"
ROUGE_ERROR = "rouge_error"
UNICODE_NORMALIZATION = "unicode_normalization"
REASONS: dict[str, str] = {
    ROUGE_RECURSION: "the official ROUGE failed on them (RecursionError: the rouge package's recursive LCS "
                     "fails on a sentence, text between two '.', of about 990 words or more) and the official "
                     "code scores 0",
    ROUGE_ERROR: "the official ROUGE raised an error on them (e.g. a gold answer with no text between '.') "
                 "and the official code scores 0",
    UNICODE_NORMALIZATION: "their text differs from the gold only in Unicode normalization (e.g. NFD against "
                           "NFC): NFC-normalized they score more",
}
# The record fields a metric compares with the output (besides it): NFC-normalized for the second scoring.
TEXT_FIELDS = ("answers", "all_classes", "answer_keywords")

_notes: ContextVar[list[str] | None] = ContextVar("lc_pipeline_fallback_notes", default=None)


def note(reason: str) -> None:
    """Called by a scorer where it returns a fallback 0 (one of :data:`REASONS`); a no-op outside :func:`noting`."""
    notes = _notes.get()
    if notes is not None:
        notes.append(reason)


@contextmanager
def noting() -> Iterator[list[str]]:
    """The reasons :func:`note` receives inside the block (this thread or task only), in order."""
    notes: list[str] = []
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, (list, tuple)):
        return [_nfc(v) for v in value]
    return value


def _is_nfc(value: Any) -> bool:
    if isinstance(value, str):
        return unicodedata.is_normalized("NFC", value)
    if isinstance(value, (list, tuple)):
        return all(_is_nfc(v) for v in value)
    return True


def score_noted(score: Callable[[str, Mapping[str, Any]], float], output: str,
                record: Mapping[str, Any]) -> tuple[float, str | None]:
    """``score(output, record)`` unchanged, and why it is a fallback 0 (a :data:`REASONS` key) or None.

    A 0 is a fallback when the scorer noted one (ROUGE raised), else when ``output`` or a
    :data:`TEXT_FIELDS` field of ``record`` is not NFC and the NFC-normalized texts score more than 0
    (scored a second time only then: zeros with non-NFC text are rare).
    """
    with noting() as notes:
        value = score(output, record)
    if value != 0.0:
        return value, None
    if notes:
        return value, notes[0]
    fields = {f: record[f] for f in TEXT_FIELDS if record.get(f) is not None}
    if _is_nfc(output) and all(_is_nfc(v) for v in fields.values()):
        return value, None
    with noting():  # a ROUGE failure on the normalized texts is not this record's note
        again = score(_nfc(output), {**record, **{f: _nfc(v) for f, v in fields.items()}})
    return value, (UNICODE_NORMALIZATION if again > 0 else None)


class FallbackZeros:
    """Fallback zeros per (metric, reason): how many and the first ``keep`` record ids of each."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self._counts: Counter[tuple[str, str]] = Counter()
        self._ids: dict[tuple[str, str], list[Any]] = {}

    def add(self, metric: str, reason: str, record_id: Any) -> None:
        key = (metric, reason)
        self._counts[key] += 1
        ids = self._ids.setdefault(key, [])
        if len(ids) < self.keep:
            ids.append(record_id)

    def __len__(self) -> int:
        return sum(self._counts.values())

    def counts(self) -> dict[str, int]:
        """{metric: fallback zeros}, metrics sorted (``metric_scores`` metadata ``fallback_zeros``)."""
        out: Counter[str] = Counter()
        for (metric, _), n in self._counts.items():
            out[metric] += n
        return dict(sorted(out.items()))

    def examples(self) -> dict[str, list[Any]]:
        """{"metric: reason": the first record ids} (``metric_scores`` metadata ``fallback_examples``)."""
        return {f"{m}: {r}": list(self._ids[(m, r)]) for m, r in sorted(self._counts)}

    def metadata(self) -> dict[str, Any]:
        """``metric_scores`` metadata: rows scored 0 by the official fallback, kept as the official number but
        counted (``fallback_zeros``: {metric: rows}; ``fallback_examples``: {"metric: reason": first ids})."""
        return {"fallback_zeros": self.counts(), "fallback_examples": self.examples()}

    def lines(self, id_label: str = "ids") -> list[str]:
        """One sentence per (metric, reason): ``longbench:qmsum: 2 records scored 0 because ...: ids 'a', 'b'``."""
        out = []
        for metric, reason in sorted(self._counts):
            n = self._counts[(metric, reason)]
            ids = ", ".join(repr(i) for i in self._ids[(metric, reason)])
            more = f" (first {len(self._ids[(metric, reason)])})" if n > len(self._ids[(metric, reason)]) else ""
            out.append(f"{metric}: {n} record{'s' if n != 1 else ''} scored 0 because {REASONS[reason]}: "
                       f"{id_label}{more} {ids}")
        return out
