"""Token bookkeeping of an instance: what each block costs, and the proof that the costs add up.

Each block is encoded once per level (with index 1 and the separator after it); a prompt's count
(and each evidence block's token offset) is the sum of its pieces' counts when the encoding's
pre-tokenizer cannot merge across the cuts between them (:func:`pieces_add_up`) and the prompt's
template cuts cleanly around the context (:func:`additive_layout`). Otherwise the prompt is encoded
whole and the block offsets are read off that one encoding (:func:`offsets_from_encoding`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tiktoken

from lc_pipeline.construct.prompts import BLOCK_SEPARATOR, format_block
from lc_pipeline.construct.tokens import TokenCounter

ESTIMATE_INDEX = 1  # block costs are estimated with this index; the exact count fixes the rest


@dataclass
class Block:
    block_id: str  # doc id, passage id, or "<doc id>:cut"
    kind: str  # evidence | hard_negative | filler | cut
    title: str
    text: str
    cost: int  # estimated tokens of the formatted block


class Costs:
    """Tokens a block adds to the prompt, counted once per block id (batched, cached).

    A block is counted together with the separator after it: cl100k merges a final "."
    with the following "\\n\\n", and "Document"/"Question" always start a new pre-token, so
    these per-block counts (plus :func:`index_extra` for numbers of 4+ digits) add up to the
    exact prompt length.
    """

    def __init__(self, counter: TokenCounter, cache: dict[str, int] | None) -> None:
        self.counter = counter
        self.cache = {} if cache is None else cache

    def block(self, title: str, text: str) -> int:
        return self.counter.count(format_block(ESTIMATE_INDEX, title, text) + BLOCK_SEPARATOR)

    def ensure(self, rows: Sequence[dict], key: str) -> None:
        todo = [r for r in rows if r[key] not in self.cache]
        if todo:
            texts = [format_block(ESTIMATE_INDEX, r["title"], r["text"]) + BLOCK_SEPARATOR for r in todo]
            # One at a time: count_many starts a thread pool per call, which costs more CPU than
            # these few hundred-token blocks (64 a call) take to encode.
            for r, text in zip(todo, texts):
                self.cache[r[key]] = self.counter.count(text)

    def get(self, row: dict, key: str) -> int:
        self.ensure([row], key)
        return self.cache[row[key]]


@functools.lru_cache(maxsize=None)
def index_extra(counter: TokenCounter, digits: int) -> int:
    """Extra tokens of a block numbered with ``digits`` digits over one numbered 1."""
    return counter.count(format_block(10 ** (digits - 1), "x", "")) - counter.count(format_block(ESTIMATE_INDEX, "x", ""))


@functools.lru_cache(maxsize=None)
def _token_byte_lengths(encoding: tiktoken.Encoding) -> np.ndarray:
    """Bytes of each token id of ``encoding`` (0 for ids it does not use)."""
    lengths = np.zeros(encoding.n_vocab, dtype=np.int64)
    for i in range(encoding.n_vocab):
        try:
            lengths[i] = len(encoding.decode_single_token_bytes(i))
        except KeyError:  # a gap in the id space; encode_ordinary never yields it
            pass
    return lengths


class TokenPositions:
    """Where character positions of an encoded text fall in its token ids.

    Lets the one exact encoding of a prompt also give the token offset of every block, instead
    of re-encoding prefixes. Each token decodes to a whole number of bytes, so a character
    position is a token boundary exactly when its UTF-8 byte offset is a cumulative token length.
    """

    def __init__(self, counter: TokenCounter, text: str, ids: np.ndarray, vocabulary_table: bool = True) -> None:
        self.text = text
        self.ascii = text.isascii()  # then byte offset == character offset
        if vocabulary_table:  # 0.2 s once per process, then a numpy lookup per prompt
            lengths = _token_byte_lengths(counter.encoding)[ids]
        else:  # one text: the bytes of its distinct tokens
            distinct, where = np.unique(ids, return_inverse=True)
            decode = counter.encoding.decode_single_token_bytes
            lengths = np.fromiter((len(decode(int(t))) for t in distinct), np.int64, len(distinct))[where]
        self.token_ends = np.cumsum(lengths)

    def tokens_before(self, char_pos: int) -> int | None:
        """How many tokens the text before ``char_pos`` spans, or None if a token straddles it."""
        if char_pos == 0:
            return 0
        byte_pos = char_pos if self.ascii else len(self.text[:char_pos].encode("utf-8"))
        i = int(np.searchsorted(self.token_ends, byte_pos))
        return i + 1 if i < len(self.token_ends) and self.token_ends[i] == byte_pos else None


# Pre-tokenizer patterns for which a text's tokens are its pieces' tokens laid end to end when
# each cut is a "\n" followed by a non-space character (as before every "Document [" block and
# the "Question:" line). No alternative matches across such a cut: the letter/number/symbol
# runs never take a "\n" as their optional first character, and the whitespace ones stop before
# a non-space; the whitespace run that ends at the cut is one pre-token whether the text goes on
# (``\s*[\r\n]``) or ends there (``\s++$``, ``\s*[\r\n]+``); nothing looks behind. BPE works within a
# pre-token, so counts add up. cl100k_base as tiktoken writes it now and before 0.7.
ADDITIVE_PATTERNS = frozenset({
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
})


@functools.lru_cache(maxsize=None)
def pieces_add_up(encoding: tiktoken.Encoding) -> bool:
    """Whether a prompt's token count is the sum of its pieces' counts (see ADDITIVE_PATTERNS).

    Also needs every 1-3 digit group to be one token, so that a block numbered ``i`` costs its
    count with index 1 plus :func:`index_extra` (the number is a pre-token between "[" and "]").
    Other encodings take the slow way: the whole prompt is encoded.
    """
    if getattr(encoding, "_pat_str", None) not in ADDITIVE_PATTERNS:
        return False
    groups = [str(i) for i in range(1000)] + [f"{i:02d}" for i in range(10)] + [f"{i:03d}" for i in range(100)]
    return all(len(encoding.encode_ordinary(g)) == 1 for g in groups)


def additive_layout(before: str, after: str) -> bool:
    """Whether a prompt ``before + context + after`` cuts into pieces whose counts add up.

    The pieces are ``before``, each block with the separator after it (the last block takes the
    separator from the start of ``after``), and the rest of ``after``. Every cut must be a "\\n"
    followed by a non-space character (ADDITIVE_PATTERNS): ``before`` is empty or ends with "\\n"
    (a block starts with "Document"), and ``after`` starts with the block separator followed by
    nothing or a non-space character. Our QA template does ("...explanation.\\n\\n" and
    "\\n\\nQuestion: ..."); a template that does not is encoded whole, which is exact too.
    """
    if before and not before.endswith("\n"):
        return False
    if not after.startswith(BLOCK_SEPARATOR):
        return False
    rest = after[len(BLOCK_SEPARATOR):]
    return not rest or not rest[0].isspace()


def offsets_from_encoding(counter: TokenCounter, sequence: Sequence[Block], context: str, prompt: str,
                          prompt_ids: np.ndarray, context_start: int, ev_ids: list[str], last_alone: int,
                          vocabulary_table: bool = True) -> tuple[int, list[int]]:
    """(context tokens, each evidence block's token offset in the context), read off the prompt's
    encoding; ``context_start``: where the context begins in ``prompt``."""
    starts: dict[str, int] = {}
    pos = last_start = 0
    for i, b in enumerate(sequence, start=1):
        if b.kind == "evidence":
            starts[b.block_id] = pos
        last_start = pos
        pos += len(format_block(i, b.title, b.text)) + len(BLOCK_SEPARATOR)
    positions = TokenPositions(counter, prompt, prompt_ids, vocabulary_table)
    at = [positions.tokens_before(context_start + p) for p in (0, last_start, *(starts[d] for d in ev_ids))]
    if None in at:  # a token straddles a block start: count the prefixes alone
        counts = counter.count_many([context] + [context[: starts[d]] for d in ev_ids])
        return counts[0], counts[1:]
    return at[1] - at[0] + last_alone, [a - at[0] for a in at[2:]]


def verify_additive(counter: TokenCounter, item: dict, sequence: Sequence[Block], context: str, prompt: str,
                    context_start: int, ev_ids: list[str], last_alone: int,
                    added_up: tuple[int, int, list[int]]) -> None:
    """Encode one instance the slow way and compare: a broken assumption is an error, never a wrong length."""
    ids = counter.encoding.encode_to_numpy(prompt, allowed_special=set(), disallowed_special=())
    exact = (len(ids), *offsets_from_encoding(counter, sequence, context, prompt, ids, context_start, ev_ids,
                                              last_alone, vocabulary_table=False))
    if exact != added_up:
        raise RuntimeError(
            f"item {item['item_id']!r}: block counts add up to (prompt tokens, context tokens, evidence offsets) "
            f"{added_up} but {counter.name} encodes {exact}: its pre-tokenizer splits differently than "
            "ADDITIVE_PATTERNS assume"
        )
