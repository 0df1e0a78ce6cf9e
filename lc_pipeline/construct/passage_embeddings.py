"""The passages' embeddings for the retrieval stage (passage_index, hard_negatives; HELMET-style hard
negatives, spec helmet.md §2.2): the lake's embedding cache, encoding chunk by chunk with progress,
and the passage_index table. Pure, no Dagster: ``log`` is any object with ``info(str)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.construct.embedding import EmbeddingCache, EncodeStats
from lc_pipeline.progress import Progress

EMBED_CHUNK = 1024  # passages per encode call: one progress step (and one cache shard) each


def embedding_cache(lake_dir: str | Path, model: str) -> EmbeddingCache:
    """The embedding cache of ``model`` in the lake (a folder or a bucket URL)."""
    # Beside the tables, never inside a table folder (DuckDB globs must not see it).
    return EmbeddingCache(storage.lake_path(lake_dir) / "_cache" / "embeddings", model)


def encode_in_chunks(emb, texts: list[str], cache, log) -> tuple[np.ndarray, EncodeStats]:
    """``emb.encode`` chunk by chunk with counts/ETA in ``log``; stats summed over the chunks."""
    if not texts:
        return emb.encode(texts, cache=cache), emb.last_stats
    parts, total = [], EncodeStats()
    with Progress(log, len(texts), "embed passages", unit="passage") as bar:
        for start in range(0, len(texts), EMBED_CHUNK):
            parts.append(emb.encode(texts[start:start + EMBED_CHUNK], cache=cache))
            s = emb.last_stats
            total = EncodeStats(total.texts + s.texts, total.unique + s.unique, total.cache_hits + s.cache_hits,
                                total.encoded + s.encoded, total.seconds + s.seconds)
            bar.update(s.texts)
    return np.concatenate(parts), total


def passage_index_frame(passage_ids: pl.Series, vectors: np.ndarray, model: str) -> pl.DataFrame:
    """PASSAGE_INDEX rows: each passage's row in the FAISS index, its id and embedding."""
    return schemas.conform(
        pl.DataFrame(
            {
                "row": range(len(vectors)),
                "passage_id": passage_ids,
                "embedding": vectors.tolist(),
                "embedding_model": [model] * len(vectors),
            }
        ),
        "passage_index",
    )


def negatives_metadata(items: pl.DataFrame, negatives: pl.DataFrame) -> dict:
    """Items asked, negatives per item (min, mean) and the mean score of each item's top negative."""
    per_item = negatives.group_by("item_id").len()["len"]
    return {
        "items": items.height,
        "negatives_per_item_min": int(per_item.min()),
        "negatives_per_item_mean": float(per_item.mean()),
        "mean_top1_score": float(negatives.filter(pl.col("rank") == 0)["score"].mean()),
    }
