"""The tokenizer that measures instance lengths (config ``tokenizer``, else ``tokenizer_fallback``; loaded offline)."""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from lc_pipeline.construct.tokens import TokenCounter


class TokenizerResource(dg.ConfigurableResource):
    name: str = "cl100k_base"
    fallback: str | None = None
    _counter: TokenCounter | None = PrivateAttr(default=None)

    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter.load(self.name, fallback=self.fallback)
        return self._counter
