"""Batched vs one-prompt-at-a-time generation on the same backend and inputs, as a ratio in one run.

    python benchmarks/generation_throughput.py --backend transformers [--prompts 16] [--max-new 48]
    python benchmarks/generation_throughput.py --backend openai       [--prompts 16] [--max-new 48]

The inputs are real demo-corpus questions, each with its gold passage (short prompts, so
decoding dominates: that is where batching pays on a CPU; long prefill-bound prompts are
measured by generation_batching.py). "one at a time" sends each request alone through the
same generator; "batched" sends all of them in one ``generate`` call:
- transformers: one left-padded batch of --prompts rows (batch_size = --prompts);
- openai: llama-cpp-python's server on 127.0.0.1 (started here), --prompts requests in flight.
Greedy outputs are compared too (batched padding may flip a token in bf16; fp32 is used).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path
from lc_pipeline.sources.demo_corpus import build_demo_corpus

BUILTIN = BUILTIN_MODELS["smollm2-135m"]


def prompts(n: int, passage: bool = True) -> list[str]:
    docs, items = build_demo_corpus(n_entities=max(60, n * 2), seed=1)
    text = dict(docs.select("doc_id", "text").iter_rows())
    out = []
    for q, evidence in items.select("question", "evidence_doc_ids").head(n).iter_rows():
        if not passage:  # decode-dominated: a short question and a long answer
            out.append(f"Answer the question, then explain your answer in three sentences.\n\nQuestion: {q}")
            continue
        body = " ".join(text[d] for d in evidence)
        out.append(f"Read the passage, answer the question, then explain your answer in two sentences.\n\n"
                   f"Passage: {body}\n\nQuestion: {q}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(threads: int) -> tuple[subprocess.Popen, str]:
    gguf = os.path.join(resolve_model_path(BUILTIN), BUILTIN.gguf_file)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lc_pipeline.generate.llamacpp_server", "--model", gguf, "--model_alias", "smollm2",
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                             "--n_threads", str(threads), "--verbose", "False"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("llama_cpp.server did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["transformers", "openai"], default="transformers")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-passage", action="store_true", help="questions only (decode-dominated)")
    args = ap.parse_args()
    ps = prompts(args.prompts, passage=not args.no_passage)
    requests = [GenerationRequest(str(i), p, args.max_new) for i, p in enumerate(ps)]
    server = None
    if args.backend == "transformers":
        spec = dataclasses.replace(BUILTIN, dtype="float32", torch_threads=args.threads, batch_size=args.prompts)
        gen = make_generator(spec)
        gen.load()
    else:
        server, url = start_server(args.threads)
        spec = dataclasses.replace(BUILTIN, slug="smollm2-served", backend="openai", api_model="smollm2",
                                   base_url=url, max_model_len=4096, max_concurrency=args.prompts,
                                   extra_body={"repeat_penalty": 1.0})
        gen = make_generator(spec)
    try:
        gen.generate(requests[:1])  # warm-up: first-call costs stay out of both timings
        t0 = time.perf_counter()
        one_by_one = [gen.generate([r])[0] for r in requests]
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        batched = gen.generate(requests)
        t_batch = time.perf_counter() - t0
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    tokens_seq = sum(r.completion_tokens for r in one_by_one)
    tokens_batch = sum(r.completion_tokens for r in batched)
    same = sum(a.output == b.output for a, b in zip(one_by_one, batched, strict=True))
    report = {
        "backend": args.backend,
        "prompts": len(ps),
        "mean_prompt_tokens": sum(r.prompt_tokens for r in batched) / len(batched),
        "max_new_tokens": args.max_new,
        "one_at_a_time_s": round(t_seq, 2),
        "batched_s": round(t_batch, 2),
        "speedup": round(t_seq / t_batch, 2),
        "tokens_per_s_one_at_a_time": round(tokens_seq / t_seq, 1),
        "tokens_per_s_batched": round(tokens_batch / t_batch, 1),
        "identical_outputs": f"{same}/{len(ps)}",
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
