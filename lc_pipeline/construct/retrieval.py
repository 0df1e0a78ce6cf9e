"""Dense retrieval for hard negatives: sentence-transformers embeddings + a FAISS index.

HELMET builds RAG distractors from a real retriever: the top-ranked passages for the
question that do NOT contain any gold answer, in retrieval-rank order. We do the same over
our own passages. Embeddings are L2-normalized so inner product = cosine similarity.

Small corpora get an exact index; above ``IndexSettings.ann_min_vectors`` an approximate one
(HNSW on the CPU, IVF on GPUs) whose recall@10 against exact search is measured while it is
built. Embeddings (and their on-disk cache) are :mod:`lc_pipeline.construct.embedding`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.text import contains_answer


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss-cpu is a core dependency
        raise ImportError("FAISS is missing: pip install faiss-cpu (or the 'gpu' extra for faiss-gpu)") from exc
    return faiss


def gpu_count() -> int:
    faiss = _faiss()
    return int(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else 0


EXACT, HNSW, IVF = "exact", "hnsw", "ivf"
INDEX_KINDS = ("auto", EXACT, HNSW, IVF)


@dataclass(frozen=True)
class IndexSettings:
    """How the passage index is built.

    ``auto``: exact search below ``ann_min_vectors`` vectors; at or above it HNSW on the CPU
    and IVF on GPUs (FAISS has no GPU HNSW). The approximate index's search breadth
    (``efSearch`` / ``nprobe``) is the smallest candidate whose recall@k against exact search
    on ``recall_queries`` sample queries reaches ``target_recall`` (else the best one).
    Questions need far more breadth than the indexed passages themselves (MiniLM at 99k
    passages: efSearch 256 against 16), hence candidates up to 2,048; a larger one costs
    nothing when a smaller one reaches the target.
    """

    kind: str = "auto"
    ann_min_vectors: int = 50_000
    hnsw_m: int = 32
    hnsw_ef_construction: int = 128
    ef_search_candidates: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048)
    ivf_nlist: int = 0  # 0: 4 * sqrt(n), the FAISS guideline
    nprobe_candidates: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    target_recall: float = 0.95
    recall_queries: int = 1000
    recall_k: int = 10
    use_gpu: bool | None = None  # None: GPUs when faiss-gpu sees any
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise ValueError(f"index kind {self.kind!r}: expected one of {list(INDEX_KINDS)}")
        if not 0 < self.target_recall <= 1:
            raise ValueError(f"target_recall {self.target_recall} is outside (0, 1]")
        if self.ann_min_vectors < 1 or self.recall_queries < 1 or self.recall_k < 1:
            raise ValueError("ann_min_vectors, recall_queries and recall_k must be >= 1")


@dataclass
class BuiltIndex:
    """A CPU index ready to save, with what was measured while building it."""

    index: Any
    kind: str  # exact | hnsw | ivf
    params: dict
    build_seconds: float
    built_on_gpu: bool
    recall_at_k: float | None = None  # of the approximate index vs exact search (None: exact)
    recall_k: int = 10
    recall_queries: int = 0
    recall_query_kind: str = ""  # what the recall was measured on: "questions", "indexed vectors", ...
    exact_search_seconds: float | None = None  # for the recall queries, batched
    approx_search_seconds: float | None = None
    tuning: list[dict] = field(default_factory=list)  # [{param: value, "recall": r}, ...]

    @property
    def speedup(self) -> float | None:
        if not self.exact_search_seconds or not self.approx_search_seconds:
            return None
        return self.exact_search_seconds / self.approx_search_seconds

    def metadata(self) -> dict:
        meta = {
            "index_kind": self.kind,
            "index_params": dict(self.params),
            "index_build_seconds": round(self.build_seconds, 3),
            "index_built_on_gpu": self.built_on_gpu,
        }
        if self.recall_at_k is not None:
            meta.update({
                f"recall_at_{self.recall_k}": round(self.recall_at_k, 4),
                "recall_queries": self.recall_queries,
                "recall_query_kind": self.recall_query_kind,
                "exact_search_seconds": round(self.exact_search_seconds or 0.0, 4),
                "approx_search_seconds": round(self.approx_search_seconds or 0.0, 4),
                "search_speedup": round(self.speedup or 0.0, 2),
                "tuning": self.tuning,
            })
        return meta


def choose_kind(n_vectors: int, settings: IndexSettings, gpus: int) -> str:
    if settings.kind != "auto":
        return settings.kind
    if n_vectors < settings.ann_min_vectors:
        return EXACT
    return IVF if gpus > 0 and settings.use_gpu is not False else HNSW


def build_exact_index(vectors: np.ndarray):
    """Exact inner-product index on the CPU; :func:`search_device` moves it to GPUs for searching."""
    faiss = _faiss()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray, k: int) -> float:
    """Mean over queries of |approx top-k ∩ exact top-k| / k (the ANN-benchmarks recall)."""
    if approx_ids.shape[0] != exact_ids.shape[0]:
        raise ValueError(f"{approx_ids.shape[0]} approximate rows but {exact_ids.shape[0]} exact rows")
    hits = [len(set(a[:k].tolist()) & set(e[:k].tolist()) - {-1}) for a, e in zip(approx_ids, exact_ids)]
    return float(np.mean(hits)) / k if hits else 1.0


def _timed_search(index, queries: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    _, ids = index.search(queries, k)
    return ids, time.perf_counter() - t0


def sample_rows(n: int, size: int, seed: int) -> np.ndarray:
    """A seeded sample of ``min(size, n)`` row numbers, sorted: the tuning queries."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(size, n), replace=False))


def build_index(
    vectors: np.ndarray,
    settings: IndexSettings | None = None,
    queries: np.ndarray | Callable[[], np.ndarray] | None = None,
    queries_kind: str = "questions",
) -> BuiltIndex:
    """Exact or approximate inner-product index over L2-normalized ``vectors``.

    For an approximate index, recall@k against exact search is measured on ``queries``
    and the search breadth is tuned to ``settings.target_recall``; the returned
    :class:`BuiltIndex` carries the figures. Give the queries the index will serve (the
    items' questions): tuned on the indexed vectors themselves (the default, when there are
    none) the breadth is far too small for real queries, since the graph was built by
    searching for exactly those points. ``queries`` may be a function returning them, called
    only when an approximate index needs tuning (an exact index never embeds them).
    """
    settings = settings or IndexSettings()
    faiss = _faiss()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    gpus = gpu_count() if settings.use_gpu is not False else 0
    if settings.use_gpu and gpus == 0:
        raise RuntimeError("use_gpu=True but FAISS sees no GPU (install the 'gpu' extra for faiss-gpu)")
    kind = choose_kind(n, settings, gpus)
    t0 = time.perf_counter()
    on_gpu = False
    if kind == EXACT:
        return BuiltIndex(build_exact_index(vectors), EXACT, {}, time.perf_counter() - t0, False)
    if kind == HNSW:
        index = faiss.IndexHNSWFlat(dim, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings.hnsw_ef_construction
        index.add(vectors)
        params = {"M": settings.hnsw_m, "efConstruction": settings.hnsw_ef_construction}
        param_name, candidates = "efSearch", settings.ef_search_candidates
    else:  # IVF: trained (and filled) on the GPUs when there are any
        nlist = settings.ivf_nlist or max(1, min(n // 39, int(4 * math.sqrt(n))))  # FAISS wants >= 39 points/list
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        if gpus > 0:
            gpu_index = faiss.index_cpu_to_all_gpus(index)
            gpu_index.train(vectors)
            gpu_index.add(vectors)
            index = faiss.index_gpu_to_cpu(gpu_index)
            on_gpu = True
        else:
            index.train(vectors)
            index.add(vectors)
        params = {"nlist": nlist}
        param_name, candidates = "nprobe", settings.nprobe_candidates
    build_seconds = time.perf_counter() - t0

    if callable(queries):
        queries = queries()
    if queries is None or len(queries) == 0:
        queries, queries_kind = vectors[sample_rows(n, settings.recall_queries, settings.seed)], "indexed vectors"
    elif len(queries) > settings.recall_queries:
        queries = queries[sample_rows(len(queries), settings.recall_queries, settings.seed)]
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if queries.ndim != 2 or queries.shape[1] != dim:
        raise ValueError(f"tuning queries have shape {queries.shape}; expected (n, {dim}) like the indexed vectors")
    k = min(settings.recall_k, n)
    exact = search_device(build_exact_index(vectors), settings.use_gpu if gpus else False)
    exact_ids, exact_s = _timed_search(exact, queries, k)
    tuning, chosen = [], None
    for value in sorted(candidates):
        if kind == HNSW:
            index.hnsw.efSearch = value
        else:
            index.nprobe = min(value, index.nlist)
        ids, seconds = _timed_search(index, queries, k)
        r = recall_at_k(ids, exact_ids, k)
        tuning.append({param_name: int(value), "recall": round(r, 4), "seconds": round(seconds, 4)})
        chosen = (value, r, seconds)
        if r >= settings.target_recall:
            break
    if chosen[1] < settings.target_recall:  # none reached the target: keep the best recall
        best = max(tuning, key=lambda t: t["recall"])
        chosen = (best[param_name], best["recall"], best["seconds"])
    if kind == HNSW:
        index.hnsw.efSearch = int(chosen[0])  # saved with the index
    else:
        index.nprobe = int(min(chosen[0], index.nlist))
    params[param_name] = int(chosen[0])
    return BuiltIndex(
        index, kind, params, build_seconds, on_gpu,
        recall_at_k=chosen[1], recall_k=k, recall_queries=len(queries), recall_query_kind=queries_kind,
        exact_search_seconds=exact_s, approx_search_seconds=chosen[2], tuning=tuning,
    )


def search_device(index, use_gpu: bool | None = None):
    """``use_gpu=None``: use the GPUs when faiss-gpu sees any; True: require them; False: stay on CPU.

    HNSW stays on the CPU whatever the setting: FAISS has no GPU implementation of it.
    """
    faiss = _faiss()
    gpus = gpu_count()
    if use_gpu and gpus == 0:
        raise RuntimeError("use_gpu=True but FAISS sees no GPU (install the 'gpu' extra for faiss-gpu)")
    if gpus > 0 and use_gpu is not False and not isinstance(index, faiss.IndexHNSW):
        return faiss.index_cpu_to_all_gpus(index)
    return index


def save_index(index, path: Path) -> None:
    faiss = _faiss()
    if not storage.is_local(path):  # object store: serialized, one PUT
        storage.write_bytes_atomic(path, faiss.serialize_index(index).tobytes())
        return
    with storage.replacing(path) as tmp:
        faiss.write_index(index, str(tmp))


def load_index(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"FAISS index {path} does not exist; materialize passage_index first")
    if not storage.is_local(path):
        return _faiss().deserialize_index(np.frombuffer(storage.read_bytes(path), dtype=np.uint8))
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
