"""Split documents into ~100-word passages (the KILT / HELMET retrieval unit)."""

from __future__ import annotations

import re

import polars as pl

from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.schemas import conform

_WORD = re.compile(r"\S+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character (start, end) of every whitespace-delimited word."""
    return [m.span() for m in _WORD.finditer(text)]


def passage_bounds(n_words: int, passage_words: int) -> list[tuple[int, int]]:
    """Word index ranges [start, end) of consecutive passages of ``passage_words`` words.

    A tail shorter than half a passage is merged into the previous passage, so no passage is
    a near-empty scrap that would be a useless retrieval unit.
    """
    bounds = [(s, min(s + passage_words, n_words)) for s in range(0, n_words, passage_words)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < passage_words / 2:
        tail = bounds.pop()
        bounds[-1] = (bounds[-1][0], tail[1])
    return bounds


def chunk_documents(documents: pl.DataFrame, passage_words: int, counter: TokenCounter) -> pl.DataFrame:
    """One PASSAGES row per passage; each passage's text is an exact substring of its document."""
    if passage_words < 1:
        raise ValueError(f"passage_words must be >= 1, got {passage_words}")
    cols: dict[str, list] = {k: [] for k in ("passage_id", "doc_id", "source", "title", "text", "position", "n_words")}
    for doc in documents.select("doc_id", "source", "title", "text").iter_rows(named=True):
        text = doc["text"]
        spans = word_spans(text) if text else []
        if not spans:
            raise ValueError(f"document {doc['doc_id']!r}: field 'text' is empty; cannot split it into passages")
        for position, (w0, w1) in enumerate(passage_bounds(len(spans), passage_words)):
            # Slice the original text by character offsets (not " ".join(words)) so the
            # passage keeps its exact whitespace and can be found verbatim in the document.
            cols["passage_id"].append(f"{doc['doc_id']}#{position}")
            cols["doc_id"].append(doc["doc_id"])
            cols["source"].append(doc["source"])
            cols["title"].append(doc["title"])
            cols["text"].append(text[spans[w0][0] : spans[w1 - 1][1]])
            cols["position"].append(position)
            cols["n_words"].append(w1 - w0)
    # One batched (multi-threaded) tokenizer call for the whole corpus.
    cols["n_tokens"] = counter.count_many(cols["text"])
    return conform(pl.DataFrame(cols, schema_overrides={"position": pl.Int32, "n_words": pl.Int32}), "passages")
