"""The cut filler: prefixes of one document at word (preferably sentence) boundaries, sized in tokens.

One filler document is cut to close the gap between the whole blocks and the target length
(100-LongBench's greedy fill ends with a partial document); a cut ends at a word, and at a
sentence end when that costs at most a little.
"""

from __future__ import annotations

import bisect

from lc_pipeline.construct.chunking import word_spans
from lc_pipeline.construct.tokens import TokenCounter

_SENTENCE_END = frozenset(".!?")
_CLOSERS = frozenset("\"')]\u201d\u2019")


class Cutter:
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
