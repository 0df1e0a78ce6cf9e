"""Scoring LongBench predictions: ``lcp import-predictions`` + ``lcp backfill`` against LongBench's own ``eval.py``.

    python benchmarks/longbench_eval.py [--pairs 3] [--data ../shared/data/longbench] [--eval-python PY]
                                        [--longbench-dir DIR | --longbench-git GIT_DIR] [--profile OUT.prof]
                                        [--json longbench_eval.json]

Inputs: the LongBench task files in ``--data`` (default ``../shared/data/longbench``: 12 tasks, 136 records,
each with a real model's ``reference_prediction``). Both sides score those predictions:

- **project** (A): a fresh project folder per run (the repository's ``dagster.yaml`` copied in), ``LCP_DATA``
  pointing at a folder whose ``longbench/`` holds the task files, then ``lcp import-predictions preds.jsonl
  --model ref --config longbench`` (``{"_id", "prediction"}`` per record) and ``lcp backfill --model ref
  --config longbench`` (sources and instances are built too: nothing is reused between runs);
- **eval.py** (B): LongBench's own ``LongBench/eval.py --model ref`` on ``pred/ref/<task>.jsonl``
  (``pred``, ``answers``, ``all_classes``, ``length``), run from the authors' files at run time (never copied
  into this repository), in its own virtual environment holding only what its metrics import: ``jieba``,
  ``rouge``, ``fuzzywuzzy`` (without ``python-Levenshtein``, as LongBench's requirements have it) and
  ``numpy``. The script creates that venv under /tmp when it is missing, or takes ``--eval-python``.

Where eval.py is found: ``--longbench-dir`` (the folder with ``eval.py`` and ``metrics.py``), else
``$LCP_OFFICIAL/THUDM+LongBench/LongBench`` or ``../shared/official/THUDM+LongBench/LongBench`` when they hold
it, else ``--longbench-git`` (a clone or bare mirror of THUDM/LongBench: the two files are read with ``git
show`` into a temp folder).

Whole processes, alternated A B A B (``--pairs``): wall and CPU (user + sys of the child and the children it
waited for, from ``wait4``); ratio per pair, median quoted. The 12 task scores are compared (ours rounded to
2 decimals as eval.py rounds). ``--profile OUT.prof`` then runs ``lcp backfill`` once more under cProfile
(wall-clock timer) on a fresh project after an import, and prints the top functions by self time and by
cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_info import code_under_test, loadavg  # benchmarks/run_info.py: the script's folder is on sys.path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared"
EVAL_VENV = Path("/tmp/longbench-eval-venv")
EVAL_REQUIREMENTS = ["jieba", "rouge", "fuzzywuzzy", "numpy"]  # what LongBench's metrics.py and eval.py import
LCP_VARS = ("LCP_LAKE", "LCP_MODELS", "DAGSTER_HOME", "LCP_CONFIG", "LCP_PROJECT_DIR", "LCP_EXECUTOR",
            "LCP_EXECUTOR_CONFIG")


def timed(cmd: list[str], cwd: Path, env: dict | None = None) -> dict:
    """Run ``cmd``; wall and CPU seconds of the whole process (and the children it waited for)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out.decode(errors='replace')[-4000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_mb": usage.ru_maxrss / 1024}


def find_eval(args, scratch: Path) -> tuple[Path, str]:
    """The folder holding LongBench's eval.py + metrics.py, and where they came from."""
    candidates = [Path(args.longbench_dir)] if args.longbench_dir else []
    if os.environ.get("LCP_OFFICIAL"):
        candidates.append(Path(os.environ["LCP_OFFICIAL"]) / "THUDM+LongBench" / "LongBench")
    candidates.append(SHARED / "official" / "THUDM+LongBench" / "LongBench")
    for c in candidates:
        if (c / "eval.py").is_file() and (c / "metrics.py").is_file():
            return c, str(c)
    git_dirs = [args.longbench_git] if args.longbench_git else []
    git_dirs.append(os.environ.get("LONGBENCH_GIT", ""))
    for g in filter(None, git_dirs):
        target = scratch / "LongBench"
        target.mkdir(parents=True, exist_ok=True)
        commit = subprocess.run(["git", "--git-dir", g, "rev-parse", "HEAD"], capture_output=True, text=True)
        ok = commit.returncode == 0
        for name in ("eval.py", "metrics.py"):
            show = subprocess.run(["git", "--git-dir", g, "show", f"HEAD:LongBench/{name}"], capture_output=True)
            ok = ok and show.returncode == 0
            if ok:
                (target / name).write_bytes(show.stdout)
        if ok:
            return target, f"{g} @ {commit.stdout.strip()[:12]}"
    raise SystemExit(
        "LongBench's eval.py not found: looked in " + ", ".join(str(c) for c in candidates)
        + "; pass --longbench-dir (a folder with eval.py and metrics.py) or --longbench-git (a clone of THUDM/LongBench)")


def eval_python(args) -> str:
    if args.eval_python:
        return args.eval_python
    py = EVAL_VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {EVAL_VENV} with {' '.join(EVAL_REQUIREMENTS)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(EVAL_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *EVAL_REQUIREMENTS], check=True)
    found = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('Levenshtein') is None)"],
                           capture_output=True, text=True).stdout.strip()
    if found != "True":
        raise SystemExit(f"{py}: python-Levenshtein is installed; LongBench's requirements do not list it and it "
                         "changes fuzzywuzzy's lcc scores: use a venv without it")
    return str(py)


def read_records(data: Path) -> dict[str, list[dict]]:
    tasks = {}
    for f in sorted(data.glob("*.jsonl")):
        if f.stem.endswith("_e"):
            continue
        tasks[f.stem] = [json.loads(line) for line in f.open(encoding="utf-8") if line.strip()]
    if not tasks:
        raise SystemExit(f"no LongBench task files in {data}")
    return tasks


def clean_env(data_root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LCP_VARS}
    env["LCP_DATA"] = str(data_root)
    return env


DAGSTER_YAML = REPO / "dagster.yaml"  # --dagster-yaml: another instance configuration, for a what-if


def fresh_project(root: Path, name: str) -> Path:
    project = root / name
    project.mkdir()
    shutil.copy(DAGSTER_YAML, project / "dagster.yaml")
    return project


def run_project(root: Path, name: str, preds: Path, env: dict, lcp: str) -> dict:
    project = fresh_project(root, name)
    imp = timed([lcp, "import-predictions", str(preds), "--model", "ref", "--config", "longbench"], project, env)
    back = timed([lcp, "backfill", "--model", "ref", "--config", "longbench"], project, env)
    return {"project": project, "import": imp, "backfill": back, "wall_s": imp["wall_s"] + back["wall_s"],
            "cpu_s": imp["cpu_s"] + back["cpu_s"]}


def project_scores(project: Path, env: dict, lcp: str) -> dict[str, float]:
    sql = ("select task, score from benchmark_scores where benchmark = 'longbench' and level = 'task' "
           "and model = 'ref'")
    res = subprocess.run([lcp, "query", "--format", "json", sql], cwd=project, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"lcp query failed: {res.stderr[-2000:]}")
    rows = json.loads(res.stdout)
    return {r["task"]: float(r["score"]) for r in rows}


def run_eval(py: str, eval_dir: Path, pred_root: Path) -> dict:
    result = pred_root / "pred" / "ref" / "result.json"
    result.unlink(missing_ok=True)
    run = timed([py, str(eval_dir / "eval.py"), "--model", "ref"], pred_root)
    run["scores"] = json.loads(result.read_text())
    return run


def profile_backfill(root: Path, preds: Path, env: dict, lcp: str, out: Path, top: int) -> dict:
    import pstats

    project = fresh_project(root, "profiled")
    timed([lcp, "import-predictions", str(preds), "--model", "ref", "--config", "longbench"], project, env)
    script = ("import cProfile, sys, time\n"
              "sys.argv = ['lcp', 'backfill', '--model', 'ref', '--config', 'longbench']\n"
              "from lc_pipeline.cli import main\n"
              "p = cProfile.Profile(time.perf_counter)\n"
              "try:\n    p.runcall(main)\nexcept SystemExit:\n    pass\n"
              f"p.dump_stats({str(out)!r})\n")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", script], cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"profiled backfill failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    stats = pstats.Stats(str(out))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, fn), (cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": fn, "where": f"{file}:{line}", "calls": nc, "self_s": tt, "cumulative_s": ct})
    by_self = sorted(rows, key=lambda r: -r["self_s"])[:top]
    by_cum = sorted(rows, key=lambda r: -r["cumulative_s"])[: top * 3]
    return {"wall_s": wall, "profiled_s": total, "by_self": by_self, "by_cumulative": by_cum, "file": str(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--data", default=str(SHARED / "data" / "longbench"))
    ap.add_argument("--eval-python", help="a python with LongBench's metric requirements (default: a venv in /tmp)")
    ap.add_argument("--longbench-dir", help="folder holding LongBench's eval.py and metrics.py")
    ap.add_argument("--longbench-git", help="git dir of a THUDM/LongBench clone or mirror (eval.py read from HEAD)")
    ap.add_argument("--profile", help="also profile one `lcp backfill` (cProfile, wall-clock) into this file")
    ap.add_argument("--profile-only", action="store_true", help="skip the timed pairs")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--dagster-yaml", help="the project's dagster.yaml (default: the repository's)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    lcp = str(Path(sys.executable).parent / "lcp")
    if args.dagster_yaml:
        global DAGSTER_YAML
        DAGSTER_YAML = Path(args.dagster_yaml).resolve()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    result: dict = {"commit": commit, "code": code_under_test(), "dagster_yaml": str(DAGSTER_YAML), "started": started, "load_start": loadavg(),
                    "cpus": os.cpu_count()}
    print(f"longbench_eval: commit {commit}, code {result['code']}, {started}, load {result['load_start']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="lcp-longbench-eval-") as tmp:
        tmp = Path(tmp)
        eval_dir, eval_from = find_eval(args, tmp / "official")
        result["eval_py"] = eval_from
        tasks = read_records(Path(args.data))
        n = sum(len(v) for v in tasks.values())
        print(f"{len(tasks)} tasks, {n} records; eval.py from {eval_from}", flush=True)
        # LCP_DATA/longbench/ = the task files; eval.py's pred/ref/<task>.jsonl; our predictions file.
        (tmp / "data").mkdir()
        (tmp / "data" / "longbench").symlink_to(Path(args.data).resolve())
        pred_dir = tmp / "peer" / "pred" / "ref"
        pred_dir.mkdir(parents=True)
        with open(tmp / "preds.jsonl", "w", encoding="utf-8") as ours:
            for task, recs in tasks.items():
                with open(pred_dir / f"{task}.jsonl", "w", encoding="utf-8") as theirs:
                    for r in recs:
                        ours.write(json.dumps({"_id": r["_id"], "prediction": r["reference_prediction"]}) + "\n")
                        theirs.write(json.dumps({"pred": r["reference_prediction"], "answers": r["answers"],
                                                 "all_classes": r["all_classes"], "length": r.get("length")},
                                                ensure_ascii=False) + "\n")
        env = clean_env(tmp / "data")
        py = eval_python(args)
        result["records"], result["tasks"] = n, len(tasks)
        if not args.profile_only:
            pairs = []
            for i in range(args.pairs):
                load = loadavg()
                a = run_project(tmp, f"project-{i}", tmp / "preds.jsonl", env, lcp)
                b = run_eval(py, eval_dir, tmp / "peer")
                if i == 0:
                    ours = project_scores(a["project"], env, lcp)
                    theirs = b["scores"]
                    same = {t: round(ours.get(t, float("nan")), 2) == theirs[t] for t in theirs}
                    result["scores"] = {t: {"project": ours.get(t), "eval_py": theirs[t], "equal": same[t]}
                                        for t in sorted(theirs)}
                    result["scores_equal"] = f"{sum(same.values())}/{len(same)}"
                    print(f"task scores equal to eval.py's (2 decimals): {result['scores_equal']}", flush=True)
                    for t in sorted(theirs):
                        print(f"  {t:22s} project {ours.get(t)!s:>20s}  eval.py {theirs[t]:6.2f}  "
                              f"{'equal' if same[t] else 'DIFFERENT'}")
                shutil.rmtree(a.pop("project"), ignore_errors=True)
                row = {"pair": i + 1, "load": load, "project": a, "eval_py": {k: b[k] for k in ("wall_s", "cpu_s")},
                       "wall_ratio": a["wall_s"] / b["wall_s"], "cpu_ratio": a["cpu_s"] / b["cpu_s"]}
                pairs.append(row)
                print(f"pair {i + 1}: project {a['wall_s']:.1f} s wall / {a['cpu_s']:.1f} s CPU (import "
                      f"{a['import']['wall_s']:.1f} / {a['import']['cpu_s']:.1f}, backfill {a['backfill']['wall_s']:.1f} / "
                      f"{a['backfill']['cpu_s']:.1f}); eval.py {b['wall_s']:.2f} / {b['cpu_s']:.2f}; ratio "
                      f"{row['wall_ratio']:.2f}x wall, {row['cpu_ratio']:.2f}x CPU; load {load}", flush=True)
            result["pairs"] = pairs
            result["median_wall_ratio"] = statistics.median(p["wall_ratio"] for p in pairs)
            result["median_cpu_ratio"] = statistics.median(p["cpu_ratio"] for p in pairs)
            print(f"median: {result['median_wall_ratio']:.2f}x wall, {result['median_cpu_ratio']:.2f}x CPU "
                  f"(goal <= 3x); load {loadavg()}", flush=True)
        if args.profile:
            prof = profile_backfill(tmp, tmp / "preds.jsonl", env, lcp, Path(args.profile).resolve(), args.top)
            result["profile"] = prof
            print(f"\nprofiled lcp backfill: {prof['wall_s']:.1f} s wall ({prof['profiled_s']:.1f} s profiled)")
            print("top by self time:")
            for r in prof["by_self"]:
                print(f"  {r['self_s']:7.2f} s {r['calls']:8d}  {r['function']}  {r['where']}")
            print("top by cumulative time:")
            for r in prof["by_cumulative"]:
                print(f"  {r['cumulative_s']:7.2f} s {r['calls']:8d}  {r['function']}  {r['where']}")
    result["load_end"] = loadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
