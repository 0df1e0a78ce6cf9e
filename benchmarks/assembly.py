"""Instance assembly: tokens/s of the ``instances`` asset (build + checks + write) vs raw tiktoken; peak memory.

    python benchmarks/assembly.py [--quick] [--items 100] [--levels 32k,64k,128k,256k] [--modes asset,construct,frame]
                                  [--json assembly.json]

Inputs (built once, not timed): the demo corpus generator's invented encyclopedia (enough
entities that a 256k context fills from its own domain), chunked like the pipeline chunks,
and hard negatives chosen by the pipeline's own ``select_hard_negatives`` over TF-IDF + SVD
vectors of the passages (cheap, text-derived; MiniLM would take hours here and the
assembler only sees passage ids and ranks).

Each level x mode runs in a fresh child process; peak RSS is its VmHWM, reset once the inputs are loaded:

* ``asset``: the real ``instances`` asset, materialized in process with Dagster (``dg.materialize``)
  over a lake holding the inputs: batches (at most ``--batch`` items, ``assembly.BATCH_TOKENS``
  prompt tokens) built by ``iter_instance_batches``, each checked and written as a row group of
  a staged file that ``HiveParquetIOManager`` publishes; the checks and output metadata included;
* ``construct``: the same build + write without Dagster and the checks: ``iter_instance_batches``
  (same batches) into a ``storage.ParquetStager``, then ``storage.publish_parquet``;
* ``frame``: the level as one DataFrame (``build_instances``), then one ``storage.write_parquet``:
  how the asset wrote a level before it was streamed (memory grows with the level).

Tokens/s counts the prompt tokens of the instances written (``input_tokens``). The
baseline encodes exactly those prompts with ``encode_ordinary`` one after another (one
thread, the limit the assembler works against) and with ``encode_ordinary_batch``
(tiktoken's thread pool). Wall-clock ratios swing with what else runs on a shared machine;
the CPU-time ratio (process CPU seconds of all threads: assembly vs the one-thread raw
encode) is steadier and is the one to compare across runs. ``--quick``: 10 items x {4k, 16k},
a few seconds per level.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline.config import BenchmarkConfig, SourceConfig, level_tokens
from lc_pipeline.construct.assembly import ITEMS_PER_BATCH, build_instances, fitting_items, select_items
from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.tokens import TokenCounter

TOKENS_PER_ENTITY = 290  # measured: 1,200 entities -> 346k cl100k tokens of document text


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Start a new peak-RSS window (Linux >= 4.0: writing 5 to clear_refs resets VmHWM)."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_mb() -> float:
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    return _status_mb("VmHWM")


def uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])  # 1, 5, 15 minute load averages


# ---------------------------------------------------------------------------- inputs (parent)


def tfidf_hard_negatives(items: pl.DataFrame, passages: pl.DataFrame, top_k: int, keep: int) -> pl.DataFrame:
    """Hard negatives from the pipeline's selector over TF-IDF + SVD(128) vectors (text-derived, seconds)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    from lc_pipeline.construct.retrieval import build_exact_index, select_hard_negatives

    tfidf = TfidfVectorizer(sublinear_tf=True, min_df=2).fit(passages["text"].to_list())
    svd = TruncatedSVD(128, random_state=0).fit(tfidf.transform(passages["text"].to_list()))

    def embed(texts: list[str]) -> np.ndarray:
        return normalize(svd.transform(tfidf.transform(texts))).astype(np.float32)

    index = build_exact_index(embed(passages["text"].to_list()))
    return select_hard_negatives(items, passages, index, passages["passage_id"].to_list(),
                                 embed(items["question"].to_list()), top_k, keep)


def prepare(directory: Path, n_items: int, levels: list[str], seed: int) -> dict:
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    longest = max(level_tokens(lv) for lv in levels)
    n_entities = max(200, int(longest * 1.6 / TOKENS_PER_ENTITY))  # answer-bearing documents leave the pool
    t0 = time.perf_counter()
    documents, items = build_demo_corpus(n_entities=n_entities, seed=seed)
    counter = TokenCounter.load()
    passages = chunk_documents(documents, 100, counter)
    eligible, _ = fitting_items(items, documents, counter, min(level_tokens(lv) for lv in levels))
    selected = select_items(eligible, n_items, seed)
    negatives = tfidf_hard_negatives(selected, passages, top_k=100, keep=50)
    for name, frame in (("documents", documents), ("items", selected), ("passages", passages),
                        ("hard_negatives", negatives)):
        frame.write_parquet(directory / f"{name}.parquet")
    return {"entities": n_entities, "documents": documents.height, "document_tokens": int(passages["n_tokens"].sum()),
            "passages": passages.height, "items": selected.height, "hard_negatives": negatives.height,
            "prepare_s": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------- one level (child)


def _asset_setup(directory: Path, level: str, config: BenchmarkConfig, frames: dict[str, pl.DataFrame], batch: int,
                 stack: contextlib.ExitStack):
    """A lake holding the asset's inputs and the pipeline built over it (done before the clock starts)."""
    import dagster as dg
    import yaml

    from lc_pipeline import schemas, storage
    from lc_pipeline.assets import instances as instances_asset
    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.partitions import SOURCE_DIM
    from lc_pipeline.resources.parquet_io import partition_path
    from lc_pipeline.settings import Settings

    root = directory / f"asset-{level}"
    lake = root / "lake"
    for name, dims, frame in (("source_documents", {"source": "demo"}, frames["documents"]),
                              ("source_items", {"source": "demo"}, frames["items"]),
                              ("passages", {}, frames["passages"]), ("hard_negatives", {}, frames["hard_negatives"]),
                              ("confusing_facts", {}, schemas.empty("confusing_facts")),
                              ("replacement_rules", {}, schemas.empty("replacement_rules"))):
        storage.write_parquet(frame, partition_path(lake, name, dims))
    raw = {"name": config.name, "sources": [{"name": "demo", "kind": "demo_corpus"}], "lengths": [level],
           "base_lengths": [level], "long_lengths": [level], "depths": list(config.depths),
           "items_per_length": config.items_per_length, "seed": config.seed,
           "hard_negatives_per_item": config.hard_negatives_per_item}
    (root / "config.yaml").write_text(yaml.safe_dump(raw))
    instances_asset.ITEMS_PER_BATCH = batch
    pipeline = build_pipeline(Settings(project_dir=root, config=str(root / "config.yaml"), lake_dir=lake,
                                       models_file=root / "models.yaml", dagster_home=root / ".dagster"))
    dagster_instance = stack.enter_context(dg.instance_for_test())
    dagster_instance.add_dynamic_partitions(SOURCE_DIM, ["demo"])
    def materialize() -> Path:
        result = dg.materialize(pipeline.assets, selection=["instances"], partition_key=level,
                                resources=pipeline.resources, instance=dagster_instance)
        if not result.success:
            raise SystemExit(f"{level}: the instances asset failed")
        return partition_path(lake, "instances", {"length": level})

    return materialize


def run_level(directory: Path, level: str, mode: str, batch: int, seed: int) -> dict:
    frames = {n: pl.read_parquet(directory / f"{n}.parquet") for n in ("documents", "items", "passages", "hard_negatives")}
    items = frames["items"]
    config = BenchmarkConfig(
        name="assembly-bench", sources=(SourceConfig("demo"),), lengths=(level,), base_lengths=(level,),
        long_lengths=(level,), depths=(0.5,), items_per_length=items.height, seed=seed, hard_negatives_per_item=50,
    )
    counter = TokenCounter.load()
    counter.count("warm-up")  # BPE ranks loaded before the clock starts
    from lc_pipeline import storage
    from lc_pipeline.construct.assembly import items_per_batch_at, iter_instance_batches

    storage.lake_path(directory)
    out = directory / f"instances-{level}-{mode}.parquet"
    stack = contextlib.ExitStack()  # the Dagster instance of asset mode, closed at the end
    materialize = _asset_setup(directory, level, config, frames, batch, stack) if mode == "asset" else None
    rss_before = rss_mb()  # inputs loaded, imports done
    reset_peak_rss()
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "frame":
        df = build_instances(items, frames["documents"], frames["passages"], frames["hard_negatives"],
                             level=level, config=config, counter=counter)
        storage.write_parquet(df, out)
        del df
    elif mode == "construct":
        with tempfile.TemporaryDirectory(prefix="lcp-bench-") as scratch:
            with storage.ParquetStager(scratch) as stage:
                for df in iter_instance_batches(items, frames["documents"], frames["passages"],
                                                frames["hard_negatives"], level=level, config=config,
                                                counter=counter, items_per_batch=items_per_batch_at(
                                                    level_tokens(level), len(config.depths), batch)):
                    stage.write(df)
                    del df
                staged = stage.finish()
            storage.publish_parquet(staged, out)
    elif mode == "asset":
        out = materialize()
    else:
        raise SystemExit(f"unknown mode {mode!r}: asset, construct or frame")
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_peak = peak_rss_mb()
    # The baseline: the same prompts, encoded raw (read back so they are exactly what was written).
    written = pl.read_parquet(out, columns=["prompt", "input_tokens"])
    prompts, prompts_tokens = written["prompt"].to_list(), int(written["input_tokens"].sum())
    import pyarrow.parquet as pq

    row_groups = pq.ParquetFile(out).metadata.num_row_groups
    enc = counter.encoding
    t0, c0 = time.perf_counter(), time.process_time()
    raw_tokens = sum(len(enc.encode_ordinary(p)) for p in prompts)
    t_raw, cpu_raw = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    enc.encode_ordinary_batch(prompts)
    t_raw_batch = time.perf_counter() - t0
    stack.close()
    if raw_tokens != prompts_tokens:
        raise SystemExit(f"{level}: input_tokens sum {prompts_tokens} != raw count {raw_tokens}")
    return {
        "level": level, "mode": mode, "instances": written.height, "prompt_tokens": prompts_tokens,
        "prompt_chars": sum(map(len, prompts)), "parquet_mb": round(out.stat().st_size / 2**20, 1),
        "row_groups": row_groups, "build_write_s": round(total, 2),
        "tokens_per_s": round(prompts_tokens / total), "raw_encode_s": round(t_raw, 2),
        "raw_tokens_per_s": round(raw_tokens / t_raw), "raw_batch_tokens_per_s": round(raw_tokens / t_raw_batch),
        "ratio_vs_raw": round(t_raw / total, 3), "cpu_s": round(cpu, 2), "raw_cpu_s": round(cpu_raw, 2),
        "cpu_ratio_vs_raw": round(cpu_raw / cpu, 3), "ratio_vs_raw_batch": round(t_raw_batch / total, 3),
        "rss_before_mb": round(rss_before), "rss_peak_mb": round(rss_peak),
        "rss_growth_mb": round(rss_peak - rss_before),
    }


# ---------------------------------------------------------------------------- parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 items x {4k, 16k}")
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--levels", default="32k,64k,128k,256k")
    ap.add_argument("--modes", default="asset,construct,frame")
    ap.add_argument("--batch", type=int, default=ITEMS_PER_BATCH, help="at most this many items per batch (row "
                    "group) in asset and construct modes")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default="assembly.json")
    ap.add_argument("--child", nargs=3, metavar=("DIR", "LEVEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        directory, level, mode = args.child
        print(json.dumps(run_level(Path(directory), level, mode, args.batch, args.seed)))
        return
    if args.quick:
        args.items, args.levels = 10, "4k,16k"
    levels = args.levels.split(",")
    modes = args.modes.split(",")
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "load_before": uptime(), "items": args.items, "levels": levels, "rows": []}
    with tempfile.TemporaryDirectory(prefix="lcp-assembly-") as tmp:
        report["inputs"] = prepare(Path(tmp), args.items, levels, args.seed)
        print(f"inputs: {report['inputs']}", flush=True)
        for level in levels:
            for mode in modes:
                proc = subprocess.run([sys.executable, __file__, "--batch", str(args.batch), "--seed", str(args.seed),
                                       "--child", tmp, level, mode], capture_output=True, text=True, check=False)
                if proc.returncode:
                    raise SystemExit(f"{level} {mode} failed:\n{proc.stderr[-3000:]}")
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                report["rows"].append(row)
                print(f"  {level} {mode}: {row['tokens_per_s']:,} tok/s ({row['ratio_vs_raw']:.2f}x raw wall, "
                      f"{row['cpu_ratio_vs_raw']:.2f}x raw CPU), "
                      f"peak RSS {row['rss_peak_mb']} MB", flush=True)
    report["load_after"] = uptime()

    print(f"\n{args.items} items x depth 0.5 per level; tokens/s over build + write; "
          f"raw = encode_ordinary of the same prompts (1 thread) / encode_ordinary_batch")
    print(f"{'level':<6} {'mode':<9} {'rows':>5} {'prompt tok':>11} {'build+write s':>13} {'tok/s':>10} "
          f"{'raw tok/s':>10} {'vs raw':>7} {'vs batch':>8} {'CPU s':>7} {'raw CPU s':>9} {'CPU vs raw':>10} "
          f"{'peak RSS MB':>11} {'growth MB':>9} {'parquet MB':>10} {'groups':>6}")
    for r in report["rows"]:
        print(f"{r['level']:<6} {r['mode']:<9} {r['instances']:>5} {r['prompt_tokens']:>11,} {r['build_write_s']:>13.1f} "
              f"{r['tokens_per_s']:>10,} {r['raw_tokens_per_s']:>10,} {r['ratio_vs_raw']:>6.2f}x "
              f"{r['ratio_vs_raw_batch']:>7.2f}x {r['cpu_s']:>7.1f} {r['raw_cpu_s']:>9.1f} {r['cpu_ratio_vs_raw']:>9.2f}x "
              f"{r['rss_peak_mb']:>11} {r['rss_growth_mb']:>9} {r['parquet_mb']:>10} {r['row_groups']:>6}")
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
