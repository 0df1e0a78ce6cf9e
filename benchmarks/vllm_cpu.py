"""vLLM-CPU against the transformers backend: the same requests, the same weights, one process.

    python benchmarks/vllm_cpu.py [--prompts 8] [--max-new 32] [--dtypes float32,bfloat16] [--kv-cache-gib 2]
                                  [--enforce-eager] [--hf-dir DIR] [--json vllm_cpu.json]

Model: the built-in SmolLM2-135M-Instruct, as the Hugging Face folder its GGUF converts into (the transformers
backend's conversion cache; ``--hf-dir`` to name one), so both backends load the same fp32 weights and the same
tokenizer and chat template. Requests: ``--prompts`` real demo-corpus questions, each with its gold passage
(~540 tokens with the template), greedy, ``--max-new`` new tokens, built as ``GenerationRequest``s as the
pipeline builds them.

Per dtype (fp32, bf16): the project's ``TransformersGenerator`` (``batch_size`` 1, as the built-in model runs on a
CPU) and ``VLLMGenerator`` are both loaded first (load and engine start timed apart, excluded from the ratio);
then transformers generates every request, then vLLM, alternated ``--reps`` times (median of each; the outputs
of the last pass are compared); the engine is stopped before the next dtype.
Reported: identical outputs n/N, rows whose prompt token ids are equal (``prompt_ids_hash``, what each backend
fed), completion tokens, wall seconds of each ``generate`` call and the ratio transformers / vLLM.

vLLM engine settings: the ModelSpec fields ``kv_cache_gib`` (default 2 GiB here) and ``enforce_eager`` where this
checkout's ModelSpec has them; otherwise the same through vLLM-CPU's environment (``VLLM_CPU_KVCACHE_SPACE``).
Prefix caching is off, so no request reuses another's KV blocks. Run it on a quiet machine or read the ratio
with the load average it prints: vLLM-CPU binds its worker to cores the other work shares.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from run_info import loadavg  # benchmarks/run_info.py: the script's folder is on sys.path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def demo_prompts(n: int) -> list[str]:
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    docs, items = build_demo_corpus(n_entities=max(60, n * 2), seed=1)
    text = dict(docs.select("doc_id", "text").iter_rows())
    out = []
    for q, evidence in items.select("question", "evidence_doc_ids").head(n).iter_rows():
        body = " ".join(text[d] for d in evidence)
        out.append(f"Read the passage, answer the question, then explain your answer in two sentences.\n\n"
                   f"Passage: {body}\n\nQuestion: {q}")
    return out


def hf_folder(args) -> str:
    """SmolLM2's converted HF folder: --hf-dir, else the conversion the project's backends share."""
    if args.hf_dir:
        return args.hf_dir
    from lc_pipeline.generate.registry import BUILTIN_MODELS

    builtin = BUILTIN_MODELS["smollm2-135m"]
    try:
        from lc_pipeline.generate.gguf_conversion import converted_model_dir

        return str(converted_model_dir(builtin))
    except ImportError:  # older checkouts: the transformers backend converts into its cache when it loads
        from lc_pipeline.generate.transformers_backend import TransformersGenerator, cache_root

        TransformersGenerator(builtin).load()
        found = sorted((cache_root() / "models").glob(f"{Path(builtin.gguf_file).stem}-*"),
                       key=lambda p: p.stat().st_mtime)
        if not found:
            raise SystemExit("the converted SmolLM2 folder was not found in the cache; pass --hf-dir")
        return str(found[-1])


def specs(folder: str, dtype: str, args):
    from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelSpec

    base = BUILTIN_MODELS["smollm2-135m"]
    common = dict(model_id=folder, gguf_file=None, max_model_len=4096, dtype=dtype, batch_size=1)
    hf = ModelSpec(slug=f"smollm2-hf-{dtype}", backend="transformers", torch_threads=base.torch_threads, **common)
    fields = {f.name for f in dataclasses.fields(ModelSpec)}
    extra = {"enable_prefix_caching": False}
    how = {}
    if "kv_cache_gib" in fields:
        extra["kv_cache_gib"] = args.kv_cache_gib
        how["kv_cache"] = f"ModelSpec.kv_cache_gib = {args.kv_cache_gib}"
    else:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(args.kv_cache_gib))
        how["kv_cache"] = f"VLLM_CPU_KVCACHE_SPACE={int(args.kv_cache_gib)} (this ModelSpec has no kv_cache_gib)"
    if "enforce_eager" in fields:
        extra["enforce_eager"] = args.enforce_eager
        how["enforce_eager"] = f"ModelSpec.enforce_eager = {args.enforce_eager}"
    elif args.enforce_eager:
        raise SystemExit("--enforce-eager: this checkout's ModelSpec has no enforce_eager field")
    vl = ModelSpec(slug=f"smollm2-vllm-{dtype}", backend="vllm", **common, **extra)
    return hf, vl, how


def requests_for(prompts: list[str], max_new: int):
    from lc_pipeline.generate.base import GenerationRequest, cache_key

    return [GenerationRequest(cache_key(p, max_new, "middle", "bench", "greedy"), p, max_new, "middle", "")
            for p in prompts]


def run_dtype(folder: str, dtype: str, requests, args) -> dict:
    from lc_pipeline.generate.transformers_backend import TransformersGenerator
    from lc_pipeline.generate.vllm_backend import VLLMGenerator

    hf_spec, vllm_spec, how = specs(folder, dtype, args)
    hf = TransformersGenerator(hf_spec)
    t0 = time.perf_counter()
    hf.load()
    hf_load = time.perf_counter() - t0
    vl = VLLMGenerator(vllm_spec)
    t0 = time.perf_counter()
    vl.engine()
    vllm_start = time.perf_counter() - t0
    try:
        load = loadavg()
        hf_times, vllm_times = [], []
        for _ in range(args.reps):  # alternated: transformers, vLLM, transformers, vLLM, ...
            t0 = time.perf_counter()
            a = hf.generate(requests)
            hf_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b = vl.generate(requests)
            vllm_times.append(time.perf_counter() - t0)
        hf_s, vllm_s = statistics.median(hf_times), statistics.median(vllm_times)
    finally:
        vl.close()
        del hf
        gc.collect()
    pairs = list(zip(a, b, strict=True))
    out = {
        "dtype": dtype, "engine": how, "load": load, "load_after": loadavg(),
        "identical_outputs": sum(x.output == y.output for x, y in pairs), "of": len(pairs),
        "prompt_ids_equal": sum(bool(x.prompt_ids_hash) and x.prompt_ids_hash == y.prompt_ids_hash for x, y in pairs),
        "prompt_tokens_equal": sum(x.prompt_tokens == y.prompt_tokens for x, y in pairs),
        "prompt_tokens": sum(x.prompt_tokens for x in a),
        "completion_tokens_transformers": sum(x.completion_tokens for x in a),
        "completion_tokens_vllm": sum(y.completion_tokens for y in b),
        "transformers_s": hf_s, "vllm_s": vllm_s, "ratio_transformers_over_vllm": hf_s / vllm_s,
        "transformers_runs_s": hf_times, "vllm_runs_s": vllm_times,
        "ratio_per_rep": [h / v for h, v in zip(hf_times, vllm_times, strict=True)],
        "transformers_load_s": hf_load, "vllm_engine_start_s": vllm_start,
        "differing": [{"prompt": i, "transformers": x.output[:160], "vllm": y.output[:160],
                       "finish": [x.finish_reason, y.finish_reason]}
                      for i, (x, y) in enumerate(pairs) if x.output != y.output],
    }
    print(f"{dtype}: identical {out['identical_outputs']}/{out['of']}, prompt ids equal {out['prompt_ids_equal']}/"
          f"{out['of']}; transformers {hf_s:.1f} s, vLLM {vllm_s:.1f} s, ratio {out['ratio_transformers_over_vllm']:.2f}x "
          f"(loads excluded: transformers {hf_load:.1f} s, engine start {vllm_start:.1f} s); load {load}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=32)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--kv-cache-gib", type=float, default=2.0)
    ap.add_argument("--enforce-eager", action="store_true")
    ap.add_argument("--reps", type=int, default=1, help="alternated passes per backend (median; prefix caching is off)")
    ap.add_argument("--hf-dir", help="SmolLM2's converted Hugging Face folder (default: the project's conversion)")
    ap.add_argument("--json")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"vllm_cpu: commit {commit}, {started}, load {loadavg()}, {os.cpu_count()} CPUs", flush=True)
    folder = hf_folder(args)
    prompts = demo_prompts(args.prompts)
    requests = requests_for(prompts, args.max_new)
    import vllm

    import lc_pipeline

    result = {"commit": commit, "code": os.path.dirname(lc_pipeline.__file__), "started": started, "vllm": vllm.__version__, "model": folder,
              "prompts": len(prompts), "max_new_tokens": args.max_new, "runs": []}
    for dtype in args.dtypes.split(","):
        result["runs"].append(run_dtype(folder, dtype, requests, args))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    ratios = [r["ratio_transformers_over_vllm"] for r in result["runs"]]
    print(f"median ratio transformers / vLLM: {statistics.median(ratios):.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
