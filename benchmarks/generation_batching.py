"""Batch size vs throughput for the transformers backend, as a ratio within one run.

    python benchmarks/generation_batching.py [--tokens 4000] [--prompts 4]

Feeds the same real prompts (demo-corpus instances assembled to --tokens) through the
built-in SmolLM2 with batch_size 1 and batch_size = --prompts, and prints seconds and the
ratio. Used to choose the CPU default (batch_size 1) in generate/registry.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from lc_pipeline.construct.prompts import build_prompt, format_context
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.generate.transformers_backend import TransformersGenerator
from lc_pipeline.sources.demo_corpus import build_demo_corpus


def prompts(n: int, tokens: int) -> list[str]:
    docs, items = build_demo_corpus(n_entities=200, seed=1)
    counter = TokenCounter.load()
    out, texts = [], docs.select("title", "text").rows()
    for i in range(n):
        blocks, used = [], 0
        for title, text in texts[i * 7 :] + texts[: i * 7]:  # a different context per prompt
            if used > tokens * 0.97:
                break
            blocks.append((title, text))
            used += counter.count(text) + 12
        out.append(build_prompt(format_context(blocks), items["question"][i]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--prompts", type=int, default=4)
    args = ap.parse_args()
    ps = prompts(args.prompts, args.tokens)
    timings = {}
    for bs in (1, args.prompts):
        gen = TransformersGenerator(dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], batch_size=bs))
        gen.load()
        t0 = time.perf_counter()
        gen.generate([GenerationRequest(key=str(i), prompt=p, max_new_tokens=24) for i, p in enumerate(ps)])
        timings[bs] = time.perf_counter() - t0
        print(f"batch_size={bs}: {timings[bs]:.1f}s for {len(ps)} prompts of ~{args.tokens} tokens", flush=True)
    print(f"ratio batch_size={args.prompts} / batch_size=1: {timings[args.prompts] / timings[1]:.2f}")


if __name__ == "__main__":
    main()
