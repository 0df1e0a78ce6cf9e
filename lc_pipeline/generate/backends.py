"""Generation backends by name: ``ModelSpec.backend`` -> the ``Generator`` class that serves it.

Each entry is a ``"module:Class"`` string imported on first lookup, so building configs and
schemas never imports torch, llama_cpp, openai or vllm, and this module imports no backend
(the backends import generate.base; nothing here imports them back: no cycle).
"""

from __future__ import annotations

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


def make_generator(spec: ModelSpec) -> Generator:
    """The generator for ``spec``. Cheap: no model is loaded until the first ``generate``.

    An unknown backend is a ValueError naming the model and the known backends. A vllm model with
    ``serve: server`` runs through a server the project starts (vllm_server.py) instead of an engine.
    """
    generator_class = GENERATORS.get(spec.backend, where=f"model {spec.slug!r}")
    if spec.serve == "server":
        generator_class = SERVED_GENERATORS.get(spec.backend, where=f"model {spec.slug!r} (serve: server)")
    return generator_class(spec)
