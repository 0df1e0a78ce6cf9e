"""End to end: the README's `make demo` from a fresh clone, install and run timed apart.

    python benchmarks/end_to_end.py [--quick] [--repo .] [--keep DIR] [--json end_to_end.json]

Clones the repository's committed HEAD into a temp folder (``git clone``: what a new user
gets), then times ``make install`` (venv, CPU torch, the package with its extras, SmolLM2's
package; pip's own caches are used as they are on this machine) and ``make demo`` (the
embedded default: build the benchmark, evaluate the built-in model, print the leaderboard),
and ``make demo`` once more (everything reused). The demo's own per-step durations
(``+ step: done in N s`` lines) are collected, so a slow run shows where its time went.
Goal: install + run <= 15 minutes. Run it without ``nice``: it is the user's wall clock.
``--quick``: the same, with the test suite's tiny config (1k/2k, 2 items) for the demo runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

TINY_CONFIG = {  # tests/conftest.py TINY_CONFIG
    "name": "tiny",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"], "base_lengths": ["1k"], "long_lengths": ["2k"], "depths": [0.0, 1.0],
    "items_per_length": 2, "retrieval_top_k": 40, "hard_negatives_per_item": 20, "max_new_tokens": 12,
    "models": ["smollm2-135m"],
}
STEP = re.compile(r"\+ (.+): done in ([\d.]+)s")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    output = proc.stdout + proc.stderr
    log.write_text(output)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}) after {seconds:.0f} s:\n{output[-4000:]}")
    return seconds, output


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the tests' tiny config for the demo runs")
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--keep", help="clone here and keep it (default: a temp dir, removed)")
    ap.add_argument("--json", default="end_to_end.json")
    args = ap.parse_args()
    # A clean environment for the clone: none of this project's settings leak in from the caller.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCP_", "DAGSTER_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/venv/" not in p)
    commit = subprocess.run(["git", "-C", args.repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "commit": commit, "config": "tiny" if args.quick else "demo (packaged)",
                    "load_before": load_average(), "phases": []}
    with tempfile.TemporaryDirectory(prefix="lcp-e2e-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        clone = root / "lc_pipeline"
        logs = root / "logs"
        logs.mkdir(exist_ok=True)
        if args.quick:
            (root / "tiny.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
            env["LCP_CONFIG"] = str(root / "tiny.yaml")
        phases = [("git clone", ["git", "clone", "-q", args.repo, str(clone)], root),
                  ("make install", ["make", "install"], clone),
                  ("make demo", ["make", "demo"], clone),
                  ("make demo (again)", ["make", "demo"], clone)]
        for name, cmd, cwd in phases:
            seconds, output = timed(cmd, cwd, env, logs / f"{name.replace(' ', '_').replace('(', '').replace(')', '')}.log")
            steps = [(m.group(1), float(m.group(2))) for m in STEP.finditer(output)]
            row = {"phase": name, "seconds": round(seconds, 1), "steps": steps,
                   "ran": len(steps), "reused": output.count(": up to date, reused")}
            report["phases"].append(row)
            print(f"{name}: {seconds:.1f} s" + (f" ({len(steps)} steps ran, {row['reused']} reused)" if "demo" in name
                                                 else ""), flush=True)
            for label, s in steps:
                print(f"    {label}: {s:.1f} s", flush=True)
    report["load_after"] = load_average()
    by = {p["phase"]: p["seconds"] for p in report["phases"]}
    report["install_plus_first_demo_s"] = round(by["git clone"] + by["make install"] + by["make demo"], 1)
    report["within_15_minutes"] = report["install_plus_first_demo_s"] <= 15 * 60

    print(f"\nfresh clone of {commit}, config {report['config']}")
    print(f"{'phase':<20} {'seconds':>8} {'min':>6}")
    for p in report["phases"]:
        print(f"{p['phase']:<20} {p['seconds']:>8.1f} {p['seconds'] / 60:>6.1f}")
    total = report["install_plus_first_demo_s"]
    print(f"{'clone+install+demo':<20} {total:>8.1f} {total / 60:>6.1f}  (goal <= 15 min: "
          f"{'met' if report['within_15_minutes'] else 'NOT met'})")
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
