"""Passage search at 1M passages: the pipeline's HNSW index vs exact search in plain numpy (and FAISS flat).

    python benchmarks/retrieval_1m.py [--quick] [--passages 1000000] [--queries 1000] [--json retrieval_1m.json]

Why not MiniLM: embedding 1M passages with it takes about 8 hours on 2 CPU cores
(retrieval_ann.py measured 100k in 6,143 s), so this benchmark uses vectors that are
cheap to compute yet derived from real text with real neighbourhood structure:

* passages: the demo corpus generator's invented encyclopedia prose, several seeds of up to
  100,000 entities each (its name space limit), chunked like the pipeline chunks (~100 words);
* vectors: TF-IDF (fitted on a 200k-passage sample) reduced to 384 dimensions (MiniLM's width)
  by truncated SVD (fitted on a 100k sample), L2-normalized, so inner product = cosine;
* queries, two sets: ``--queries`` passages held out of the index (in-distribution, the usual
  ANN-benchmark set-up; HNSW's efSearch is tuned on these), and the corpus's own questions
  through the same transform (the pipeline's kind of query).

The search side is what the pipeline runs: ``build_index`` (HNSW M 32 / efConstruction 128,
efSearch the smallest candidate reaching recall@10 0.95 on the tuning queries) against exact
search. Exact search is timed two ways: plain numpy (``vectors @ q`` + ``argpartition``, BLAS
threads as installed) and FAISS ``IndexFlatIP``. Recall@10 is against FAISS flat's top 10
(numpy's agreement with it is printed too). Queries/s is given for one query at a time (the
online case) and for all queries in one batch, with each query set's recall at every efSearch
candidate. Questions are out of distribution for TF-IDF + SVD (short; what tells their passage
apart is mostly rare names, which 384 SVD dimensions likely keep poorly): HNSW recall on them stays far
below 0.95 at any efSearch (0.66 at 2,048 at 1M), while on MiniLM vectors questions reach 0.957
at efSearch 256 (``--minilm-cache`` below). So the speed-up at recall 0.95 is read on the
held-out passages; efSearch candidates go up to 2,048 (the pipeline's stop at 512).

``--quick``: 20,000 passages, 200 queries (under a minute).

``--minilm-cache DIR --passages 100000``: the same measurements on retrieval_ann.py's real
MiniLM vectors, read from its embedding cache (nothing is embedded here; run retrieval_ann.py
with ``--cache DIR`` first): exact numpy vs HNSW on the embeddings the pipeline uses, at 100k.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.retrieval import IndexSettings, build_exact_index, build_index, recall_at_k
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.demo_corpus import MAX_ENTITIES, build_demo_corpus

PASSAGES_PER_ENTITY = 2.2  # measured by retrieval_ann.py
DIM = 384
K = 10
EF_SEARCH = (32, 64, 128, 256, 512, 1024, 2048)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def corpus(n_passages: int, seed: int) -> tuple[list[str], list[str]]:
    """(passage texts, question texts): corpora of successive seeds until there are enough passages."""
    counter = TokenCounter.load()
    texts: list[str] = []
    questions: list[str] = []
    s = seed
    while len(texts) < n_passages:
        need = n_passages - len(texts)
        n_entities = max(60, min(MAX_ENTITIES, math.ceil(need / PASSAGES_PER_ENTITY * 1.05)))
        docs, items = build_demo_corpus(n_entities=n_entities, seed=s, source=f"demo{s}")
        texts += chunk_documents(docs, 100, counter)["text"].to_list()
        questions += items["question"].to_list()
        print(f"  corpus seed {s}: {n_entities} entities, {len(texts):,} passages so far", flush=True)
        s += 1
    return texts[:n_passages], questions


def text_vectors(texts: list[str], queries: list[str], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """TF-IDF -> TruncatedSVD(384) -> L2 normalized float32, fitted on samples, applied in chunks."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in rng.choice(len(texts), size=min(200_000, len(texts)), replace=False)]
    tfidf = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32).fit(sample)
    svd = TruncatedSVD(min(DIM, len(tfidf.vocabulary_) - 1), random_state=seed).fit(tfidf.transform(sample[:100_000]))
    out = np.empty((len(texts), svd.n_components), dtype=np.float32)
    for start in range(0, len(texts), 50_000):
        chunk = texts[start:start + 50_000]
        out[start:start + len(chunk)] = normalize(svd.transform(tfidf.transform(chunk)))
    return out, normalize(svd.transform(tfidf.transform(queries))).astype(np.float32)


def cached_minilm(n_passages: int, n_queries: int, seed: int, cache_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """retrieval_ann.py's passages and queries, their MiniLM vectors read from its embedding cache
    (never embedded here: a miss is an error; run retrieval_ann.py with the same --cache first)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from retrieval_ann import MODEL, corpus as ann_corpus  # the same passages and query sample

    from lc_pipeline.construct.retrieval import EmbeddingCache

    texts, questions = ann_corpus(n_passages, seed)
    rng = np.random.default_rng(seed)
    questions = [questions[i] for i in rng.choice(len(questions), size=min(n_queries, len(questions)), replace=False)]
    cache = EmbeddingCache(cache_dir, MODEL)
    out = []
    for label, group in (("passages", texts), ("queries", questions)):
        keys = [cache.key(t) for t in group]
        found = cache.get(keys)
        if len(found) < len(keys):
            raise SystemExit(f"{len(keys) - len(found)} of {len(keys)} {label} are not in the MiniLM cache "
                             f"{cache.directory}; run retrieval_ann.py --passages {n_passages} --cache {cache_dir} first")
        out.append(np.stack([found[k] for k in keys]).astype(np.float32))
    return out[0], out[1]


def numpy_search(vectors: np.ndarray, queries: np.ndarray, k: int, batch: int = 64) -> np.ndarray:
    """Exact top-k by inner product: a matrix product and argpartition, ``batch`` queries at a time."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), batch):
        scores = queries[start:start + batch] @ vectors.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        out[start:start + batch] = np.take_along_axis(top, order, axis=1)
    return out


def timed(fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 passages, 200 queries")
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--single", type=int, default=200, help="queries timed one at a time")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--vectors-file", default="", help="save the TF-IDF vectors here (.npz), or load them if it exists")
    ap.add_argument("--minilm-cache", default="",
                    help="use retrieval_ann.py's MiniLM vectors from this embedding cache instead of TF-IDF + SVD")
    ap.add_argument("--json", default="retrieval_1m.json")
    args = ap.parse_args()
    if args.quick:
        args.passages, args.queries, args.single = 20_000, 200, 100
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "passages": args.passages, "queries": args.queries, "k": K, "load_before": load_average()}
    report["vectors"] = "minilm (cached)" if args.minilm_cache else "tfidf+svd"
    t0 = time.perf_counter()
    query_sets: dict[str, np.ndarray] = {}
    if args.minilm_cache:
        vectors, query_sets["questions"] = cached_minilm(args.passages, args.queries, args.seed, args.minilm_cache)
    elif args.vectors_file and Path(args.vectors_file).exists():
        with np.load(args.vectors_file) as z:
            vectors, query_sets["held-out passages"], query_sets["questions"] = z["vectors"], z["held"], z["questions"]
    else:
        # args.queries more passages than the index holds: those are held out as in-distribution queries.
        texts, questions = corpus(args.passages + args.queries, args.seed)
        rng = np.random.default_rng(args.seed)
        questions = [questions[i] for i in rng.choice(len(questions), size=min(args.queries, len(questions)),
                                                       replace=False)]
        report["corpus_s"] = round(time.perf_counter() - t0, 1)
        all_vectors, query_sets["questions"] = text_vectors(texts, questions, args.seed)
        del texts
        held = np.zeros(len(all_vectors), dtype=bool)
        held[rng.choice(len(all_vectors), size=args.queries, replace=False)] = True
        vectors, query_sets["held-out passages"] = all_vectors[~held], all_vectors[held]
        del all_vectors
        query_sets = {k: query_sets[k] for k in ("held-out passages", "questions")}  # the tuning set first
        if args.vectors_file:
            np.savez(args.vectors_file, vectors=vectors, held=query_sets["held-out passages"],
                     questions=query_sets["questions"])
    report["make_vectors_s"] = round(time.perf_counter() - t0, 1)
    report["dims"] = int(vectors.shape[1])
    report["passages"] = len(vectors)
    print(f"{len(vectors):,} passage vectors ({report['vectors']}) x {vectors.shape[1]} dims "
          f"({report['make_vectors_s']:.0f} s to make), query sets {list(query_sets)}", flush=True)

    flat, flat_build = timed(build_exact_index, vectors)
    tune_name, tune_queries = next(iter(query_sets.items()))
    # The pipeline's approximate index, efSearch tuned to recall@10 0.95 on the first query set.
    built = build_index(vectors, IndexSettings(kind="hnsw", use_gpu=False, ef_search_candidates=EF_SEARCH),
                        queries=tune_queries)
    print(f"hnsw: built in {built.build_seconds:.0f} s, tuned on {tune_name}: {built.tuning}", flush=True)
    chosen_ef = built.params["efSearch"]
    report["sets"] = []
    for name, queries in query_sets.items():
        single = queries[: args.single]
        rows = []
        np_ids, np_batch = timed(numpy_search, vectors, queries, K)
        _, np_single = timed(lambda: [numpy_search(vectors, q[None, :], K) for q in single])
        (_, flat_ids), flat_batch = timed(flat.search, queries, K)
        _, flat_single = timed(lambda: [flat.search(q[None, :], K) for q in single])
        built.index.hnsw.efSearch = chosen_ef
        (_, hnsw_ids), hnsw_batch = timed(built.index.search, queries, K)
        _, hnsw_single = timed(lambda: [built.index.search(q[None, :], K) for q in single])
        for label, build_s, params, ids, batch_s, single_s in (
            ("exact numpy", 0.0, {}, np_ids, np_batch, np_single),
            ("exact FAISS flat", flat_build, {}, flat_ids, flat_batch, flat_single),
            ("HNSW (build_index)", built.build_seconds, dict(built.params), hnsw_ids, hnsw_batch, hnsw_single),
        ):
            rows.append({"index": label, "build_s": round(build_s, 1), "params": params,
                         "recall@10": recall_at_k(ids, flat_ids, K), "batch_s": batch_s, "single_s": single_s})
        for r in rows:
            r["single_qps"] = round(len(single) / r["single_s"], 1)
            r["batch_qps"] = round(len(queries) / r["batch_s"], 1)
            r["single_speedup_vs_numpy"] = round(rows[0]["single_s"] / r["single_s"], 1)
            r["batch_speedup_vs_numpy"] = round(rows[0]["batch_s"] / r["batch_s"], 1)
        sweep = []  # recall of this query set at every efSearch candidate (batched)
        for ef in EF_SEARCH:
            built.index.hnsw.efSearch = ef
            (_, ids), seconds = timed(built.index.search, queries, K)
            sweep.append({"efSearch": ef, "recall": round(recall_at_k(ids, flat_ids, K), 4),
                          "batch_qps": round(len(queries) / seconds, 1)})
        report["sets"].append({"queries": name, "n": len(queries), "single_n": len(single),
                               "numpy_vs_faiss_agreement": recall_at_k(np_ids, flat_ids, K), "indexes": rows,
                               "efsearch_sweep": sweep})
    report["load_after"] = load_average()

    print(f"\n{len(vectors):,} passages x {vectors.shape[1]} dims ({report['vectors']}); recall@{K} vs exact FAISS "
          f"flat; HNSW efSearch tuned on {tune_name}")
    for qs in report["sets"]:
        print(f"\nqueries: {qs['queries']} ({qs['n']}; one at a time over {qs['single_n']}); numpy vs FAISS "
              f"top-10 agreement {qs['numpy_vs_faiss_agreement']:.4f}")
        print(f"{'index':<20} {'build s':>8} {'recall@10':>10} {'q/s single':>11} {'vs numpy':>9} "
              f"{'q/s batch':>10} {'vs numpy':>9}  params")
        for r in qs["indexes"]:
            print(f"{r['index']:<20} {r['build_s']:>8.1f} {r['recall@10']:>10.4f} {r['single_qps']:>11,.1f} "
                  f"{r['single_speedup_vs_numpy']:>8.1f}x {r['batch_qps']:>10,.1f} {r['batch_speedup_vs_numpy']:>8.1f}x  "
                  f"{r['params']}")
        print("HNSW recall by efSearch: " + ", ".join(f"{e['efSearch']} -> {e['recall']}" for e in qs["efsearch_sweep"]))
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
