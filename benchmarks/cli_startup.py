"""`lcp query` against plain DuckDB on the same Parquet files, whole process (issue 29, "Fixed costs").

    python benchmarks/cli_startup.py [--pairs 7] [--models 10] [--lake DIR]

Builds a lake in the project's hive layout (every table of lc_pipeline.schemas, partitioned as the
assets are: ``instances/length=1k/``, ``generations/length=1k/model=m1/``, ``benchmark_scores/model=m1/``,
one ``data.parquet`` each; ``benchmark_scores`` holds 21 task rows + group and overall rows per model),
runs ``lcp query`` once to make ``lake.duckdb`` (as any first query does), then alternates

    A: lcp query "<SQL>"                        (the console script, a fresh process)
    B: python -c "import duckdb; duckdb.sql('<SQL over read_parquet(...)>').fetchall()"

``--pairs`` times, A then B, and prints each pair's wall and CPU seconds (user + system of the child,
from ``resource.getrusage(RUSAGE_CHILDREN)``) and the medians of the per-pair ratios A/B. Both sides run
the same interpreter (the project's virtualenv), so interpreter start-up is on both sides.
Also prints ``python -X importtime`` of the ``lcp query`` path: the slowest imports.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from lc_pipeline.schemas import TABLES

SQL = ("select model, task, round(score,2) as s, n from benchmark_scores where level='task' "
       "order by model, task")
LENGTHS = ("1k", "2k", "4k")
TASKS = ("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
         "dureader", "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht",
         "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p")
# How each table is partitioned (assets/*.py): by length, length x model, model, source, or not at all.
BY_LENGTH = {"instances"}
BY_LENGTH_MODEL = {"generations", "metric_scores", "judge_scores", "citation_scores"}
BY_MODEL = {"prior_knowledge", "long_scores", "lveval_ablation", "benchmark_scores", "minilongbench_estimates",
            "minilongbench_subset"}
BY_SOURCE = {"source_documents", "source_items", "rejected_records"}


def _null_row(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame([pl.Series(name, [None], dtype=dtype) for name, dtype in schema.items()])


def _benchmark_scores(model_index: int) -> pl.DataFrame:
    rows = []
    for i, task in enumerate(TASKS):
        rows.append({"benchmark": "longbench", "table": "zh" if "zh" in task else "en", "level": "task",
                     "task": task, "category": f"g{i % 6}", "length": "all", "metric": "qa_f1",
                     "score": (17.0 * i + 3.1 * model_index) % 100, "n": 10 + i, "aggregation": None})
    for g in range(6):
        rows.append({"benchmark": "longbench", "table": "en", "level": "group", "task": None, "category": f"g{g}",
                     "length": "all", "metric": "qa_f1", "score": 40.0 + g, "n": 50, "aggregation": None})
    rows.append({"benchmark": "longbench", "table": "en", "level": "overall", "task": None, "category": None,
                 "length": "all", "metric": "qa_f1", "score": 42.0, "n": 237, "aggregation": "mean_of_groups"})
    df = pl.DataFrame(rows)
    schema = TABLES["benchmark_scores"]
    return df.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in df.columns]) \
             .select([pl.col(c).cast(t) for c, t in schema.items()])


def make_lake(lake: Path, models: int) -> None:
    """Every table of the project, in its partition layout, one small file per partition."""
    slugs = [f"m{i}" for i in range(1, models + 1)]
    for table, schema in TABLES.items():
        if table in BY_LENGTH:
            parts = [f"length={lv}" for lv in LENGTHS]
        elif table in BY_LENGTH_MODEL:
            parts = [f"length={lv}/model={m}" for lv in LENGTHS for m in slugs]
        elif table in BY_MODEL:
            parts = [f"model={m}" for m in slugs]
        elif table in BY_SOURCE:
            parts = ["source=longbench"]
        else:
            parts = [""]
        for k, part in enumerate(parts):
            d = lake / table / part
            d.mkdir(parents=True, exist_ok=True)
            df = _benchmark_scores(k) if table == "benchmark_scores" else _null_row(schema)
            df.write_parquet(d / "data.parquet")


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    cpu0, t0 = _child_cpu(), time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, _child_cpu() - cpu0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--lake", type=Path, default=None, help="Use this lake (default: build one in a temp folder).")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        lake = args.lake or Path(tmp) / "data_lake"
        if args.lake is None:
            make_lake(lake, args.models)
        env = {**os.environ, "LCP_LAKE": str(lake), "LCP_PROJECT_DIR": tmp}
        lcp = str(Path(sys.executable).with_name("lcp"))
        a_cmd = [lcp, "query", SQL, "--format", "csv"]
        plain_sql = SQL.replace("from benchmark_scores",
                                f"from read_parquet('{lake}/benchmark_scores/**/data.parquet', hive_partitioning=true)")
        b_cmd = [sys.executable, "-c", f"import duckdb; print(len(duckdb.sql({plain_sql!r}).fetchall()))"]

        a_rows = timed(a_cmd, env)[2].count("\n") - 1  # warm-up: makes lake.duckdb, fills the page cache
        b_rows = int(timed(b_cmd, env)[2])
        if a_rows != b_rows:
            raise SystemExit(f"lcp query printed {a_rows} rows, plain DuckDB {b_rows}")
        print(f"lake {lake}: {len(TABLES)} tables, {args.models} models; query returns {a_rows} rows")
        print("pair | lcp wall s | duckdb wall s | lcp CPU s | duckdb CPU s | wall ratio | CPU ratio")
        wall, cpu = [], []
        for i in range(args.pairs):
            aw, ac, _ = timed(a_cmd, env)
            bw, bc, _ = timed(b_cmd, env)
            wall.append(aw / bw)
            cpu.append(ac / bc)
            print(f"{i + 1} | {aw:.3f} | {bw:.3f} | {ac:.3f} | {bc:.3f} | {aw / bw:.2f} | {ac / bc:.2f}")
        print(f"median ratio lcp query / plain DuckDB: wall {statistics.median(wall):.2f}x, "
              f"CPU {statistics.median(cpu):.2f}x ({args.pairs} pairs; load average {os.getloadavg()[0]:.1f})")

        imports = subprocess.run([sys.executable, "-X", "importtime", "-c",
                                  f"import sys; sys.argv = ['lcp', 'query', {SQL!r}, '--format', 'csv']\n"
                                  "from lc_pipeline.cli import main\nmain()"],
                                 env=env, capture_output=True, text=True).stderr
        rows = []
        for line in imports.splitlines():
            if line.startswith("import time:") and "|" in line and "cumulative" not in line:
                _, cumulative, name = (s.strip() for s in line[len("import time:"):].split("|"))
                rows.append((int(cumulative), name))
        top = [(us, name) for us, name in sorted(rows, reverse=True) if not name.startswith(" ")][:8]
        print("slowest top-level imports of the lcp query path (cumulative ms): "
              + ", ".join(f"{name.strip()} {us / 1000:.0f}" for us, name in top))


if __name__ == "__main__":
    main()
