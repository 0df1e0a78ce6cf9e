"""Models: the registry (slug -> settings), truncation overrides, generators cached per process.

A generator holds model weights; steps of one in-process run (e.g. ``lcp demo``) share it
instead of loading the model once per length partition. A vLLM engine is released at the
end of its step instead (``release``), so a GPU holds one engine at a time.
"""

from __future__ import annotations

import threading

import dagster as dg

from lc_pipeline.construct.truncation import validate_policy
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import Generator
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec

_CACHE: dict[str, Generator] = {}
_LOCK = threading.Lock()


class ModelsResource(dg.ConfigurableResource):
    registry_path: str = "models.yaml"
    # task -> truncation policy ("middle" | "end_of_context" | "drop_documents" | "skip"); "*" for every
    # task. These win over a model's own ``truncation`` (models.yaml), which wins over the task file's
    # ``truncation`` (LongBench/LV-Eval middle, HELMET end of context, Loong whole documents).
    truncation_overrides: dict[str, str] = {}

    def registry(self) -> ModelRegistry:
        return ModelRegistry(self.registry_path)

    def spec(self, slug: str) -> ModelSpec:
        return self.registry().get(slug)

    def policies(self) -> dict[str, str]:
        for task, policy in self.truncation_overrides.items():
            validate_policy(policy, f"models.truncation_overrides[{task!r}]")
        return dict(self.truncation_overrides)

    def generator(self, slug: str) -> Generator:
        spec = self.spec(slug)
        key = f"{slug}:{spec.fingerprint()}"
        with _LOCK:
            if key not in _CACHE:
                _CACHE[key] = make_generator(spec)
            return _CACHE[key]

    def release(self, slug: str) -> None:
        """Drop the cached generator of ``slug`` and free what it holds (a vLLM engine)."""
        with _LOCK:
            for key in [k for k in _CACHE if k.split(":", 1)[0] == slug]:
                gen = _CACHE.pop(key)
                close = getattr(gen, "close", None)
                if close is not None:
                    close()
