"""Greedy generation in-process with llama-cpp-python (GGUF models, CPU).

The prompt is rendered and fitted by :mod:`lc_pipeline.generate.prompting` (the GGUF's own
chat template, no added BOS on templated text) and handed to llama.cpp as token ids, so the
ids the model sees are exactly the ones we counted. llama.cpp stops on every end-of-generation
id of the vocabulary. Requests run one after another: llama-cpp-python's ``Llama`` decodes a
single sequence (the server backend is the way to overlap requests). A request under policy
``skip`` whose prompt does not fit is not sent (``status: skipped``, prompting.skipped_result).

Installed by the ``llamacpp`` extra (``pip install 'lc_pipeline[llamacpp]'``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.prompting import (
    LlamaCppTokenizer,
    chat_template_source,
    fed_prompt_fields,
    fit_request,
    load_llamacpp_vocab,
    render_ids,
    skipped_result,
)
from lc_pipeline.generate.registry import ModelSpec, resolve_model_path


def gguf_path(spec: ModelSpec) -> str:
    if spec.gguf_file is None:
        raise ValueError(f"model {spec.slug!r}: backend 'llamacpp' needs gguf_file (a .gguf inside model_id)")
    path = resolve_model_path(spec)
    if not os.path.isdir(path):
        raise ValueError(f"model {spec.slug!r}: backend 'llamacpp' needs a local model_id directory, got {spec.model_id!r}")
    return os.path.join(path, spec.gguf_file)


def cpu_threads() -> int:
    """CPUs this process may run on: the affinity mask (a container's cpuset), else the CPU count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on macOS / Windows
        return os.cpu_count() or 1


class LlamaCppGenerator:
    backend = "llamacpp"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "llamacpp":
            raise ValueError(f"model {spec.slug!r}: LlamaCppGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.model_id = f"{spec.model_id}/{spec.gguf_file}"
        self._llm: Any = None
        self._tok: LlamaCppTokenizer | None = None
        self.load_seconds: float | None = None

    def load(self) -> None:
        if self._llm is not None:
            return
        t0 = time.perf_counter()
        self._llm = load_llamacpp_vocab(
            gguf_path(self.spec),
            n_ctx=self.spec.max_model_len,
            n_batch=min(512, self.spec.max_model_len),
            # llama-cpp-python decodes on cpu_count() // 2 threads by default: 1 of 2 cores here
            # (64 new tokens: 1.6 s on 1 thread, 1.1 s on 2). torch_threads, when set, caps both phases, as
            # torch.set_num_threads does for transformers: reading the prompt on every CPU of a busy machine
            # costs more, not less (3 prompts of 40 tokens on 2 loaded cores: 9.4 CPU s on 2 threads, 1.2 on 1);
            # unset, the prompt keeps llama-cpp-python's default, every CPU.
            n_threads=self.spec.torch_threads or cpu_threads(),
            n_threads_batch=self.spec.torch_threads,
            seed=0,
        )
        self._tok = LlamaCppTokenizer(self._llm, self.model_id, chat_template=self.spec.chat_template_text())
        self.load_seconds = time.perf_counter() - t0

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
        self._llm = self._tok = None

    @property
    def prompt_tokenizer(self) -> LlamaCppTokenizer:
        self.load()
        assert self._tok is not None
        return self._tok

    def render(self, user_text: str) -> list[int]:
        return render_ids(self.spec, self.prompt_tokenizer, user_text)

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        """The exact ids this backend feeds the model for ``request``."""
        return fit_request(self.spec, self.prompt_tokenizer, request)

    def sampling_params(self) -> dict:
        return greedy_params(self.spec, temperature=0.0)

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        self.load()
        llm = self._llm
        results = []
        for req in requests:
            fit = self.fit(req)
            if fit.skipped:  # policy skip, over the window: nothing is fed
                results.append(skipped_result(req, fit, chat_template_source(self.spec, req.chat_template)))
                if progress is not None:
                    progress(1)
                continue
            llm.reset()  # no state from the previous prompt: each request starts from an empty cache
            t0 = time.perf_counter()
            # Greedy (top_k 1), or an official protocol's sampling: the request's temperature, no top-k / top-p /
            # min-p cut, its seed (GenerationRequest.temperature).
            decoding = ({"temperature": req.temperature, "top_k": 0, "seed": req.seed} if req.sampled
                        else {"temperature": 0.0, "top_k": 1, "seed": 0})
            out = llm.create_completion(
                prompt=fit.ids, max_tokens=req.max_new_tokens, top_p=1.0, min_p=0.0, repeat_penalty=1.0, **decoding,
            )
            latency = time.perf_counter() - t0
            choice = out["choices"][0]
            finish = choice["finish_reason"] if choice["finish_reason"] in ("stop", "length") else "stop"
            results.append(
                GenerationResult(
                    key=req.key,
                    output=choice["text"].strip(),
                    prompt_tokens=out["usage"]["prompt_tokens"],
                    original_prompt_tokens=fit.original_tokens,
                    truncated=fit.truncated,
                    completion_tokens=out["usage"]["completion_tokens"],
                    finish_reason=finish,
                    latency_s=latency,
                    truncation_policy=fit.policy,
                    **fed_prompt_fields(self.spec, self.prompt_tokenizer, fit.ids, req.chat_template),
                )
            )
            if progress is not None:
                progress(1)
        return results
