"""Text helpers shared by construction and scoring: answer normalization, the Chinese tokenizer.

Answer normalization (does a passage contain the answer? does a prediction match it?) is
the SQuAD / LongBench English normalization: lower-case, drop ASCII punctuation
(``string.punctuation``), drop the whole words a/an/the, collapse whitespace. Construction
and scoring use the same function so that "contains no gold answer" (hard negatives,
fillers) means exactly what SubEM would count as a hit.
"""

from __future__ import annotations

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
