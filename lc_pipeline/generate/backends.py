"""Generation backends by name: ``ModelSpec.backend`` -> the ``Generator`` class that serves it, and what it can do.

Each entry is a ``"module:Class"`` string imported on first lookup, so building configs and
schemas never imports torch, llama_cpp, openai or vllm, and this module imports no backend
(the backends import generate.base; nothing here imports them back: no cycle).

Beside its class each backend declares its :class:`BackendCapabilities` once (``CAPABILITIES``): how many requests
go to it per call, who renders a chat request, how ``lcp plan`` fits a prompt, whether it holds an engine, which
backend-specific ``ModelSpec`` options it reads. Code elsewhere asks :func:`capabilities` instead of comparing a
spec's ``backend`` with a name (tests/unit/test_backend_capabilities.py checks that none does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lc_pipeline.tasks.registry import Registry

if TYPE_CHECKING:
    from lc_pipeline.generate.base import Generator
    from lc_pipeline.generate.registry import ModelSpec

GENERATORS: Registry = Registry("backend", {
    "transformers": "lc_pipeline.generate.transformers_backend:TransformersGenerator",  # CPU or one GPU
    "llamacpp": "lc_pipeline.generate.llamacpp_backend:LlamaCppGenerator",  # in-process llama-cpp-python
    "openai": "lc_pipeline.generate.openai_backend:OpenAIGenerator",  # any OpenAI-compatible server
    "vllm": "lc_pipeline.generate.vllm_backend:VLLMGenerator",  # offline engine, whole partitions
    "imported": "lc_pipeline.generate.imported_backend:ImportedGenerator",  # predictions made elsewhere, by record
})

# A backend's model with ``serve: server`` (ModelSpec.serve): run by a server the project starts, not in-process.
SERVED_GENERATORS: Registry = Registry("served backend", {
    "vllm": "lc_pipeline.generate.vllm_server:VLLMServerGenerator",  # vLLM's OpenAI server on loopback
})

# How many requests a backend takes per call (BackendCapabilities.requests_per_call; partition.chunk_size).
WHOLE_PARTITION = "partition"  # every request of a partition at once
FLUSHED_BATCHES = "batches"  # batch_size * FLUSH_EVERY_BATCHES at a time
ONE_REQUEST = "one"  # one at a time, each stored when done
REQUESTS_PER_CALL = (WHOLE_PARTITION, FLUSHED_BATCHES, ONE_REQUEST)

# How `lcp plan` renders and fits a prompt without loading weights (BackendCapabilities.prompt_fit; planning.py).
COUNTED_ONLY = "counted"  # nothing is generated: the prompt is counted with the spec's tokenizer (tiktoken default)
GENERATOR_FIT = "generator"  # the generator's own ``fit``, which needs its tokenizer only
HF_TOKENIZER_FIT = "hf_tokenizer"  # the Hugging Face tokenizer it loads with the weights
GGUF_VOCAB_FIT = "gguf_vocab"  # the GGUF file's vocabulary (vocab_only)
SHARED_FIT = "shared"  # the spec's tokenizer through prompting.fit_request
PROMPT_FITS = (COUNTED_ONLY, GENERATOR_FIT, HF_TOKENIZER_FIT, GGUF_VOCAB_FIT, SHARED_FIT)

# ModelSpec fields read by one backend only; every other backend leaves them at their defaults.
SERVER_OPTIONS = frozenset({"api", "api_model", "base_url", "api_key_env", "max_concurrency", "request_timeout_s",
                            "max_retries", "retry_timeouts", "send_token_ids", "extra_body"})
ENGINE_OPTIONS = frozenset({"tensor_parallel_size", "gpu_memory_utilization", "enable_prefix_caching",
                            "kv_cache_gib", "enforce_eager", "engine_options", "serve"})
BACKEND_OPTIONS = SERVER_OPTIONS | ENGINE_OPTIONS


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend does, as the code around it needs to know it, readable without importing the backend.

    ``calls_a_model``: False for a backend that looks answers up (imported predictions): it has no model files, and
    its steps need no pooled model. ``requests_per_call``: :data:`WHOLE_PARTITION`, :data:`FLUSHED_BATCHES` or
    :data:`ONE_REQUEST`. ``server_chat_api``: the ``api`` value under which requests go to a server as chat messages
    (None: never): the server then renders them with its own template and may return a reasoning model's thoughts
    apart from its answer. ``prompt_fit``: how ``lcp plan`` fits a prompt without weights (:data:`PROMPT_FITS`).
    ``parallel_requests``: requests in flight at once come from ``max_concurrency`` (else one at a time).
    ``holds_engine``: its generator holds an engine or a server process, and its GPU memory, until closed (the
    runner releases it after each model). ``options``: the backend-specific ``ModelSpec`` fields it reads
    (:data:`BACKEND_OPTIONS`); ``tensor_parallel_size`` among them means one model spreads over that many GPUs.
    """

    calls_a_model: bool = True
    requests_per_call: str = ONE_REQUEST
    server_chat_api: str | None = None
    prompt_fit: str = SHARED_FIT
    parallel_requests: bool = False
    holds_engine: bool = False
    options: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.requests_per_call not in REQUESTS_PER_CALL:
            raise ValueError(f"requests_per_call {self.requests_per_call!r}: expected one of {list(REQUESTS_PER_CALL)}")
        if self.prompt_fit not in PROMPT_FITS:
            raise ValueError(f"prompt_fit {self.prompt_fit!r}: expected one of {list(PROMPT_FITS)}")
        unknown = sorted(self.options - BACKEND_OPTIONS)
        if unknown:
            raise ValueError(f"options {unknown}: not backend-specific ModelSpec fields {sorted(BACKEND_OPTIONS)}")

    def reads(self, option: str) -> bool:
        """Whether the backend reads the backend-specific ``ModelSpec`` field ``option``."""
        return option in self.options

    def server_renders_chat(self, api: str) -> bool:
        """Whether a request with ``api`` goes to a server as chat messages (it applies the chat template)."""
        return self.server_chat_api is not None and api == self.server_chat_api


CAPABILITIES: dict[str, BackendCapabilities] = {
    "transformers": BackendCapabilities(requests_per_call=FLUSHED_BATCHES, prompt_fit=HF_TOKENIZER_FIT),
    "llamacpp": BackendCapabilities(requests_per_call=ONE_REQUEST, prompt_fit=GGUF_VOCAB_FIT),
    # A window of max_concurrency requests always in flight, each answer stored as it arrives.
    "openai": BackendCapabilities(requests_per_call=WHOLE_PARTITION, server_chat_api="chat", prompt_fit=GENERATOR_FIT,
                                  parallel_requests=True, options=SERVER_OPTIONS),
    # The engine batches a whole partition continuously; its engine (or server) holds the GPUs until closed.
    "vllm": BackendCapabilities(requests_per_call=WHOLE_PARTITION, prompt_fit=GENERATOR_FIT, holds_engine=True,
                                options=ENGINE_OPTIONS),
    # A lookup by record, no model.
    "imported": BackendCapabilities(calls_a_model=False, requests_per_call=WHOLE_PARTITION, prompt_fit=COUNTED_ONLY),
}


def capabilities(backend: str) -> BackendCapabilities:
    """What ``backend`` can do (``CAPABILITIES``); an unknown name is a ValueError listing the known ones."""
    if backend not in CAPABILITIES:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(sorted(CAPABILITIES))}")
    return CAPABILITIES[backend]


def backends_reading(option: str) -> list[str]:
    """The backends that read the backend-specific ``ModelSpec`` field ``option``, by name."""
    return [name for name, caps in CAPABILITIES.items() if caps.reads(option)]


def server_chat_backends() -> str:
    """The backends whose requests can go to a server as chat messages, in words: "backend 'openai' with api
    'chat'" (messages that say what a setting needs)."""
    return " or ".join(f"backend {name!r} with api {caps.server_chat_api!r}" for name, caps in CAPABILITIES.items()
                       if caps.server_chat_api is not None)


def make_generator(spec: ModelSpec) -> Generator:
    """The generator for ``spec``. Cheap: no model is loaded until the first ``generate``.

    An unknown backend is a ValueError naming the model and the known backends. A vllm model with
    ``serve: server`` runs through a server the project starts (vllm_server.py) instead of an engine.
    """
    generator_class = GENERATORS.get(spec.backend, where=f"model {spec.slug!r}")
    if spec.serve == "server":
        generator_class = SERVED_GENERATORS.get(spec.backend, where=f"model {spec.slug!r} (serve: server)")
    return generator_class(spec)
