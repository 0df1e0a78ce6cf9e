"""A context made of numbered blocks (``Passage 1:``, ``Paragraph 2:``, ``文章3``...) split back into its blocks.

Several released benchmarks join the documents of one record into a single context, each document after a
numbered header at the start of a line; an adapter splits it with :func:`split_numbered` and its own header pattern.
"""

from __future__ import annotations

import re

__all__ = ["split_numbered"]


def split_numbered(context: str, header: re.Pattern[str]) -> list[tuple[int, str]] | None:
    """(number, body) per header found in sequence; None when there is no header 1.

    ``header`` matches one header and captures its number as group ``n``. Headers are only taken in sequence
    (1, 2, 3, ...), so a block that quotes a later header mid-text is not cut in two."""
    starts: list[re.Match[str]] = []
    for m in header.finditer(context):
        if int(m.group("n")) == len(starts) + 1:
            starts.append(m)
    if not starts:
        return None
    blocks = []
    preamble = context[: starts[0].start()].strip()
    if preamble:  # text before header 1: kept (as block 0) rather than dropped
        blocks.append((0, preamble))
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(context)
        blocks.append((i + 1, context[m.end() : end].strip()))
    return blocks
