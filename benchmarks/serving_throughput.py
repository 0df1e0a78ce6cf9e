"""The openai backend's request rate against the raw ``openai.AsyncOpenAI`` client, same prompts, same server.

    python benchmarks/serving_throughput.py [--concurrency 1,8,32] [--pairs 3] [--requests 1000]
                                            [--engines null,simulated] [--json serving_throughput.json]
    python benchmarks/serving_throughput.py --whole-step [--concurrency 8] [--pairs 3]   # lcp add-model + backfill

Two local engines, each a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 in a child process (this script with
``--serve``), answering ``/v1/chat/completions`` and ``/v1/completions`` with a fixed reply and its ``usage``
(HTTP/1.1 keep-alive, ``TCP_NODELAY``, headers and body in one write), and counting requests with the time of
the first and the last (``GET /stats``, ``POST /reset``):

- **null**: answers at once: the client side's own cost per request is what is measured;
- **simulated**: each request sleeps U(0, ``--max-delay``) s (default 0.2) on its own thread, as a server that
  batches continuously would answer; a client keeping C requests in flight gets C / mean delay requests/s
  ("theory"), and its "busy" share is the rate it reached over that.

Sides, alternated A B A B (``--pairs`` pairs per engine and C, ratio per pair, median quoted):

- **pipeline**: ``plan_partition`` on LongBench-format hotpotqa instances (two short invented passages and a
  "when was X founded" question each; ``benchmark: longbench``, ``task: hotpotqa``), then ``generate_partition``
  with ``OpenAIGenerator`` (``api: chat``, ``max_concurrency: C``, tokenizer ``--tokenizer``, default
  tiktoken cl100k) and a real ``GenerationCheckpoint`` in a fresh temp folder, then ``compact()`` as the asset
  does. This is the request phase the backend controls (no Dagster, no CLI start-up).
- **raw**: the same prompt texts through ``AsyncOpenAI`` with an ``asyncio.Semaphore(C)``, the same request
  fields (model, messages, max_tokens, temperature 0, seed 0, penalties 0).

Rates: requests/s between the server's first and last request (the request phase), and over the side's whole
wall time (pipeline: plan excluded, generate_partition + compact included).

``--whole-step`` runs the packaged ``longbench`` config end to end instead: a project folder with the same
records as ``$LCP_DATA/longbench/hotpotqa.jsonl``, instances built once, then per run a copy of it, ``lcp
add-model null-cC --backend openai ... --max-concurrency C`` and ``lcp backfill --model null-cC --config
longbench``; its request rate (server) against the raw client's, alternated the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from run_info import code_under_test, loadavg  # benchmarks/run_info.py: the script's folder is on sys.path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ANSWER = "Paris"
MAX_NEW_TOKENS = 32  # LongBench hotpotqa's answer length


# ----------------------------------------------------------------------------------------------- the engines


class EngineServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address, max_delay_s: float, seed: int = 0):
        super().__init__(address, EngineHandler)
        self.max_delay_s = max_delay_s
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.count, self.first, self.last = 0, None, None

    def record(self) -> float:
        """Count one request; its delay (U(0, max_delay))."""
        now = time.time()
        with self.lock:
            self.count += 1
            self.first = now if self.first is None else self.first
            self.last = now
            return self.rng.uniform(0.0, self.max_delay_s) if self.max_delay_s > 0 else 0.0


class EngineHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # TCP_NODELAY: no delayed-ACK stall between requests

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        head = (f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"Connection: keep-alive\r\n\r\n").encode()
        self.wfile.write(head + body)  # headers and body in one write
        self.wfile.flush()

    def do_GET(self) -> None:
        server: EngineServer = self.server  # type: ignore[assignment]
        if self.path != "/stats":
            return self._send(404, {"error": "not found"})
        with server.lock:
            self._send(200, {"count": server.count, "first": server.first, "last": server.last})

    def do_POST(self) -> None:
        server: EngineServer = self.server  # type: ignore[assignment]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/reset":
            server.reset()
            return self._send(200, {"ok": True})
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            return self._send(404, {"error": "not found"})
        delay = server.record()
        if delay:
            time.sleep(delay)
        request = json.loads(raw or b"{}")
        usage = {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}
        if self.path == "/v1/chat/completions":
            reply = {"id": "chatcmpl-null", "object": "chat.completion", "created": 0, "model": request.get("model", "null"),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": ANSWER}}], "usage": usage}
        else:
            reply = {"id": "cmpl-null", "object": "text_completion", "created": 0, "model": request.get("model", "null"),
                     "choices": [{"index": 0, "finish_reason": "stop", "text": ANSWER, "logprobs": None}],
                     "usage": usage}
        self._send(200, reply)


def serve(port: int, max_delay_s: float) -> None:
    server = EngineServer(("127.0.0.1", port), max_delay_s)
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.2)


class Engine:
    """An engine in a child process (its own interpreter: its threads don't share the client's GIL)."""

    def __init__(self, max_delay_s: float):
        self.max_delay_s = max_delay_s
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--max-delay", str(max_delay_s)],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the engine did not start (said {line!r})")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", data=b"{}", method="POST"), timeout=10).read()

    def stats(self) -> dict:
        return json.loads(urllib.request.urlopen(self.url + "/stats", timeout=10).read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ------------------------------------------------------------------------------------------------ the work


def records(n: int, seed: int = 7) -> list[dict]:
    """LongBench-format hotpotqa records: two short invented passages and a 'when was X founded' question."""
    rng = random.Random(seed)
    words = ["Amber", "Birch", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Iris", "Juniper", "Kestrel",
             "Linden", "Meadow", "North", "Onyx", "Pine", "Quarry", "Raven", "Sable", "Thistle", "Umber", "Vale"]
    kinds = ["Society", "Museum", "Library", "Orchestra", "Institute", "Company", "Guild", "Observatory"]
    cities = ["Lisbon", "Tartu", "Ghent", "Bergen", "Porto", "Kraków", "Lyon", "Turku", "Graz", "Bilbao"]
    out = []
    for i in range(n):
        name = f"{rng.choice(words)} {rng.choice(words)} {rng.choice(kinds)} {i}"
        other = f"{rng.choice(words)} {rng.choice(kinds)} of {rng.choice(cities)}"
        year, city = rng.randint(1700, 2000), rng.choice(cities)
        passages = [
            f"Passage 1:\n{name}\nThe {name} was founded in {year} in {city}. It moved to a larger building "
            f"in {year + rng.randint(5, 60)} and is known for its public lectures.",
            f"Passage 2:\n{other}\nThe {other} was founded in {rng.randint(1700, 2000)}. It works closely with "
            f"the {name} on exhibitions.",
        ]
        if rng.random() < 0.5:
            passages.reverse()
        out.append({"_id": f"serving-{i:05d}", "dataset": "hotpotqa", "language": "en", "length": 60,
                    "context": "\n\n".join(passages), "input": f"When was the {name} founded?",
                    "answers": [str(year)], "all_classes": None})
    return out


def prompt_of(record: dict) -> str:
    return (f"Read the passages and answer the question with only the answer.\n\n{record['context']}\n\n"
            f"Question: {record['input']}\nAnswer:")


def instances_frame(recs: list[dict]):
    import polars as pl

    return pl.DataFrame({
        "instance_id": [r["_id"] for r in recs],
        "benchmark": ["longbench"] * len(recs),
        "task": ["hotpotqa"] * len(recs),
        "prompt": [prompt_of(r) for r in recs],
        "context": [r["context"] for r in recs],
        "max_new_tokens": [MAX_NEW_TOKENS] * len(recs),
        "record_id": [r["_id"] for r in recs],
    })


def model_spec(base_url: str, concurrency: int, tokenizer: str):
    from lc_pipeline.generate.registry import ModelSpec

    return ModelSpec(slug=f"null-c{concurrency}", backend="openai", model_id="null", gguf_file=None,
                     max_model_len=8192, api="chat", base_url=base_url + "/v1", max_concurrency=concurrency,
                     tokenizer=tokenizer, max_retries=0, request_timeout_s=120.0)


def run_pipeline(engine: Engine, instances, concurrency: int, tokenizer: str, generator_cache: dict) -> dict:
    from lc_pipeline.generate import partition
    from lc_pipeline.generate.checkpoint import GenerationCheckpoint
    from lc_pipeline.generate.openai_backend import OpenAIGenerator

    spec = model_spec(engine.url, concurrency, tokenizer)
    key = (engine.url, concurrency)
    if key not in generator_cache:
        generator_cache[key] = OpenAIGenerator(spec)
        generator_cache[key].load()  # the tokenizer: one-time, not the request phase
    generator = generator_cache[key]
    plan = partition.plan_partition(instances, spec, generator)
    kwargs = {}
    params = inspect.signature(partition.generate_partition).parameters
    if "chunk" in params and hasattr(partition, "chunk_size"):
        kwargs["chunk"] = partition.chunk_size(spec)
    with tempfile.TemporaryDirectory(prefix="lcp-serving-") as tmp:
        store = GenerationCheckpoint(Path(tmp) / "store")
        engine.reset()
        t0 = time.perf_counter()
        outcome = partition.generate_partition(plan, generator, store, **kwargs)
        t_gen = time.perf_counter() - t0
        store.compact()
        wall = time.perf_counter() - t0
    stats = engine.stats()
    n = len(plan.items)
    if outcome.generated != n or stats["count"] != n:
        raise RuntimeError(f"pipeline: {outcome.generated} generated, {stats['count']} requests seen, {n} planned")
    if set(outcome.rows["output"].to_list()) != {ANSWER}:
        raise RuntimeError("pipeline: an output is not the engine's reply")
    return {"requests": n, "request_phase_s": stats["last"] - stats["first"], "generate_s": t_gen, "wall_s": wall,
            "chunk": kwargs.get("chunk")}


async def _raw(base_url: str, prompts: list[str], concurrency: int) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="no-key-needed", max_retries=0, timeout=120.0)
    limit = asyncio.Semaphore(concurrency)

    async def one(text: str) -> str:
        async with limit:
            resp = await client.chat.completions.create(
                model="null", messages=[{"role": "user", "content": text}], max_tokens=MAX_NEW_TOKENS,
                temperature=0.0, seed=0, frequency_penalty=0.0, presence_penalty=0.0)
            return resp.choices[0].message.content or ""

    try:
        outputs = await asyncio.gather(*(one(p) for p in prompts))
    finally:
        await client.close()
    if set(outputs) != {ANSWER}:
        raise RuntimeError("raw: an output is not the engine's reply")


def run_raw(engine: Engine, prompts: list[str], concurrency: int) -> dict:
    engine.reset()
    t0 = time.perf_counter()
    asyncio.run(_raw(engine.url, prompts, concurrency))
    wall = time.perf_counter() - t0
    stats = engine.stats()
    if stats["count"] != len(prompts):
        raise RuntimeError(f"raw: {stats['count']} requests seen, {len(prompts)} sent")
    return {"requests": len(prompts), "request_phase_s": stats["last"] - stats["first"], "wall_s": wall}


def rps(run: dict, what: str = "request_phase_s") -> float:
    return run["requests"] / run[what] if run[what] > 0 else float("inf")


def measure(engine: Engine, kind: str, concurrency: int, n: int, pairs: int, tokenizer: str, cache: dict) -> dict:
    recs = records(n)
    instances = instances_frame(recs)
    prompts = instances["prompt"].to_list()
    # Warm-up (not counted): imports, the tokenizer, the first connections.
    run_pipeline(engine, instances.head(min(n, 2 * concurrency)), concurrency, tokenizer, cache)
    run_raw(engine, prompts[: min(n, 2 * concurrency)], concurrency)
    rows = []
    for i in range(pairs):
        load_before = loadavg()
        pipe = run_pipeline(engine, instances, concurrency, tokenizer, cache)  # A
        raw = run_raw(engine, prompts, concurrency)  # B
        row = {"pair": i + 1, "load": load_before, "pipeline_rps": rps(pipe), "pipeline_wall_rps": rps(pipe, "wall_s"),
               "raw_rps": rps(raw), "raw_wall_rps": rps(raw, "wall_s"), "pipeline": pipe, "raw": raw}
        row["ratio"] = row["pipeline_rps"] / row["raw_rps"]
        row["wall_ratio"] = row["pipeline_wall_rps"] / row["raw_wall_rps"]
        rows.append(row)
        print(f"  {kind:9s} C={concurrency:<3d} pair {i + 1}: pipeline {row['pipeline_rps']:7.1f} rps "
              f"(wall {row['pipeline_wall_rps']:6.1f}, chunk {pipe['chunk']}), raw {row['raw_rps']:7.1f} rps "
              f"(wall {row['raw_wall_rps']:6.1f}); ratio {row['ratio']:.3f} (wall {row['wall_ratio']:.3f}); "
              f"load {load_before}", flush=True)
    out = {"engine": kind, "concurrency": concurrency, "requests": n, "pairs": rows,
           "median_ratio": statistics.median(r["ratio"] for r in rows),
           "median_wall_ratio": statistics.median(r["wall_ratio"] for r in rows),
           "median_pipeline_rps": statistics.median(r["pipeline_rps"] for r in rows),
           "median_raw_rps": statistics.median(r["raw_rps"] for r in rows)}
    if engine.max_delay_s > 0:
        theory = concurrency / (engine.max_delay_s / 2)
        out["theory_rps"] = theory
        out["pipeline_busy"] = out["median_pipeline_rps"] / theory
        out["raw_busy"] = out["median_raw_rps"] / theory
    return out


# ---------------------------------------------------------------------------------------- the whole lcp step


def lcp(project: Path, env: dict, *args: str) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([str(REPO / ".venv" / "bin" / "lcp"), *args], cwd=project, env=env, capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise RuntimeError(f"lcp {' '.join(args)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return time.perf_counter() - t0


def whole_step(args) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory(prefix="lcp-serving-step-") as tmp, Engine(0.0) as engine:
        tmp = Path(tmp)
        data = tmp / "data" / "longbench"
        data.mkdir(parents=True)
        recs = records(args.requests)
        with open(data / "hotpotqa.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
        base = tmp / "base"
        base.mkdir()
        shutil.copy(REPO / "dagster.yaml", base / "dagster.yaml")
        env = {**os.environ, "LCP_DATA": str(tmp / "data")}
        env.pop("LCP_LAKE", None)
        env.pop("DAGSTER_HOME", None)
        # Instances once (an imported model's backfill builds sources + instances).
        (tmp / "empty.jsonl").write_text("".join(json.dumps({"_id": r["_id"], "prediction": ""}) + "\n" for r in recs))
        lcp(base, env, "import-predictions", str(tmp / "empty.jsonl"), "--model", "builder", "--config", "longbench")
        lcp(base, env, "backfill", "--model", "builder", "--config", "longbench")
        prompts = None
        for c in args.concurrency:
            rows = []
            for i in range(args.pairs):
                project = tmp / f"run-c{c}-{i}"
                shutil.copytree(base, project, symlinks=True)
                slug = f"null-c{c}"
                load_before = loadavg()
                lcp(project, env, "add-model", slug, "--backend", "openai", "--base-url", engine.url + "/v1",
                    "--api-model", "null", "--max-concurrency", str(c), "--tokenizer", args.tokenizer,
                    "--max-model-len", "8192")
                engine.reset()
                backfill_s = lcp(project, env, "backfill", "--model", slug, "--config", "longbench")
                stats = engine.stats()
                if prompts is None:
                    import polars as pl

                    found = sorted(project.rglob("instances/**/*.parquet"))
                    prompts = pl.concat([pl.read_parquet(p) for p in found])["prompt"].to_list()
                raw = run_raw(engine, prompts, c)
                pipe_rps = stats["count"] / (stats["last"] - stats["first"])
                row = {"concurrency": c, "pair": i + 1, "load": load_before, "requests": stats["count"],
                       "pipeline_rps": pipe_rps, "backfill_s": backfill_s,
                       "backfill_rps": stats["count"] / backfill_s, "raw_rps": rps(raw)}
                row["ratio"] = pipe_rps / row["raw_rps"]
                rows.append(row)
                print(f"  whole step C={c} pair {i + 1}: backfill {backfill_s:.1f} s, request phase {pipe_rps:.1f} rps, "
                      f"raw {row['raw_rps']:.1f} rps, ratio {row['ratio']:.3f}; load {load_before}", flush=True)
                shutil.rmtree(project, ignore_errors=True)
            out.append({"concurrency": c, "pairs": rows, "median_ratio": statistics.median(r["ratio"] for r in rows),
                        "median_backfill_s": statistics.median(r["backfill_s"] for r in rows)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated C values")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1000, help="requests per run on the null engine")
    ap.add_argument("--sim-requests", type=int, default=0,
                    help="requests per run on the simulated engine (0: 80·C, at most --requests: ~8 s of theory)")
    ap.add_argument("--engines", default="null,simulated")
    ap.add_argument("--max-delay", type=float, default=0.2, help="the simulated engine's U(0, max) delay, s")
    ap.add_argument("--tokenizer", default="tiktoken:cl100k_base")
    ap.add_argument("--whole-step", action="store_true", help="lcp add-model + lcp backfill instead of the direct path")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(0, args.max_delay)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]

    import subprocess as sp

    commit = sp.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    code = code_under_test()
    print(f"serving_throughput: commit {commit}, code {code}, {started}, load {loadavg()}, {os.cpu_count()} CPUs",
          flush=True)
    result = {"commit": commit, "code": code, "started": started, "load_start": loadavg(), "cpus": os.cpu_count(), "runs": []}
    if args.whole_step:
        result["whole_step"] = whole_step(args)
    else:
        cache: dict = {}
        for kind in args.engines.split(","):
            delay = 0.0 if kind == "null" else args.max_delay
            with Engine(delay) as engine:
                for c in args.concurrency:
                    n = args.requests if kind == "null" else (args.sim_requests or min(args.requests, 80 * c))
                    result["runs"].append(measure(engine, kind, c, n, args.pairs, args.tokenizer, cache))
    result["load_end"] = loadavg()
    print("\nengine     C    pipeline rps   raw rps   median ratio (wall)   busy pipeline / raw (theory)")
    for r in result["runs"]:
        busy = (f"{r['pipeline_busy']:.2f} / {r['raw_busy']:.2f} ({r['theory_rps']:.0f} rps)"
                if "theory_rps" in r else "")
        print(f"{r['engine']:9s} {r['concurrency']:3d} {r['median_pipeline_rps']:13.1f} {r['median_raw_rps']:9.1f}"
              f"   {r['median_ratio']:.3f} ({r['median_wall_ratio']:.3f})   {busy}")
    for r in result.get("whole_step", []):
        print(f"whole step C={r['concurrency']}: median ratio {r['median_ratio']:.3f}, backfill {r['median_backfill_s']:.1f} s")
    print(f"load at the end {result['load_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
