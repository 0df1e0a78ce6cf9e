"""Where the FAISS passage index lives and on which device it is searched."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from lc_pipeline import storage
from lc_pipeline.construct import retrieval


class VectorIndexResource(dg.ConfigurableResource):
    """The index is a file beside the lake tables (not routed through the IO manager)."""

    path: str  # a file path or a bucket URL (lc_pipeline.storage)
    use_gpu: bool | None = None  # None: GPU when faiss-gpu sees one

    def save(self, index) -> Path:
        p = storage.lake_path(self.path)
        retrieval.save_index(index, p)
        return p

    def load_for_search(self):
        return retrieval.search_device(retrieval.load_index(storage.lake_path(self.path)), self.use_gpu)
