"""Passages: ~100-word, exact substrings of their document, short tails merged."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline.construct.chunking import chunk_documents, passage_bounds
from lc_pipeline.construct.tokens import TokenCounter, TokenizerUnavailable
from lc_pipeline.schemas import PASSAGES


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.load()


def docs(*texts: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "doc_id": [f"doc-{i:04d}" for i in range(len(texts))],
            "source": ["handmade"] * len(texts),
            "title": [f"Title {i}" for i in range(len(texts))],
            "text": list(texts),
            "language": ["en"] * len(texts),
            "domain": ["places"] * len(texts),
            "entity_type": ["place"] * len(texts),
        }
    )


def words(n: int, start: int = 0) -> str:
    # Irregular whitespace on purpose: passages must keep it (slice, never re-join).
    return "".join(f"w{i}" + ("\n" if i % 17 == 16 else "  " if i % 5 == 4 else " ") for i in range(start, start + n)).strip()


def test_token_counter_basics(counter):
    assert counter.name == "cl100k_base"
    assert counter.count("hello world") == 2
    assert counter.count_many(["hello world", "", "a b c"]) == [2, 0, 3]
    assert counter.decode(counter.encode("Velmora is a town.")) == "Velmora is a town."
    # Special-token text in a document counts as ordinary text and never raises.
    assert counter.count("end <|endoftext|> here") > 3


def test_token_counter_unknown_encoding_is_a_clear_error():
    with pytest.raises(TokenizerUnavailable, match="offline"):
        TokenCounter.load("no_such_encoding")


def test_passage_bounds_merge_short_tail():
    assert passage_bounds(250, 100) == [(0, 100), (100, 200), (200, 250)]  # a 50-word tail is kept
    assert passage_bounds(249, 100) == [(0, 100), (100, 249)]  # 49-word tail merged
    assert passage_bounds(260, 100) == [(0, 100), (100, 200), (200, 260)]
    assert passage_bounds(30, 100) == [(0, 30)]  # a short document is one passage


def test_chunk_documents_passages(counter):
    text = words(349)
    out = chunk_documents(docs(text, "Short document only."), 100, counter)
    assert out.schema == PASSAGES
    first = out.filter(pl.col("doc_id") == "doc-0000")
    assert first["passage_id"].to_list() == ["doc-0000#0", "doc-0000#1", "doc-0000#2"]
    assert first["n_words"].to_list() == [100, 100, 149]  # 49-word tail merged into the last passage
    for row in out.iter_rows(named=True):
        source = text if row["doc_id"] == "doc-0000" else "Short document only."
        assert row["text"] in source  # exact substring
        assert row["n_words"] == len(row["text"].split())
        assert row["n_tokens"] == counter.count(row["text"])
        assert row["title"] == ("Title 0" if row["doc_id"] == "doc-0000" else "Title 1")
    # Consecutive passages cover every word once, in order.
    assert " ".join(" ".join(first["text"].to_list()).split()) == " ".join(text.split())
    assert out.filter(pl.col("doc_id") == "doc-0001")["n_words"].to_list() == [3]


def test_empty_document_names_doc_and_field(counter):
    with pytest.raises(ValueError, match=r"doc-0001.*'text'"):
        chunk_documents(docs("fine text", "   \n "), 100, counter)
