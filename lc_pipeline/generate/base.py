"""The generation interface every backend implements.

A backend takes user prompts (the ``prompt`` column of the instances table), fits them to
the model's window, decodes greedily and reports what it actually fed the model, so the
generations table can record truncation honestly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lc_pipeline.generate.registry import ModelSpec


@dataclass
class GenerationRequest:
    key: str  # e.g. the instance_id; echoed back in the result
    prompt: str  # the user message, before any chat template
    max_new_tokens: int


@dataclass
class GenerationResult:
    key: str
    output: str
    prompt_tokens: int  # tokens fed to the model, chat template included, after truncation
    original_prompt_tokens: int  # the same count before truncation
    truncated: bool
    completion_tokens: int  # generated tokens, without padding and the stop token
    finish_reason: str  # "stop" (a stop token was produced) | "length" (max_new_tokens reached)
    latency_s: float  # wall time of the request's batch divided by the batch size


@runtime_checkable
class Generator(Protocol):
    backend: str
    model_id: str

    def sampling_params(self) -> dict:
        """Decoding settings, recorded (as JSON) with every generation."""
        ...

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        """One result per request, in request order. After each batch, ``progress(n)`` gets
        the number of requests that batch finished (an increment: ``tqdm.update`` fits)."""
        ...


_RESERVED = {
    "vllm": "the vLLM backend is not implemented yet (planned for GPU runs)",
    "openai": "the OpenAI-compatible API backend is not implemented yet",
    "llama_cpp": "the llama.cpp backend is not implemented yet (llama_cpp is not installed)",
}


def make_generator(spec: ModelSpec) -> Generator:
    """The generator for ``spec``. Cheap: no model is loaded until the first ``generate``."""
    if spec.backend == "transformers":
        # Imported here so that building configs and schemas never imports torch.
        from lc_pipeline.generate.transformers_backend import TransformersGenerator

        return TransformersGenerator(spec)
    if spec.backend in _RESERVED:
        raise NotImplementedError(
            f"model {spec.slug!r}: backend {spec.backend!r} is reserved: {_RESERVED[spec.backend]}; "
            "use backend 'transformers'"
        )
    raise ValueError(f"model {spec.slug!r}: unknown backend {spec.backend!r}")
