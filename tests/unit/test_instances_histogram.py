"""The instances asset's token-length histogram: a markdown table the Dagster UI renders (no figure)."""

from __future__ import annotations

import re

import polars as pl

from lc_pipeline.construct.instance_metadata import length_histogram_markdown


def table_rows(markdown: str) -> list[tuple[str, int]]:
    """(prompt-token range, instances) of each bin row."""
    return [(m[1], int(m[2])) for m in re.finditer(r"^\| ([^|]+) \| (\d+) \| [█]* \|$", markdown, re.M)]


def test_bins_count_every_instance_and_mark_the_target():
    tokens = [32600, 32650, 32700, 32712, 32750, 32766, 32768, 32768]
    md = length_histogram_markdown(pl.DataFrame({"input_tokens": tokens, "target_tokens": [32768] * len(tokens)}))
    rows = table_rows(md)
    assert md.startswith("prompt tokens per instance (8 instances; target 32,768)")
    assert len(rows) == 10 and sum(n for _, n in rows) == len(tokens)
    assert rows[0] == ("32,600 – 32,616", 1)
    assert rows[-1] == ("32,753 – 32,768 ◀ target", 3)  # 32766, 32768, 32768
    assert sum("◀ target" in span for span, _ in rows) == 1


def test_one_length_is_one_bin_and_word_levels_have_no_token_target():
    same = length_histogram_markdown(pl.DataFrame({"input_tokens": [1000, 1000], "target_tokens": [1024, 1024]}))
    assert table_rows(same) == [("1,000", 2)]
    words = length_histogram_markdown(pl.DataFrame({"input_tokens": [900, 1100], "target_tokens": [None, None]},
                                                   schema={"input_tokens": pl.Int64, "target_tokens": pl.Int64}))
    assert "target in words" in words and sum(n for _, n in table_rows(words)) == 2
    assert length_histogram_markdown(pl.DataFrame(schema={"input_tokens": pl.Int64, "target_tokens": pl.Int64})) \
        == "no instances"
