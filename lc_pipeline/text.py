"""Text helpers shared by construction and scoring: answer normalization, the Chinese tokenizer; what the
readers of user files (configs, source records, predictions) tell from bytes that are not UTF-8; and the one way
a task's prompt template is filled (:func:`fill_template`).

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
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

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


# ------------------------------------------------------------------------------------------ prompt templates
# A task's prompt template (and an authors' template read from their files) names its fields as ``str.format``
# does, ``{context}``, with ``{{`` and ``}}`` for literal braces. Only a plain name is a field: attribute access
# (``{context.__class__}``), indexing (``{context[0]}``), a positional field (``{}``, ``{0}``), a conversion
# (``{context!r}``) or a format spec (``{question:>1500000000}``) is refused (issue 31 D13: str.format ran them,
# reaching the values' attributes, or built a 1.5 GB string). Filled literally, each field by its value's text, so a
# template that was never checked still cannot reach anything but the values given.


class TemplateError(ValueError):
    """A template with a field that is not a plain name, or a lone brace; the message names the field."""


@functools.lru_cache(maxsize=512)
def template_parts(template: str) -> tuple[tuple[str, str | None], ...]:
    """``(literal text, field name or None)`` pairs of a named-field template, in order (``{{`` read as ``{``).

    A lone brace, or a field that is not a plain identifier with neither conversion nor format spec, is a
    :class:`TemplateError` naming it as written."""
    parts: list[tuple[str, str | None]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # "Single '}' encountered in format string", "expected '}' before end of string"
        raise TemplateError(f"not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
    for literal, name, spec, conversion in parsed:
        if name is None:
            parts.append((literal, None))
            continue
        if not name.isidentifier() or conversion is not None or spec:
            written = "{" + name + (f"!{conversion}" if conversion is not None else "") \
                + (f":{spec}" if spec else "") + "}"
            raise TemplateError(f"field {written} {_not_plain(name, conversion, spec)}: a field is a plain name such "
                                "as {context}, filled with its text as it is; write literal braces as {{ and }}")
        parts.append((literal, name))
    return tuple(parts)


def _not_plain(name: str, conversion: str | None, spec: str) -> str:
    if not name or name.isdigit():
        return "is positional (a field is named)"
    if "." in name or "[" in name:
        return "reaches into its value (attribute access or indexing)"
    if conversion is not None:
        return f"has a conversion (!{conversion})"
    if spec:
        return f"has a format spec (:{spec})"
    return "is not a plain name"


def template_fields(template: str) -> set[str]:
    """The field names of a named-field template (checked as :func:`template_parts` checks it)."""
    return {name for _, name in template_parts(template) if name is not None}


def fill_template(template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with each ``{name}`` replaced by ``fields[name]``'s text (a str as it is, else ``format(v, "")``,
    what ``str.format`` gives a plain field), ``{{``/``}}`` as single braces: ``template.format(**fields)`` for
    every template whose fields are plain names, and nothing else. A field not in ``fields`` is a ``KeyError``
    (as ``str.format`` raises); a field that is not a plain name a :class:`TemplateError`."""
    out: list[str] = []
    for literal, name in template_parts(template):
        out.append(literal)
        if name is not None:
            value = fields[name]
            out.append(value if isinstance(value, str) else format(value, ""))
    return "".join(out)
