"""Text helpers shared by construction and scoring: answer normalization, the Chinese tokenizer; and
what the readers of user files (configs, source records, predictions) tell from bytes that are not UTF-8.

Answer normalization (does a passage contain the answer? does a prediction match it?) is
the SQuAD / LongBench English normalization: lower-case, drop ASCII punctuation
(``string.punctuation``), drop the whole words a/an/the, collapse whitespace. Construction
and scoring use the same function so that "contains no gold answer" (hard negatives,
fillers) means exactly what SubEM would count as a hit.
"""

from __future__ import annotations

import codecs
import functools
import logging
import re
import string
from collections.abc import Iterable
from types import ModuleType

_PUNCT_DELETE = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    s = s.lower().translate(_PUNCT_DELETE)  # one C pass (a per-character Python loop took twice as long)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def contains_answer(text: str, answers: Iterable[str]) -> bool:
    """True when any non-empty normalized answer is a substring of the normalized text.

    Plain substring, like SubEM: anything SubEM would credit counts as containing the answer.
    """
    norm = normalize_answer(text)
    return any(na and na in norm for na in map(normalize_answer, answers))


@functools.cache
def jieba_tokenizer() -> ModuleType:
    """The ``jieba`` module, imported on first use with its logger quieted (its dictionary-loading
    chatter would go to our stderr). LongBench and LV-Eval cut Chinese with ``jieba.cut(text, cut_all=False)``;
    construct/replacement.py tags entities with ``jieba.posseg``."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


# Byte-order marks of the Unicode encodings that are not UTF-8, longest first (UTF-32-LE starts with UTF-16-LE's):
# (mark, encoding, byte order). Every reader of a user's file names these the same way.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32", "little-endian"),
    (codecs.BOM_UTF32_BE, "UTF-32", "big-endian"),
    (codecs.BOM_UTF16_LE, "UTF-16", "little-endian"),
    (codecs.BOM_UTF16_BE, "UTF-16", "big-endian"),
)

# Half of a UTF-16 surrogate pair: JSON may escape one alone ("\ud800") and Python's json decodes it to a str
# that is not valid Unicode and that no UTF-8 output (Parquet, a log, stdout) can carry.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def byte_order_mark(data: bytes) -> tuple[bytes, str, str] | None:
    """(mark, encoding, byte order) of the UTF-16 / UTF-32 byte-order mark ``data`` starts with, or None."""
    return next((found for found in BYTE_ORDER_MARKS if data.startswith(found[0])), None)
