"""Incremental cost: what re-running the demo and adding one model materialize, from Dagster's run records.

    python benchmarks/incremental.py [--quick] [--json incremental.json]

Drives the real CLI (``lcp demo``, ``lcp add-model``, ``lcp backfill``) in a throw-away project
(its own lake, model registry and SQLite Dagster instance) and, after each command, reads that
instance's runs and their ASSET_MATERIALIZATION events:

1. ``lcp demo``            cold: everything;
2. ``lcp demo``            again, nothing changed: goal, nothing regenerated;
3. ``lcp add-model`` + ``lcp backfill NEW``: goal, only NEW's partitions (and the leaderboard,
   which ranks every model and is rebuilt on purpose);
4. ``lcp demo``            again: goal, nothing regenerated.

Per step: wall time, runs launched, materializations by asset, whose partitions they were,
and how many generations were actually produced (the ``generated`` metadata of each
``generations`` materialization; ``reused_from_store`` counts answers the store gave back).
The new model is the built-in SmolLM2 GGUF on the in-process llama.cpp backend when
llama-cpp-python is installed (the fastest CPU backend), else on transformers.
``--quick``: the test suite's tiny config (1k/2k, 2 items); the default is the demo config.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
NEW_MODEL = "smollm2-new"
# Same as tests/conftest.py TINY_CONFIG: lengths a 2-core CPU handles in seconds.
TINY_CONFIG = {
    "name": "tiny",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"], "base_lengths": ["1k"], "long_lengths": ["2k"], "depths": [0.0, 1.0],
    "items_per_length": 2, "retrieval_top_k": 40, "hard_negatives_per_item": 20, "max_new_tokens": 12,
    "models": ["smollm2-135m"],
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def lcp(env: dict[str, str], *args: str) -> tuple[float, list[str]]:
    """Run one lcp command; (seconds, its step lines). A failure stops the benchmark with its output."""
    exe = Path(sys.executable).with_name("lcp")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "lc_pipeline.cli"]
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"lcp {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    steps = [line.strip() for line in proc.stderr.splitlines() if line.strip()[:2] in ("+ ", "= ")]
    return seconds, steps


def snapshot(dagster_home: Path) -> dict[str, list[tuple[str, str | None, dict]]]:
    """run id -> [(asset, partition, selected metadata)] for every run in the instance."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(dagster_home)
    out = {}
    with dg.DagsterInstance.get() as instance:
        for run in instance.get_runs():
            mats = []
            for rec in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
                event = rec.dagster_event
                meta = event.step_materialization_data.materialization.metadata
                picked = {k: getattr(meta[k], "value", meta[k]) for k in ("generated", "reused_from_store")
                          if k in meta}
                mats.append((event.asset_key.path[-1], event.partition, picked))
            out[run.run_id] = mats
    return out


def describe(new: dict[str, list], models: set[str]) -> dict:
    """What one step materialized, and whose partitions it touched."""
    mats = [m for run in new.values() for m in run]
    owner: Counter = Counter()
    for asset, partition, _ in mats:
        model = next((m for m in models if partition and (partition == m or partition.endswith(f"|{m}"))), None)
        owner[f"model {model}" if model else ("unpartitioned" if partition is None else "shared (length/source)")] += 1
    return {
        "runs": len(new),
        "materializations": len(mats),
        "by_asset": dict(sorted(Counter(a for a, _, _ in mats).items())),
        "by_owner": dict(sorted(owner.items())),
        "partitions": sorted({f"{a}[{p}]" if p else a for a, p, _ in mats}),
        "generated": sum(meta.get("generated", 0) for a, _, meta in mats if a == "generations"),
        "reused_from_store": sum(meta.get("reused_from_store", 0) for a, _, meta in mats if a == "generations"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the tests' tiny config instead of the demo config")
    ap.add_argument("--json", default="incremental.json")
    ap.add_argument("--keep", help="keep the project in this folder (default: a temp dir, removed)")
    args = ap.parse_args()
    backend = "llamacpp" if importlib.util.find_spec("llama_cpp") else "transformers"
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "config": "tiny" if args.quick else "demo", "new_model_backend": backend,
                    "load_before": load_average(), "steps": []}
    with tempfile.TemporaryDirectory(prefix="lcp-incremental-") as tmp:
        project = Path(args.keep or tmp)
        project.mkdir(parents=True, exist_ok=True)
        config = "demo"
        if args.quick:
            config = str(project / "tiny.yaml")
            Path(config).write_text(yaml.safe_dump(TINY_CONFIG))
        home = project / ".dagster"
        env = {**os.environ, "LCP_CONFIG": config, "LCP_LAKE": str(project / "data_lake"),
               "LCP_MODELS": str(project / "models.yaml"), "DAGSTER_HOME": str(home), "LCP_PROJECT_DIR": str(REPO)}
        models = {"smollm2-135m", NEW_MODEL}
        steps = [
            ("demo (cold)", [("demo",)]),
            ("demo again, unchanged", [("demo",)]),
            (f"add-model {NEW_MODEL} + backfill", [("add-model", NEW_MODEL, "--backend", backend),
                                                   ("backfill", "--model", NEW_MODEL)]),
            ("demo again, after the new model", [("demo",)]),
        ]
        seen: set[str] = set()
        for label, commands in steps:
            seconds, lines = 0.0, []
            for command in commands:
                s, step_lines = lcp(env, *command)
                seconds, lines = seconds + s, lines + step_lines
                print(f"  lcp {' '.join(command)}: {s:.1f} s", *(f"    {line}" for line in step_lines), sep="\n",
                      flush=True)
            runs = snapshot(home)
            row = {"step": label, "seconds": round(seconds, 1), **describe({r: m for r, m in runs.items() if r not in seen},
                                                                           models), "cli_steps": lines}
            seen |= set(runs)
            report["steps"].append(row)
            print(f"{label}: {row['seconds']} s, {row['runs']} runs, {row['materializations']} materializations "
                  f"{row['by_owner']}, generated {row['generated']}", flush=True)
    report["load_after"] = load_average()

    print(f"\nconfig {report['config']}; new model {NEW_MODEL} on {backend}")
    print(f"{'step':<40} {'s':>7} {'runs':>5} {'mats':>5} {'generated':>9}  materialized (asset: count) / owners")
    for r in report["steps"]:
        print(f"{r['step']:<40} {r['seconds']:>7.1f} {r['runs']:>5} {r['materializations']:>5} {r['generated']:>9}  "
              f"{r['by_asset']}")
        print(f"{'':<70}{r['by_owner']}")
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
