"""Greedy generation with Hugging Face transformers (CPU or a single GPU).

What the backend does to a prompt, in order (shared with the other backends, see
:mod:`lc_pipeline.generate.prompting`):
1. wraps the user prompt in the model's chat template, or ``spec.chat_template_file`` instead (unless
   ``spec.chat_template`` is False), with a system message only if ``spec.system_prompt`` is set;
2. if the templated prompt plus ``max_new_tokens`` exceeds ``spec.max_model_len``, applies
   the request's truncation policy (middle / end_of_context / drop_documents) in the model's
   own tokens and re-applies the template; under ``skip`` the request is not sent at all (its result
   says ``status: skipped``; the others of the batch are generated);
3. decodes greedily in left-padded batches of similar length, stopping on the EOS ids.

GGUF or safetensors checkpoints: a directory / Hub id loads with ``from_pretrained``; a GGUF
is slow to load through transformers (~31 s for SmolLM2-135M, nearly all of it spent
parsing GGUF metadata, not de-quantizing), so the converted tokenizer and fp32 weights are
cached with ``save_pretrained`` under ``$LCP_CACHE_DIR`` (default ``~/.cache/lc_pipeline``;
:mod:`lc_pipeline.generate.gguf_conversion`, shared with the vllm backend); later loads take
well under a second.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

# This module is imported only when a transformers model is actually used (make_generator
# imports it lazily), so importing torch / transformers here costs nothing elsewhere.
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    StoppingCriteria,
    StoppingCriteriaList,
)

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.gguf_conversion import convert_gguf, converted_folder
from lc_pipeline.generate.prompting import (
    HFTokenizer,
    chat_template_source,
    fed_prompt_fields,
    fit_request,
    render_ids,
    skipped_result,
    to_send,
)
from lc_pipeline.generate.registry import ModelSpec, resolve_model_path

log = logging.getLogger(__name__)

# Sampling-only fields of a checkpoint's generation_config. Greedy decoding ignores them,
# but transformers warns about every one that is set; clearing them keeps logs clean.
_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "top_h", "typical_p", "epsilon_cutoff", "eta_cutoff")


class _PerRowLimit(StoppingCriteria):
    """Finishes each row of a batch once it has its own max_new_tokens."""

    def __init__(self, prompt_width: int, limits: torch.Tensor) -> None:
        self.prompt_width, self.limits = prompt_width, limits

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        return (input_ids.shape[1] - self.prompt_width) >= self.limits.to(input_ids.device)


class TransformersGenerator:
    backend = "transformers"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "transformers":
            raise ValueError(f"model {spec.slug!r}: TransformersGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        # Recorded in every generation row: with a GGUF, the file is part of the model's identity.
        self.model_id = f"{spec.model_id}/{spec.gguf_file}" if spec.gguf_file else spec.model_id
        self._model: Any = None
        self._tokenizer: Any = None
        self._prompt_tok: HFTokenizer | None = None
        self._stop_ids: list[int] = []
        self.load_seconds: float | None = None
        self.load_source: str | None = None  # "cache" | "gguf" | "pretrained"

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Load the model and tokenizer now (``generate`` does it on first use)."""
        if self._model is not None:
            return
        t0 = time.perf_counter()
        spec = self.spec
        path = resolve_model_path(spec)
        dtype = getattr(torch, spec.dtype)
        if spec.gguf_file is not None:
            if not os.path.isdir(path):
                raise ValueError(
                    f"model {spec.slug!r}: gguf_file needs a local model_id (a directory or "
                    f"'package:<module>'), got {spec.model_id!r}; download the .gguf first"
                )
            tok, model = self._load_gguf(path, spec.gguf_file)
            model = model.to(dtype)
        else:
            local = os.path.isdir(path)  # a local directory must never fall through to the Hub
            tok = AutoTokenizer.from_pretrained(path, local_files_only=local)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=local)
            self.load_source = "pretrained"
        # One GPU when there is one (vLLM is the multi-GPU path); the CPU otherwise.
        model = model.to("cuda" if torch.cuda.is_available() else "cpu")
        model.eval()

        template = spec.chat_template_text()  # the registry's chat_template_file, read now: a bad path fails here
        if spec.chat_template and not (template or tok.chat_template):
            raise ValueError(
                f"model {spec.slug!r}: the tokenizer has no chat template; set chat_template: false "
                "to feed raw prompts"
            )
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        # We truncate ourselves; the tokenizer's "sequence too long" warning would only be noise.
        tok.model_max_length = 1 << 62

        gen_cfg = model.generation_config
        for name in _SAMPLING_FIELDS:
            if hasattr(gen_cfg, name):
                setattr(gen_cfg, name, None)
        gen_cfg.do_sample = False
        eos = gen_cfg.eos_token_id
        stop = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tok.eos_token_id is not None:
            stop.add(tok.eos_token_id)
        if not stop:
            raise ValueError(f"model {spec.slug!r}: neither the model nor the tokenizer defines an EOS token")

        max_pos = getattr(model.config, "max_position_embeddings", None)
        if max_pos is not None and spec.max_model_len > max_pos:
            log.warning(
                "model %r: max_model_len %d exceeds the model's max_position_embeddings %d",
                spec.slug, spec.max_model_len, max_pos,
            )
        self._tokenizer, self._model, self._stop_ids = tok, model, sorted(stop)
        self._prompt_tok = HFTokenizer(tok, self.model_id, chat_template=template)
        self.load_seconds = time.perf_counter() - t0
        log.info("model %r loaded from %s in %.1f s", spec.slug, self.load_source, self.load_seconds)

    def _load_gguf(self, path: str, gguf_file: str) -> tuple[Any, Any]:
        """Tokenizer and fp32 model from the cache (gguf_conversion.converted_folder), converting the GGUF on a
        miss; the converted objects are used as they are, not read back from the folder."""
        final = converted_folder(path, gguf_file)
        if final.is_dir():
            try:
                tok = AutoTokenizer.from_pretrained(final, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(final, local_files_only=True)
                self.load_source = "cache"
                return tok, model
            except Exception as exc:  # a damaged cache must not block a run: rebuild it
                log.warning("cached model %s is unreadable (%s); converting the GGUF again", final, exc)
                shutil.rmtree(final, ignore_errors=True)

        tok, model = convert_gguf(path, gguf_file, final)
        self.load_source = "gguf"
        return tok, model

    # ------------------------------------------------------------------ prompts

    @property
    def prompt_tokenizer(self) -> HFTokenizer:
        self.load()
        if self._prompt_tok is None:  # weights and tokenizer were handed over from another generator
            self._prompt_tok = HFTokenizer(self._tokenizer, self.model_id, chat_template=self.spec.chat_template_text())
        return self._prompt_tok

    def render(self, user_text: str) -> list[int]:
        """Token ids of the full model input for one user prompt (no truncation)."""
        return render_ids(self.spec, self.prompt_tokenizer, user_text)

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        """The exact ids this backend feeds the model for ``request``."""
        return fit_request(self.spec, self.prompt_tokenizer, request)

    def fit_prompt(self, prompt: str, max_new_tokens: int) -> tuple[list[int], int, bool]:
        """``(input_ids, original_prompt_tokens, truncated)`` under middle truncation."""
        fitted = self.fit(GenerationRequest("prompt", prompt, max_new_tokens))
        return fitted.ids, fitted.original_tokens, fitted.truncated

    # ------------------------------------------------------------------ generation

    def sampling_params(self) -> dict:
        return greedy_params(self.spec, do_sample=False, num_beams=1, dtype=self.spec.dtype)

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        """Greedy completions (sampled ones where a request sets a temperature), in request order; ``progress(n)``
        after each batch of n requests."""
        if not requests:
            return []
        self.load()
        threads = torch.get_num_threads()
        if self.spec.torch_threads is not None:
            torch.set_num_threads(self.spec.torch_threads)
        try:
            return self._generate(requests, progress)
        finally:
            torch.set_num_threads(threads)  # the setting is process-wide; don't leak it

    def _generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None,
    ) -> list[GenerationResult]:
        tok, model = self._tokenizer, self._model
        fitted = [self.fit(r) for r in requests]
        results: list[GenerationResult | None] = [None] * len(requests)
        for i, (req, fit) in enumerate(zip(requests, fitted, strict=True)):
            if fit.skipped:  # policy skip, over the window: nothing is fed
                results[i] = skipped_result(req, fit, chat_template_source(self.spec, req.chat_template))

        # Longest first: similar lengths share a batch (little padding), and a batch that
        # does not fit in memory fails at the start rather than at the end.
        order = sorted(to_send(fitted), key=lambda i: -len(fitted[i].ids))
        stop_ids = set(self._stop_ids)
        bs = self.spec.batch_size
        # Greedy requests in batches of batch_size; a sampled one (an official protocol's temperature) alone, its
        # seed set just before: what it draws depends on its seed only, not on the batch it would have shared.
        greedy = [i for i in order if not requests[i].sampled]
        batches = [greedy[start : start + bs] for start in range(0, len(greedy), bs)]
        batches += [[i] for i in order if requests[i].sampled]
        for batch in batches:
            width = max(len(fitted[i].ids) for i in batch)
            input_ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids = fitted[i].ids
                input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                attention[row, width - len(ids) :] = 1
            # Requests in a batch may want different lengths: the batch runs to the largest, and
            # _PerRowLimit retires each row at its own limit so it stops costing compute.
            max_new = max(requests[i].max_new_tokens for i in batch)
            first = requests[batch[0]]
            # Sampling: the request's temperature, no top-k (0) or top-p cut, torch seeded with the request's seed.
            decoding = ({"do_sample": True, "temperature": first.temperature, "top_k": 0, "top_p": 1.0}
                        if first.sampled else {"do_sample": False})
            config = GenerationConfig(
                num_beams=1,
                max_new_tokens=max_new,
                eos_token_id=self._stop_ids,
                pad_token_id=tok.pad_token_id,
                **decoding,
            )
            if first.sampled:
                torch.manual_seed(first.seed)
            limits = torch.tensor([requests[i].max_new_tokens for i in batch], dtype=torch.long)
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(
                    input_ids=input_ids.to(model.device),
                    attention_mask=attention.to(model.device),
                    generation_config=config,
                    stopping_criteria=StoppingCriteriaList([_PerRowLimit(width, limits)]),
                )
            latency = (time.perf_counter() - t0) / len(batch)

            for row, i in enumerate(batch):
                req = requests[i]
                fit = fitted[i]
                new = out[row, width:].tolist()[: req.max_new_tokens]
                stop_at = next((k for k, t in enumerate(new) if t in stop_ids), None)
                if stop_at is not None:
                    new, finish = new[:stop_at], "stop"  # drops the stop token and any padding after it
                else:
                    finish = "length"
                results[i] = GenerationResult(
                    key=req.key,
                    output=tok.decode(new, skip_special_tokens=True).strip(),
                    prompt_tokens=len(fit.ids),
                    original_prompt_tokens=fit.original_tokens,
                    truncated=fit.truncated,
                    completion_tokens=len(new),
                    finish_reason=finish,
                    latency_s=latency,
                    truncation_policy=fit.policy,
                    **fed_prompt_fields(self.spec, self.prompt_tokenizer, fit.ids, req.chat_template),
                )
            if progress is not None:
                progress(len(batch))  # an increment, like tqdm's update()
        if progress is not None and len(order) < len(requests):
            progress(len(requests) - len(order))  # the skipped ones are done too
        return [r for r in results if r is not None]
