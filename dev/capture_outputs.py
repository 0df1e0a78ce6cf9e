"""Capture what the packaged configs produce, to compare two versions of the code (issue 30: behaviour kept).

    python dev/capture_outputs.py --out DIR [--configs a,b,...] [--python-path ROOT] [--timeout S]
    python dev/capture_outputs.py --compare BASE_DIR NEW_DIR

Capture: for each packaged config (ROOT/lc_pipeline/configs/*.yaml), in a fresh project folder DIR/<config>/project
(its own lake, registry, Dagster home, local cache; LCP_DATA and LCP_OFFICIAL at ../shared as the tests use them,
offline), everything goes through the `lcp` CLI of the code at ROOT (PYTHONPATH=ROOT, the entry point read from
ROOT/pyproject.toml), so nothing here depends on where modules live:

- `lcp plan --config NAME` builds the instances (sources, retrieval, instances; nothing generated);
- a config that runs a benchmark as released (`released:`) is scored without a model: predictions made from its
  instances are imported (`lcp import-predictions`) as model `gold` (each record's first gold answer), `half`
  (gold for every other record in record-id order, WRONG otherwise) and `part` (partial()), then
  `lcp backfill --model gold|half|part`.
  Judge-scored tasks stay unjudged (no judge is configured), which the log records;
- every Parquet table of the lake (a folder's parquet files read together; the table is the folder's path under
  the lake, hive partitions included) is normalized: volatile columns dropped (VOLATILE), the project folder and
  the code root in strings replaced by <project> / <code>, rows sorted by the table's key column (KEYS) or by the
  whole row; then DIR/<config>/digest.json holds per table its rows, columns+dtypes and a sha256 per column, and
  DIR/<config>/tables/<table>.parquet the normalized table. DIR/<config>/commands.log has every command, its exit
  code, time and output tail. A config that cannot be built (missing data, a time-out) is recorded with the reason.

Compare: per config, table and column what differs (status, tables or columns added/removed, row counts, dtypes,
column hashes with a few example rows by key); exit 1 when anything differs, 0 when nothing does.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import polars as pl
import yaml

HERE = Path(__file__).resolve().parents[1]
SHARED = HERE.parent / "shared"
WRONG = "xq-capture-wrong-answer"
WORK = Path("/tmp/lcp-capture-work")  # where a config's project runs (one capture at a time: a lock file beside it)
# Columns that differ between two captures of the same code (found by capturing twice and comparing):
# {table name prefix ("" for every table): [columns]}.
VOLATILE: dict[str, list[str]] = {
    "": ["latency_s"],
}
# The column rows are sorted by and differences are shown by, first one present that is unique in the table.
KEYS = ("score_id", "generation_id", "instance_id", "passage_id", "fact_id", "rule_id", "item_id", "doc_id",
        "record_id", "sample_id")


def fail(msg: str) -> None:
    print(f"capture_outputs: {msg}", file=sys.stderr)
    sys.exit(2)


# --------------------------------------------------------------------------------------------------- capture


def lcp_entry(root: Path) -> list[str]:
    """The python command running ROOT's `lcp` ([project.scripts] lcp = "module:function")."""
    pyproject = root / "pyproject.toml"
    try:
        target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["lcp"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        fail(f"{pyproject}: no [project.scripts] lcp entry ({exc})")
    module, func = target.split(":")
    return [sys.executable, "-c", f"import sys; sys.argv[0] = 'lcp'; from {module} import {func}; {func}()"]


class Project:
    """One config's project folder and the log of the commands run in it."""

    def __init__(self, out: Path, config: str, root: Path, timeout: float):
        self.dir = out / config
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        # The project runs at the same absolute path in every capture (WORK/<config>), then moves to
        # DIR/<config>/project: ids hashed from a path (an imported model's predictions file is part of its
        # settings, so of generation_id, cache_key and score_id) then compare across captures.
        self.project = WORK / config
        if self.project.exists():
            shutil.rmtree(self.project)
        (self.project / ".dagster").mkdir(parents=True)
        if (root / "dagster.yaml").exists():
            shutil.copy(root / "dagster.yaml", self.project / "dagster.yaml")
        self.root, self.config, self.timeout = root, config, timeout
        self.lake = self.project / "lake"
        self.log = (self.dir / "commands.log").open("w")
        self.json: dict[str, str] = {}  # further outputs to digest: name -> JSON text
        self.entry = lcp_entry(root)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LCP_", "DAGSTER_", "OPENAI_"))}
        self.env.update(
            PYTHONPATH=str(root), LCP_PROJECT_DIR=str(self.project), LCP_LAKE=str(self.lake),
            LCP_MODELS=str(self.project / "models.yaml"), DAGSTER_HOME=str(self.project / ".dagster"),
            LCP_LOCAL_CACHE=str(self.project / "cache"), LCP_DATA=str(SHARED / "data"),
            LCP_OFFICIAL=str(SHARED / "official"), LCP_OFFLINE="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
            TOKENIZERS_PARALLELISM="false")

    def run(self, args: list[str], lcp: bool = True, stderr: bool = True) -> tuple[int, str, float]:
        """Run `lcp ARGS` (or ARGS) in the project folder; log command, exit code, seconds and output tail
        (stderr=False: the output is stdout alone, stderr goes to the log)."""
        cmd = self.entry + args if lcp else args
        shown = ("lcp " + " ".join(args)) if lcp else " ".join(args)
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=self.project, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if stderr else subprocess.PIPE, text=True, start_new_session=True)
        try:
            output, errors = proc.communicate(timeout=self.timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                output, errors = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                output, errors = proc.communicate()
            rc = "timeout"
            output = (output or "") + f"\n[killed after {self.timeout:.0f} s]"
        took = time.monotonic() - start
        tail = "\n".join(((errors or "") + (output or "")).splitlines()[-40:])
        self.log.write(f"$ {shown}\n[exit {rc}, {took:.1f} s]\n{tail}\n\n")
        self.log.flush()
        print(f"  {self.config}: {shown} -> exit {rc} ({took:.1f} s)", flush=True)
        return (rc if isinstance(rc, int) else 124), output, took


def missing_data(config_file: Path) -> list[str]:
    """The $LCP_DATA files and folders the config's sources name that are not in ../shared/data."""
    cfg = yaml.safe_load(config_file.read_text())
    missing = []
    for source in cfg.get("sources") or []:
        for value in source.values():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and v.startswith("$LCP_DATA/"):
                    path = SHARED / "data" / v.removeprefix("$LCP_DATA/")
                    if not path.exists():
                        missing.append(str(path))
    return sorted(set(missing))


def predictions(lake: Path) -> dict[str, list[dict]]:
    """Predictions of models gold, half and part from the lake's instances (one per record id)."""
    frames = [pl.read_parquet(p, columns=["record_id", "answers"]) for p in sorted(lake.glob("instances/*/*.parquet"))]
    if not frames:
        return {}
    rows = pl.concat(frames).filter(pl.col("record_id").is_not_null()).unique("record_id").sort("record_id")
    gold, half, part = [], [], []
    for i, (rid, answers) in enumerate(rows.iter_rows()):
        answer = answers[0] if answers else ""
        gold.append({"_id": rid, "prediction": answer})
        half.append({"_id": rid, "prediction": answer if i % 2 == 0 else WRONG})
        part.append({"_id": rid, "prediction": partial(answer)})
    return {"gold": gold, "half": half, "part": part}


def partial(answer: str) -> str:
    """A prediction with partial credit on overlap metrics (F1, ROUGE, edit similarity): the first half of the
    gold answer's words (of its characters when it has one word), then two words of ours."""
    words = answer.split()
    head = " ".join(words[: (len(words) + 1) // 2]) if len(words) > 1 else answer[: (len(answer) + 1) // 2]
    return f"{head} plus more"


def packaged_configs(root: Path) -> dict[str, Path]:
    """The packaged configs of the code at ROOT: lc_pipeline/configs/*.yaml (else any configs/ folder under
    lc_pipeline, should a move have put them elsewhere)."""
    files = sorted((root / "lc_pipeline" / "configs").glob("*.yaml")) or sorted(
        (root / "lc_pipeline").rglob("configs/*.yaml"))
    return {f.stem: f for f in files}


def capture_config(out: Path, name: str, config_file: Path, root: Path, timeout: float) -> dict:
    p = Project(out, name, root, timeout)
    started = time.monotonic()
    status: dict = {"config": name, "code_root": str(root), "steps": []}
    rc, output, _ = p.run([sys.executable, "-c", "import lc_pipeline; print(lc_pipeline.__file__)"], lcp=False)
    status["lc_pipeline"] = output.strip().replace(str(root), "<code>")
    if rc != 0 or not output.strip().startswith(str(root)):
        status.update(state="error", reason=f"lc_pipeline is not imported from {root}: {output.strip()}")
        return finish(p, status, started)
    missing = missing_data(config_file)
    if missing:
        status.update(state="missing_data", reason="not in ../shared/data: " + ", ".join(
            m.replace(str(SHARED), "../shared") for m in missing))
        return finish(p, status, started)
    rc, output, took = p.run(["plan", "--config", name, "--format", "json"])
    status["steps"].append({"step": "plan", "exit": rc, "seconds": round(took, 1)})
    if rc != 0:
        lines = output.strip().splitlines()
        errors = [ln for ln in lines if ln.startswith("Error")]
        status.update(state="build_failed" if rc != 124 else "build_timeout",
                      reason="\n".join(errors or lines[-3:]).replace(str(p.project), "<project>"))
        return finish(p, status, started)
    cfg = yaml.safe_load(config_file.read_text()) or {}
    released = "released" in cfg
    status["state"] = "built"
    if not released:
        status["scoring"] = "not scored: a constructed benchmark, scored only by generating with a model"
    else:
        preds = predictions(p.lake)
        status["scoring"] = {}
        for model, rows in preds.items():
            file = p.dir / f"{model}.jsonl"
            file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            rc, output, took = p.run(["import-predictions", str(file), "--model", model, "--config", name])
            status["steps"].append({"step": f"import-predictions {model}", "exit": rc, "seconds": round(took, 1)})
            if rc == 0:
                rc, output, took = p.run(["backfill", "--model", model, "--config", name])
                status["steps"].append({"step": f"backfill {model}", "exit": rc, "seconds": round(took, 1)})
            status["scoring"][model] = {"records": len(rows), "exit": rc,
                                        "unjudged": [line.strip() for line in output.splitlines()
                                                     if "judge" in line.lower()][:5]}
        status["state"] = "scored" if all(v["exit"] == 0 for v in status["scoring"].values()) else "score_failed"
    if (cfg.get("minilongbench") or {}).get("scores"):
        minilongbench(p, cfg, status)
    return finish(p, status, started)


def minilongbench(p: Project, cfg: dict, status: dict) -> None:
    """A config with `minilongbench: scores:` also runs `lcp minilongbench fit` with the authors' released IRT
    parameters and subset (no refit: seconds) and `estimate` in every mode on the training models' scores; the
    fit folder's Parquet files are digested as tables (minilongbench_fit/<file>), its JSON and each estimate's
    JSON output as json entries."""
    scores = cfg["minilongbench"]["scores"].replace("$LCP_DATA", str(SHARED / "data"))
    fit = p.project / "minilongbench_fit"
    args = ["minilongbench", "fit", "--scores", scores, "--irt", "released", "--out", str(fit)]
    if (cfg.get("released") or {}).get("subset"):
        args += ["--subset", cfg["released"]["subset"]]
    rc, output, took = p.run(args)
    status["steps"].append({"step": "minilongbench fit", "exit": rc, "seconds": round(took, 1)})
    p.json = {f"minilongbench_fit/{f.name}": f.read_text() for f in sorted(fit.glob("*.json"))}
    if rc != 0:
        return
    for mode in ("predict", "direct", "weighted", "blend"):
        rc, output, took = p.run(["minilongbench", "estimate", "--model-dir", str(fit), "--scores", scores,
                                  "--mode", mode], stderr=False)
        status["steps"].append({"step": f"minilongbench estimate {mode}", "exit": rc, "seconds": round(took, 1)})
        p.json[f"minilongbench_estimate/{mode}"] = output if rc == 0 else json.dumps(f"exit {rc}")


# `lcp score` on records of our own (capture "_metrics"): every LongBench task's metric and every LV-Eval dataset's
# (both variants) on exact, partial, multi-gold, wrong, empty, multi-line, Chinese, code and label predictions.
LONGBENCH_TASKS = ("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
                   "dureader", "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht",
                   "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p")
LVEVAL_DATASETS = ("hotpotwikiqa_mixup", "loogle_SD_mixup", "loogle_CR_mixup", "loogle_MIR_mixup",
                   "multifieldqa_en_mixup", "multifieldqa_zh_mixup", "lic_mixup", "cmrc_mixup", "dureader_mixup",
                   "factrecall_en", "factrecall_zh", "keyword_recall_en", "keyword_recall_zh")
CLASSES = ["Location", "Person", "Number", "Description"]
METRIC_RECORDS = [
    ("exact", "The red lighthouse", ["the red lighthouse"], "red lighthouse"),
    ("partial", "a red house near the harbour wall", ["the red lighthouse by the harbour"], "lighthouse harbour"),
    ("multi_gold", "Oslo, I think", ["Bergen", "Oslo"], "Oslo"),
    ("wrong", "seventeen", ["forty-two"], "forty-two"),
    ("empty", "", ["forty-two"], "forty-two"),
    ("multiline", "Paragraph 3\nand then some other text", ["Paragraph 3"], "Paragraph 3"),
    ("count", "There are 7 unique paragraphs, not 8.", ["7"], "7"),
    ("zh_exact", "北京大学图书馆", ["北京大学图书馆"], "图书馆"),
    ("zh_partial", "他在北京的一所大学读书", ["他在上海的一所大学工作"], "上海"),
    ("zh_para", "答案是段落5", ["段落5"], "段落5"),
    ("code", "    return total + value\n    }", ["    return total + values[i];"], "return"),
    ("label", "Location question\nPerson", ["Location"], "Location"),
    ("summary", "The council met twice and agreed to repair the bridge before winter.",
     ["In two meetings the council agreed the bridge would be repaired before the winter."], "bridge repaired"),
]

# Passage retrieval golds name a paragraph: records of their own ({task: records}).
PARAGRAPH_RECORDS = {
    task: [("exact", f"{word}3", [f"{word}3"]), ("sentence", f"The answer is {word}12.", [f"{word}12"]),
           ("two", f"{word}3 or {word}5", [f"{word}5"]), ("wrong", f"{word}4", [f"{word}9"]),
           ("empty", "", [f"{word}2"]), ("no_number", "the third one", [f"{word}3"])]
    for task, word in (("passage_retrieval_en", "Paragraph "), ("passage_retrieval_zh", "段落"))
}


def records_file(path: Path, records) -> Path:
    path.write_text("".join(json.dumps({"_id": r[0], "prediction": r[1], "answers": r[2], "all_classes": CLASSES,
                                        "answer_keywords": r[3] if len(r) > 3 else r[2][0]}, ensure_ascii=False)
                            + "\n" for r in records))
    return path


def capture_metrics(out: Path, root: Path, timeout: float) -> dict:
    p = Project(out, "_metrics", root, timeout)
    started = time.monotonic()
    files = {task: records_file(p.dir / f"records_{task}.jsonl", recs) for task, recs in PARAGRAPH_RECORDS.items()}
    general = records_file(p.dir / "records.jsonl", METRIC_RECORDS)
    status: dict = {"config": "_metrics", "code_root": str(root), "steps": [], "state": "scored"}
    runs = [(f"longbench:{t}", None) for t in LONGBENCH_TASKS] + [
        (f"lveval:{d}", v) for d in LVEVAL_DATASETS for v in ("code", "paper")]
    for metric, variant in runs:
        args = ["score", str(files.get(metric.partition(":")[2], general)), "--metric", metric] + (["--variant", variant] if variant else [])
        rc, output, took = p.run(args, stderr=False)
        name = metric + (f"@{variant}" if variant else "")
        status["steps"].append({"step": f"score {name}", "exit": rc, "seconds": round(took, 1)})
        try:
            scores = [json.loads(line) for line in output.splitlines() if line.strip()]
        except json.JSONDecodeError:
            scores = None
        p.json[f"metrics/{name}"] = json.dumps(scores if rc == 0 and scores is not None else f"exit {rc}")
        if rc != 0:
            status["state"] = "score_failed"
    return finish(p, status, started)


def finish(p: Project, status: dict, started: float) -> dict:
    status["seconds"] = round(time.monotonic() - started, 1)
    status["tables"] = digest_lake(p) if p.lake.exists() else {}
    status["tables"].update(digest_files(p))
    status["json"] = digest_json(p)
    p.log.close()
    shutil.move(p.project, p.dir / "project")
    (p.dir / "digest.json").write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")
    print(f"{status['config']}: {status['state']} in {status['seconds']} s, {len(status['tables'])} tables"
          + (f" ({status['reason'][:200]})" if status.get("reason") else ""), flush=True)
    return status


# ---------------------------------------------------------------------------------------------------- digest


def volatile(table: str) -> list[str]:
    return sorted({c for prefix, cols in VOLATILE.items() if table.startswith(prefix) for c in cols})


def canonical(value, subs: list[tuple[str, str]]) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    for old, new in subs:
        text = text.replace(old, new)
    return text


def normalize(frame: pl.DataFrame, table: str, subs: list[tuple[str, str]]) -> tuple[pl.DataFrame, str | None]:
    """Volatile columns dropped, paths in strings replaced, rows sorted by the key (or the whole row)."""
    frame = frame.drop([c for c in volatile(table) if c in frame.columns])
    for col, dtype in frame.schema.items():
        for old, new in subs:
            if dtype == pl.String:
                frame = frame.with_columns(pl.col(col).str.replace_all(old, new, literal=True))
            elif dtype == pl.List(pl.String):
                frame = frame.with_columns(pl.col(col).list.eval(pl.element().str.replace_all(old, new, literal=True)))
    key = next((k for k in KEYS if k in frame.columns and frame[k].null_count() == 0 and frame[k].is_unique().all()),
               None)
    if key is not None:
        return frame.sort(key), key
    rows = [canonical(r, subs) for r in frame.iter_rows()]
    order = sorted(range(len(rows)), key=rows.__getitem__)
    return frame[order] if len(frame) else frame, None


def digest_lake(p: Project) -> dict:
    tables: dict[str, list[Path]] = {}
    for f in sorted(p.lake.rglob("*.parquet")):
        tables.setdefault(f.parent.relative_to(p.lake).as_posix(), []).append(f)
    return digest_tables(p, tables)


def digest_files(p: Project) -> dict:
    """Parquet outputs outside the lake (`lcp minilongbench fit`'s folder), one table per file."""
    fit = p.project / "minilongbench_fit"
    return digest_tables(p, {f"minilongbench_fit/{f.stem}": [f] for f in sorted(fit.glob("*.parquet"))})


def digest_json(p: Project) -> dict:
    """Each JSON output: its sha256 (paths replaced, keys sorted) and a copy in json/ for compare to show."""
    subs = [(str(p.project), "<project>"), (str(p.root), "<code>")]
    out = {}
    store = p.dir / "json"
    for name, text in sorted(p.json.items()):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = {"unparsable output": text[-2000:]}
        canon = canonical(value, subs)
        store.mkdir(exist_ok=True)
        (store / (name.replace("/", "__") + ".json")).write_text(canon)
        out[name] = hashlib.sha256(canon.encode()).hexdigest()
    return out


def digest_tables(p: Project, tables: dict[str, list[Path]]) -> dict:
    subs = [(str(p.project), "<project>"), (str(p.root), "<code>")]
    out = {}
    store = p.dir / "tables"
    store.mkdir(exist_ok=True)
    for table, files in sorted(tables.items()):
        try:
            frame = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        except (OSError, pl.exceptions.PolarsError) as exc:  # an unreadable table is a finding, recorded
            out[table] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        frame, key = normalize(frame, table, subs)
        frame.write_parquet(store / (table.replace("/", "__") + ".parquet"))
        out[table] = {
            "files": len(files), "rows": len(frame), "key": key, "dropped": [c for c in volatile(table)],
            "columns": {c: str(t) for c, t in frame.schema.items()},
            "sha256": {c: hashlib.sha256("\n".join(canonical(v, subs) for v in frame[c].to_list()).encode())
                       .hexdigest() for c in frame.columns},
        }
    return out


# --------------------------------------------------------------------------------------------------- compare


def short(value, n: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= n else text[:n] + f"... ({len(text)} chars)"


def examples(base_dir: Path, new_dir: Path, table: str, col: str, key: str | None, n: int = 3) -> list[str]:
    name = table.replace("/", "__") + ".parquet"
    try:
        a, b = pl.read_parquet(base_dir / "tables" / name), pl.read_parquet(new_dir / "tables" / name)
    except OSError as exc:
        return [f"(normalized table unreadable: {exc})"]
    if key and col == key:
        only_a, only_b = set(a[key].to_list()) - set(b[key].to_list()), set(b[key].to_list()) - set(a[key].to_list())
        return ([f"{key} only in base: {short(sorted(only_a)[:n])} ({len(only_a)})"] if only_a else []) + (
            [f"{key} only in new: {short(sorted(only_b)[:n])} ({len(only_b)})"] if only_b else [])
    if key and key in a.columns and key in b.columns:
        joined = a.select(key, col).join(b.select(key, col), on=key, how="full", suffix="__new", coalesce=True)
        lines = []
        for row in joined.iter_rows(named=True):
            if canonical(row[col], []) != canonical(row[col + "__new"], []):
                lines.append(f"{key}={row[key]}: {short(row[col])} -> {short(row[col + '__new'])}")
                if len(lines) == n:
                    break
        return lines
    lines = []
    for i, (x, y) in enumerate(zip(a[col].to_list(), b[col].to_list(), strict=False)):
        if canonical(x, []) != canonical(y, []):
            lines.append(f"row {i} (no key; sorted by the whole row): {short(x)} -> {short(y)}")
            if len(lines) == n:
                break
    return lines


def json_examples(base_dir: Path, new_dir: Path, name: str, n: int = 5) -> list[str]:
    """The first leaves (dotted paths) whose values differ between the two JSON outputs."""
    file = name.replace("/", "__") + ".json"
    a, b = (json.loads((d / "json" / file).read_text()) for d in (base_dir, new_dir))
    out: list[str] = []

    def walk(x, y, path: str) -> None:
        if len(out) >= n:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                walk(x.get(k, "<absent>"), y.get(k, "<absent>"), f"{path}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y, strict=True)):
                walk(u, v, f"{path}[{i}]")
        elif x != y:
            out.append(f"{path or '.'}: {short(x)} -> {short(y)}")

    walk(a, b, "")
    return out


def compare(base: Path, new: Path) -> int:
    differ = 0
    names = sorted({d.name for d in base.iterdir() if (d / "digest.json").exists()}
                   | {d.name for d in new.iterdir() if (d / "digest.json").exists()})
    for name in names:
        fa, fb = base / name / "digest.json", new / name / "digest.json"
        if not fa.exists() or not fb.exists():
            print(f"[{name}] captured only in {'base' if fa.exists() else 'new'}")
            differ += 1
            continue
        a, b = json.loads(fa.read_text()), json.loads(fb.read_text())
        lines = []
        if a.get("state") != b.get("state"):
            lines.append(f"state: {a.get('state')} -> {b.get('state')} ({b.get('reason', '')[:300]})")
        for model in sorted(set(a.get("scoring") or {}) | set(b.get("scoring") or {})
                            if isinstance(a.get("scoring"), dict) and isinstance(b.get("scoring"), dict) else []):
            sa, sb = a["scoring"].get(model, {}), b["scoring"].get(model, {})
            if (sa.get("records"), sa.get("exit")) != (sb.get("records"), sb.get("exit")):
                lines.append(f"scoring {model}: records/exit {sa.get('records')}/{sa.get('exit')} -> "
                             f"{sb.get('records')}/{sb.get('exit')}")
        ja, jb = a.get("json", {}), b.get("json", {})
        for j in sorted(set(ja) | set(jb)):
            if ja.get(j) != jb.get(j):
                lines.append(f"json {j}: " + ("added" if j not in ja else "removed" if j not in jb else "differs"))
                if j in ja and j in jb:
                    lines += ["    " + e for e in json_examples(base / name, new / name, j)]
        ta, tb = a.get("tables", {}), b.get("tables", {})
        for t in sorted(set(ta) - set(tb)):
            lines.append(f"table removed: {t} ({ta[t].get('rows')} rows)")
        for t in sorted(set(tb) - set(ta)):
            lines.append(f"table added: {t} ({tb[t].get('rows')} rows)")
        for t in sorted(set(ta) & set(tb)):
            x, y = ta[t], tb[t]
            if "error" in x or "error" in y:
                if x.get("error") != y.get("error"):
                    lines.append(f"{t}: unreadable {x.get('error')} -> {y.get('error')}")
                continue
            if x["rows"] != y["rows"]:
                lines.append(f"{t}: rows {x['rows']} -> {y['rows']}")
            ca, cb = x["columns"], y["columns"]
            if set(ca) - set(cb):
                lines.append(f"{t}: columns removed {sorted(set(ca) - set(cb))}")
            if set(cb) - set(ca):
                lines.append(f"{t}: columns added {sorted(set(cb) - set(ca))}")
            for c in sorted(set(ca) & set(cb)):
                if ca[c] != cb[c]:
                    lines.append(f"{t}.{c}: dtype {ca[c]} -> {cb[c]}")
                if x["sha256"][c] != y["sha256"][c]:
                    lines.append(f"{t}.{c}: values differ")
                    key = x["key"] if x["key"] == y["key"] else None
                    lines += ["    " + e for e in examples(base / name, new / name, t, c, key)]
        if lines:
            differ += 1
            print(f"[{name}] {len([ln for ln in lines if not ln.startswith('    ')])} differences")
            print("\n".join("  " + ln for ln in lines))
        else:
            print(f"[{name}] same ({a.get('state')}, {len(ta)} tables, {len(a.get('json', {}))} json outputs)")
    print(f"{differ} of {len(names)} configs differ")
    return 1 if differ else 0


# ------------------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="the capture folder (one subfolder per config)")
    ap.add_argument("--configs", help="comma-separated packaged config names (default: all)")
    ap.add_argument("--python-path", type=Path, default=HERE, help="the code root to run (default: this checkout)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one lcp command may take")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BASE_DIR", "NEW_DIR"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        ap.error("--out DIR or --compare BASE_DIR NEW_DIR")
    root = args.python_path.resolve()
    available = packaged_configs(root)
    names = args.configs.split(",") if args.configs else [*sorted(available), "_metrics"]
    unknown = [n for n in names if n not in available and n != "_metrics"]
    if unknown:
        fail(f"no packaged config {unknown} in {root}/lc_pipeline/configs (there: {sorted(available)})")
    args.out.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    lock = (WORK.parent / (WORK.name + ".lock")).open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fail(f"another capture is running (it holds {lock.name}): captures run one at a time in {WORK}")
    for name in names:
        if name == "_metrics":
            capture_metrics(args.out.resolve(), root, args.timeout)
        else:
            capture_config(args.out.resolve(), name, available[name], root, args.timeout)


if __name__ == "__main__":
    main()
