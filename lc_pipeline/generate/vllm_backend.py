"""Greedy generation with vLLM's offline engine (GPUs), a whole partition submitted at once.

Prompts are rendered and fitted with the model's Hugging Face tokenizer (its own chat
template, no added BOS on templated text) and handed to the engine as token ids, so what
vLLM sees is what we counted; one ``generate`` call carries every request, and the engine
batches them continuously (requests skipped under policy ``skip`` are left out of it and recorded as
``status: skipped``). The engine is created on first use inside the step that needs
it and released by ``close()`` (the generations asset calls it when the step ends), so a
GPU holds one model at a time.

Installed by the ``gpu`` extra (``pip install 'lc_pipeline[gpu]'``); nothing here imports
vLLM until an engine is built.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.prompting import (
    PromptTokenizer,
    chat_template_source,
    fed_prompt_fields,
    fit_request,
    load_tokenizer,
    skipped_result,
    to_send,
)
from lc_pipeline.generate.registry import ModelSpec, resolve_model_path

_INSTALL_HINT = "vLLM is not installed; it comes with the gpu extra: pip install 'lc_pipeline[gpu]' (Linux + CUDA GPU)"


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return vllm


def engine_args(spec: ModelSpec) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``."""
    path = resolve_model_path(spec)
    args: dict[str, Any] = {
        "model": path,
        "max_model_len": spec.max_model_len,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "enable_prefix_caching": spec.enable_prefix_caching,  # shared instructions/demos across prompts
        "dtype": spec.dtype,
        "seed": 0,
        "trust_remote_code": False,
    }
    if spec.gguf_file is not None:
        # vLLM loads a GGUF by its file path; the tokenizer comes from the same file unless named.
        args["model"] = os.path.join(path, spec.gguf_file)
        args["tokenizer"] = spec.tokenizer or path
    elif spec.tokenizer is not None:
        args["tokenizer"] = spec.tokenizer
    return args


def sampling_args(max_new_tokens: int, stop_token_ids: Sequence[int]) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``: greedy, stopping on the model's EOS ids."""
    return {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": max_new_tokens,
        "stop_token_ids": sorted(set(stop_token_ids)),
        "skip_special_tokens": True,
        "seed": 0,
    }


class VLLMGenerator:
    backend = "vllm"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "vllm":
            raise ValueError(f"model {spec.slug!r}: VLLMGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.model_id = f"{spec.model_id}/{spec.gguf_file}" if spec.gguf_file else spec.model_id
        self._llm: Any = None
        self._tok: PromptTokenizer | None = None

    @property
    def prompt_tokenizer(self) -> PromptTokenizer:
        if self._tok is None:
            self._tok = load_tokenizer(self.spec)
        return self._tok

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        return fit_request(self.spec, self.prompt_tokenizer, request)

    def sampling_params(self) -> dict:
        return greedy_params(self.spec, temperature=0.0, dtype=self.spec.dtype)

    def engine(self) -> Any:
        if self._llm is None:
            vllm = import_vllm()
            self._llm = vllm.LLM(**engine_args(self.spec))
        return self._llm

    def close(self) -> None:
        """Free the engine's GPU memory (the step's process exiting frees it in any case)."""
        if self._llm is None:
            return
        self._llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        if not requests:
            return []
        vllm = import_vllm()
        fitted = [self.fit(r) for r in requests]
        results: list[GenerationResult | None] = [
            skipped_result(r, f, chat_template_source(self.spec, r.chat_template)) if f.skipped else None
            for r, f in zip(requests, fitted, strict=True)
        ]
        sent = to_send(fitted)
        if not sent:
            if progress is not None:
                progress(len(requests))
            return [r for r in results if r is not None]
        stop = self.prompt_tokenizer.eos_ids
        llm = self.engine()
        prompts = [{"prompt_token_ids": fitted[i].ids} for i in sent]
        params = [vllm.SamplingParams(**sampling_args(requests[i].max_new_tokens, stop)) for i in sent]
        t0 = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)  # the whole partition at once
        latency = (time.perf_counter() - t0) / len(sent)
        for i, out in zip(sent, outputs, strict=True):
            req, fit = requests[i], fitted[i]
            completion = out.outputs[0]
            results[i] = (
                GenerationResult(
                    key=req.key,
                    output=completion.text.strip(),
                    prompt_tokens=len(out.prompt_token_ids),
                    original_prompt_tokens=fit.original_tokens,
                    truncated=fit.truncated,
                    completion_tokens=len(completion.token_ids) - (completion.finish_reason == "stop"
                                                                   and bool(completion.token_ids)
                                                                   and completion.token_ids[-1] in stop),
                    finish_reason="length" if completion.finish_reason == "length" else "stop",
                    latency_s=latency,
                    truncation_policy=fit.policy,
                    **fed_prompt_fields(self.spec, self.prompt_tokenizer, fit.ids, req.chat_template),
                )
            )
        if progress is not None:
            progress(len(requests))
        return [r for r in results if r is not None]
