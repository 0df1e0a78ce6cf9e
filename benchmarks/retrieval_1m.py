"""Passage search at 1M passages: the pipeline's HNSW index vs exact search in plain numpy (and FAISS flat).

    python benchmarks/retrieval_1m.py [--quick] [--passages 1000000] [--queries 1000] [--json retrieval_1m.json]
        [--vectors-file v.npz] [--index-file hnsw.faiss] [--extra 'IVF4096,Flat:nprobe=32,64,128' ...]

Why not MiniLM: embedding 1M passages with it takes about 8 hours on 2 CPU cores
(retrieval_ann.py measured 100k in 6,143 s), so the 1M run uses vectors that are
cheap to compute yet derived from real text, much as ann-benchmarks' NYTimes-256-angular set
was made (TF-IDF of news articles, randomly projected to 256 dimensions; here SVD to 384):

* passages: the demo corpus generator's invented encyclopedia prose, several seeds of up to
  100,000 entities each (its name space limit), chunked like the pipeline chunks (~100 words);
* vectors: TF-IDF (fitted on a 200k-passage sample) reduced to 384 dimensions (MiniLM's width)
  by truncated SVD (fitted on a 100k sample), L2-normalized, so inner product = cosine;
* queries, two sets: ``--queries`` passages held out of the index (in-distribution, the usual
  ANN-benchmark set-up; build_index tunes efSearch on these unless ``--tune-on questions``), and
  the corpus's own questions through the same transform. Questions are out of distribution for TF-IDF + SVD (a dozen words
  against ~100), and graph and cluster indexes alike need far more search for them.

The index is what the pipeline builds: ``build_index`` (HNSW M 32 / efConstruction 128, efSearch
the smallest candidate reaching recall@10 0.95 on the tuning queries, up to 2,048; the
``passage_index`` asset tunes on the items' questions, which ``--tune-on questions`` does here), then
swept over every efSearch. ``--extra`` adds other FAISS
indexes (index_factory strings) swept over their own parameter. Exact search is plain numpy
(``queries @ vectors.T`` + ``argpartition``) and FAISS ``IndexFlatIP``; recall@10 is against FAISS
flat's top 10 (numpy's agreement with it is printed), and beside it ann-benchmarks' tie-aware
recall (a result within 1e-3 of the exact 10th score counts). Queries/s, for every index and
setting: all queries in one batch (threads as installed); one query per call with threads as
installed; and one query per call on one thread (numpy's BLAS and FAISS's OpenMP both), by wall
clock and by the process's CPU time. On this shared 2-core machine the last is the figure that
holds still: one thread's CPU time is the query's own work, whatever else runs.

``--vectors-file`` keeps the vectors (making them at 1M takes ~15 minutes), ``--index-file`` the
built HNSW index (an hour under load at 1M), so a rerun only measures.

``--quick``: 10,000 passages, 100 queries (about 40 s of CPU).

``--corpus ann --passages 100000``: retrieval_ann.py's 100k passages (one corpus seed), 1,000 of
them held out; with ``--minilm-cache DIR`` their real MiniLM vectors read from retrieval_ann.py's
embedding cache (nothing is embedded here; run retrieval_ann.py with ``--cache DIR`` first),
without it TF-IDF + SVD of the same passages: the two vector kinds side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.retrieval import (
    IndexSettings,
    build_exact_index,
    build_index,
    recall_at_k,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.demo_corpus import MAX_ENTITIES, build_demo_corpus

PASSAGES_PER_ENTITY = 2.2  # measured by retrieval_ann.py
DIM = 384
K = 10
EF_SEARCH = (16, 32, 64, 128, 256, 512, 1024, 2048)


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


def ann_corpus(n_passages: int, seed: int) -> tuple[list[str], list[str]]:
    """retrieval_ann.py's passages (one corpus seed; those it embedded with MiniLM) and questions."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from retrieval_ann import corpus as ann_corpus_

    return ann_corpus_(n_passages, seed)


def cached_minilm(texts: list[str], cache_dir: str) -> np.ndarray:
    """MiniLM vectors of ``texts`` read from retrieval_ann.py's embedding cache (never embedded here:
    a miss is an error; run retrieval_ann.py with the same --passages and --cache first)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from retrieval_ann import MODEL

    from lc_pipeline.construct.embedding import EmbeddingCache

    cache = EmbeddingCache(cache_dir, MODEL)
    keys = [cache.key(t) for t in texts]
    found = cache.get(keys)
    if len(found) < len(keys):
        raise SystemExit(f"{len(keys) - len(found)} of {len(keys)} texts are not in the MiniLM cache "
                         f"{cache.directory}; run retrieval_ann.py --passages N --cache {cache_dir} first")
    return np.stack([found[k] for k in keys]).astype(np.float32)


def make_vectors(args, report: dict) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(passage vectors, {"held-out passages": ..., "questions": ...}); the held-out passages are not indexed."""
    t0 = time.perf_counter()
    if args.corpus == "ann":  # the index holds passages - queries
        texts, questions = ann_corpus(args.passages, args.seed)
    else:  # args.queries more passages than the index holds
        texts, questions = corpus(args.passages + args.queries, args.seed)
    rng = np.random.default_rng(args.seed)
    questions = [questions[i] for i in rng.choice(len(questions), size=min(args.queries, len(questions)), replace=False)]
    report["corpus_s"] = round(time.perf_counter() - t0, 1)
    if args.minilm_cache:
        all_vectors, question_vectors = cached_minilm(texts, args.minilm_cache), cached_minilm(questions, args.minilm_cache)
    else:
        all_vectors, question_vectors = text_vectors(texts, questions, args.seed)
    del texts
    held = np.zeros(len(all_vectors), dtype=bool)
    held[rng.choice(len(all_vectors), size=args.queries, replace=False)] = True
    return all_vectors[~held], {"held-out passages": all_vectors[held], "questions": question_vectors}


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


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (VmRSS) or its peak so far (VmHWM), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serialized_mb(index) -> float:
    """Size of the index as FAISS writes it (what it holds in memory, give or take a few headers)."""
    import faiss

    with tempfile.NamedTemporaryFile(dir="/tmp", suffix=".faiss") as tmp:
        faiss.write_index(index, tmp.name)
        return os.path.getsize(tmp.name) / 2**20


@contextlib.contextmanager
def one_thread():
    """BLAS and OpenMP (numpy's and FAISS's) on one thread: the per-core cost of a query, and free of
    the spin-waiting that idle BLAS threads do on a loaded machine."""
    import faiss
    from threadpoolctl import threadpool_limits

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        faiss.omp_set_num_threads(before)


def one_at_a_time(search, queries: np.ndarray) -> dict:
    """Queries/s searching one query per call: threads as installed; then on one thread, by wall clock and by
    the process's CPU time (one thread: CPU time is that query's work, whatever else the machine runs)."""
    _, seconds = timed(lambda: [search(q[None, :]) for q in queries])
    with one_thread():
        cpu0 = time.process_time()
        _, seconds_1 = timed(lambda: [search(q[None, :]) for q in queries])
        cpu_1 = time.process_time() - cpu0
    return {"single_qps": round(len(queries) / seconds, 1), "single1_qps": round(len(queries) / seconds_1, 1),
            "single1_cpu_qps": round(len(queries) / cpu_1, 1)}


def tie_aware_recall(ids: np.ndarray, vectors: np.ndarray, queries: np.ndarray, tenth: np.ndarray) -> float:
    """ann-benchmarks' k-NN recall: a result counts when its true score is within 1e-3 of the exact 10th best,
    so a tie with the 10th neighbour is not a miss (scores recomputed from the vectors, not the index's)."""
    scores = np.einsum("qkd,qd->qk", vectors[np.maximum(ids, 0)], queries)
    return float(((scores >= tenth[:, None] - 1e-3) & (ids >= 0)).sum(1).mean()) / K


def sweep(index, param: str, values, query_sets: dict, truth: dict, single: int, vectors: np.ndarray) -> list[dict]:
    """Recall@10 and q/s (all queries batched; the first ``single`` one at a time) at each search breadth."""
    import faiss

    space = faiss.ParameterSpace()
    rows = []
    for value in values:
        if param:
            space.set_index_parameter(index, param, value)
        for name, queries in query_sets.items():
            (_, ids), batch_s = timed(index.search, queries, K)
            rows.append({"queries": name, param or "param": value,
                         "recall": round(recall_at_k(ids, truth[name][0], K), 4),
                         "recall_ties": round(tie_aware_recall(ids, vectors, queries, truth[name][1]), 4),
                         "batch_qps": round(len(queries) / batch_s, 1),
                         **one_at_a_time(lambda q: index.search(q, K), queries[:single])})
        print(f"    {param or '-'} {value}: " + "; ".join(
            f"{r['queries']} recall {r['recall']:.4f} (ties {r['recall_ties']:.4f}) single {r['single_qps']:,.0f} q/s "
            f"(1 thread {r['single1_qps']:,.0f}, by CPU time {r['single1_cpu_qps']:,.0f}) batch {r['batch_qps']:,.0f} q/s" for r in rows[-len(query_sets):]),
            flush=True)
    return rows


def number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def parse_extra(spec: str) -> tuple[str, dict, str, list]:
    """'IVF4096_HNSW32,Flat|efConstruction=200|quantizer_efSearch=64:nprobe=16,32,64'
    -> (factory string, fixed settings, swept parameter, its values)."""
    head, _, tail = spec.partition(":")
    factory, *fixed = head.split("|")
    param, _, values = tail.partition("=")
    settings = {name: number(v) for name, _, v in (f.partition("=") for f in fixed)}
    return factory, settings, param, [number(v) for v in values.split(",") if v] or [0]


def build_extra(factory: str, settings: dict, vectors: np.ndarray, train_n: int, seed: int):
    """An index_factory index; ``efConstruction`` is applied before adding (to the index's or its
    quantizer's HNSW graph), any other setting after, through faiss.ParameterSpace."""
    import faiss

    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    if "efConstruction" in settings:
        inner = faiss.downcast_index(index.index if isinstance(index, faiss.IndexPreTransform) else index)
        if isinstance(inner, faiss.IndexIVF):
            inner = faiss.downcast_index(inner.quantizer)
        inner.hnsw.efConstruction = int(settings["efConstruction"])
    t0 = time.perf_counter()
    if not index.is_trained:
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(len(vectors), size=min(train_n, len(vectors)), replace=False))]
        index.train(sample)
    train_s = time.perf_counter() - t0
    index.add(vectors)
    build_s = time.perf_counter() - t0
    space = faiss.ParameterSpace()
    for name, value in settings.items():
        if name != "efConstruction":
            space.set_index_parameter(index, name, value)
    return index, train_s, build_s


def at_target(rows: list[dict], param: str, name: str, target: float = 0.95) -> dict | None:
    """The cheapest setting (smallest breadth) whose recall on query set ``name`` reaches ``target``."""
    ok = [r for r in rows if r["queries"] == name and r["recall"] >= target]
    return min(ok, key=lambda r: r[param or "param"]) if ok else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 passages, 100 queries")
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--single", type=int, default=200, help="queries timed one at a time")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--vectors-file", default="", help="save the vectors here (.npz), or load them if it exists")
    ap.add_argument("--index-file", default="",
                    help="save the pipeline's HNSW index here (+ .json with its build figures), or load it if it exists")
    ap.add_argument("--corpus", choices=("seeds", "ann"), default="seeds",
                    help="seeds: --passages (+ --queries held out) from successive corpus seeds; ann: retrieval_ann.py's "
                         "--passages passages (one seed), --queries of them held out")
    ap.add_argument("--minilm-cache", default="",
                    help="MiniLM vectors of retrieval_ann.py's corpus from this embedding cache instead of TF-IDF + SVD")
    ap.add_argument("--tune-on", choices=("held-out passages", "questions"), default="held-out passages",
                    help="the query set build_index tunes efSearch on (the passage_index asset: questions)")
    ap.add_argument("--no-pipeline", action="store_true", help="skip build_index's HNSW (only --extra indexes)")
    ap.add_argument("--extra", action="append", default=[],
                    help="another FAISS index to compare, 'FACTORY[|name=value...]:param=v1,v2,...', e.g. "
                         "'IVF4000,Flat:nprobe=32,64,128' or 'HNSW48,Flat|efConstruction=256:efSearch=32,64,128' "
                         "(repeatable; index_factory strings; fixed settings and the swept parameter as "
                         "faiss.ParameterSpace names them, plus efConstruction)")
    ap.add_argument("--train", type=int, default=200_000, help="training sample for --extra indexes that need one")
    ap.add_argument("--json", default="retrieval_1m.json")
    args = ap.parse_args()
    if args.quick:
        args.passages, args.queries, args.single = 10_000, 100, 50
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "passages": args.passages, "queries": args.queries, "k": K, "load_before": load_average(),
                    "command": " ".join(sys.argv)}
    if args.minilm_cache:
        args.corpus = "ann"
    report["vectors"] = "minilm (cached)" if args.minilm_cache else "tfidf+svd"
    report["corpus"] = args.corpus
    t0 = time.perf_counter()
    if args.vectors_file and Path(args.vectors_file).exists():
        with np.load(args.vectors_file) as z:
            vectors = z["vectors"]
            query_sets = {"held-out passages": z["held"], "questions": z["questions"]}
            if "kind" in z:
                report["vectors"], report["corpus"] = str(z["kind"]), str(z["corpus"])
    else:
        vectors, query_sets = make_vectors(args, report)
        if args.vectors_file:
            np.savez(args.vectors_file, vectors=vectors, held=query_sets["held-out passages"],
                     questions=query_sets["questions"], kind=report["vectors"], corpus=report["corpus"])
    report["make_vectors_s"] = round(time.perf_counter() - t0, 1)
    report["dims"] = int(vectors.shape[1])
    report["passages"] = len(vectors)
    report["vectors_mb"] = round(vectors.nbytes / 2**20, 1)
    print(f"{len(vectors):,} passage vectors ({report['vectors']}) x {vectors.shape[1]} dims "
          f"({report['make_vectors_s']:.0f} s to make), query sets {list(query_sets)}", flush=True)
    tune_name = args.tune_on
    single = min(args.single, *(len(q) for q in query_sets.values()))

    # Exact baselines. Recall is measured against FAISS flat's top 10; numpy's own agreement with it is printed.
    flat, flat_build = timed(build_exact_index, vectors)
    report["exact"], truth = [], {}
    for name, queries in query_sets.items():
        np_ids, np_batch = timed(numpy_search, vectors, queries, K)
        np_single = one_at_a_time(lambda q: numpy_search(vectors, q, K), queries[:single])
        (scores, ids), flat_batch = timed(flat.search, queries, K)
        truth[name] = (ids, scores[:, K - 1].copy())
        flat_single = one_at_a_time(lambda q: flat.search(q, K), queries[:single])
        report["exact"].append({
            "queries": name, "n": len(queries), "single_n": single,
            "numpy_vs_faiss_agreement": recall_at_k(np_ids, truth[name][0], K),
            "numpy": {"batch_qps": round(len(queries) / np_batch, 1), **np_single},
            "faiss_flat": {"build_s": round(flat_build, 1), "batch_qps": round(len(queries) / flat_batch, 1),
                           **flat_single},
        })
        print(f"exact, {name}: numpy {report['exact'][-1]['numpy']}, FAISS flat {report['exact'][-1]['faiss_flat']}, "
              f"agreement {report['exact'][-1]['numpy_vs_faiss_agreement']:.4f}", flush=True)
    flat = None  # frees its copy of the vectors before the HNSW build
    numpy_qps = {e["queries"]: e["numpy"] for e in report["exact"]}

    report["indexes"] = []

    def record(label: str, params: dict, build_s: float, param: str, rows: list[dict], extra: dict) -> None:
        entry = {"index": label, "params": params, "param": param or "param", "build_s": round(build_s, 1),
                 "sweep": rows, **extra,
                 "at_recall_0.95": {}}
        for name in query_sets:
            best = at_target(rows, param, name)
            if best:
                entry["at_recall_0.95"][name] = {
                    **best, "single_speedup_vs_numpy": round(best["single_qps"] / numpy_qps[name]["single_qps"], 1),
                    "single1_speedup_vs_numpy": round(best["single1_qps"] / numpy_qps[name]["single1_qps"], 1),
                    "single1_cpu_speedup_vs_numpy": round(best["single1_cpu_qps"] / numpy_qps[name]["single1_cpu_qps"], 1),
                    "batch_speedup_vs_numpy": round(best["batch_qps"] / numpy_qps[name]["batch_qps"], 1)}
        report["indexes"].append(entry)
        Path(args.json).write_text(json.dumps(report, indent=2))  # partial results survive a killed run

    if not args.no_pipeline:
        # The pipeline's approximate index: build_index's HNSW, efSearch tuned to recall@10 0.95 on the first set.
        meta_path = Path(args.index_file + ".json") if args.index_file else None
        if args.index_file and Path(args.index_file).exists() and meta_path.exists():
            import faiss

            index = faiss.read_index(args.index_file)
            meta = json.loads(meta_path.read_text())
            print(f"hnsw: loaded {args.index_file} (built in {meta['build_s']:.0f} s)", flush=True)
        else:
            built = build_index(vectors, IndexSettings(kind="hnsw", use_gpu=False, ef_search_candidates=EF_SEARCH),
                                queries=query_sets[tune_name])
            index = built.index
            meta = {"build_s": built.build_seconds, "params": dict(built.params), "tuning": built.tuning,
                    "load_during_build": load_average()}
            print(f"hnsw: built in {built.build_seconds:.0f} s, tuned on {tune_name}: {built.tuning}", flush=True)
            if args.index_file:
                import faiss

                faiss.write_index(index, args.index_file)
                meta_path.write_text(json.dumps(meta, indent=2))
        extra = {"build_index_choice": meta["params"], "build_index_tuning": meta["tuning"],
                 "load_during_build": meta.get("load_during_build"),
                 "index_mb": round(serialized_mb(index), 1)}
        params = {k: v for k, v in meta["params"].items() if k != "efSearch"}
        print(f"HNSW (build_index) {params}: sweep over efSearch", flush=True)
        record("HNSW (build_index)", params, meta["build_s"], "efSearch",
               sweep(index, "efSearch", EF_SEARCH, query_sets, truth, single, vectors), extra)
        del index

    for spec in args.extra:
        factory, settings, param, values = parse_extra(spec)
        index, train_s, build_s = build_extra(factory, settings, vectors, args.train, args.seed)
        print(f"{factory} {settings}: trained in {train_s:.0f} s, built in {build_s:.0f} s; sweep over {param}",
              flush=True)
        label = factory + "".join(f" {k} {v}" for k, v in settings.items())
        record(label, settings, build_s, param, sweep(index, param, values, query_sets, truth, single, vectors),
               {"train_s": round(train_s, 1), "train_n": min(args.train, len(vectors)), "load_during_build": load_average(),
                "index_mb": round(serialized_mb(index), 1)})
        del index

    report["load_after"] = load_average()
    report["peak_rss_mb"] = round(rss_mb("VmHWM"), 1)
    Path(args.json).write_text(json.dumps(report, indent=2))

    print(f"\n{len(vectors):,} passages x {vectors.shape[1]} dims ({report['vectors']}, {report['vectors_mb']:,.0f} MB); "
          f"recall@{K} vs exact FAISS flat; one at a time over {single} queries, batched over all")
    for e in report["exact"]:
        print(f"exact, {e['queries']}: numpy one at a time {e['numpy']['single_qps']:,.1f} q/s (1 thread "
              f"{e['numpy']['single1_qps']:,.1f}, by CPU time {e['numpy']['single1_cpu_qps']:,.1f}), batch {e['numpy']['batch_qps']:,.1f}; FAISS flat one at a time "
              f"{e['faiss_flat']['single_qps']:,.1f} (1 thread {e['faiss_flat']['single1_qps']:,.1f}, by CPU time "
              f"{e['faiss_flat']['single1_cpu_qps']:,.1f}), "
              f"batch {e['faiss_flat']['batch_qps']:,.1f}")
    print("\nat recall@10 >= 0.95 (the cheapest setting reaching it); speed-ups are q/s over exact numpy's")
    print(f"{'index':<28} {'queries':<18} {'setting':<16} {'recall@10':>9} {'(ties)':>7} {'1-at-a-time':>11} "
          f"{'vs numpy':>9} {'1 thread':>9} {'vs numpy':>9} {'1 thr CPU':>9} {'vs numpy':>9} {'batch q/s':>10} "
          f"{'vs numpy':>9}")
    for entry in report["indexes"]:
        for name in query_sets:
            best = entry["at_recall_0.95"].get(name)
            if best is None:
                top = max((r for r in entry["sweep"] if r["queries"] == name), key=lambda r: r["recall"])
                print(f"{entry['index']:<28} {name:<18} {'none reaches':<16} {top['recall']:>9.4f} "
                      f"{top['recall_ties']:>7.4f}  (best, at {entry['param']} {top[entry['param']]})")
                continue
            setting = f"{entry['param']} {best[entry['param']]}"
            print(f"{entry['index']:<28} {name:<18} {setting:<16} {best['recall']:>9.4f} {best['recall_ties']:>7.4f} "
                  f"{best['single_qps']:>11,.1f} {best['single_speedup_vs_numpy']:>8.1f}x {best['single1_qps']:>9,.1f} "
                  f"{best['single1_speedup_vs_numpy']:>8.1f}x {best['single1_cpu_qps']:>9,.1f} "
                  f"{best['single1_cpu_speedup_vs_numpy']:>8.1f}x {best['batch_qps']:>10,.1f} {best['batch_speedup_vs_numpy']:>8.1f}x")
        print(f"{'':<28} build {entry['build_s']:,.0f} s, index {entry['index_mb']:,.0f} MB, "
              f"load during build {entry.get('load_during_build')}")
    print(f"peak RSS {report['peak_rss_mb']:,.0f} MB; load average before {report['load_before']}, "
          f"after {report['load_after']}")
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
