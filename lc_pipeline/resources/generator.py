"""Models: the registry (slug -> settings) and generators cached per process.

A generator holds model weights; steps of one in-process run (e.g. ``lcp demo``) share it
instead of loading the model once per length partition.
"""

from __future__ import annotations

import threading

import dagster as dg

from lc_pipeline.generate.base import Generator, make_generator
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec

_CACHE: dict[str, Generator] = {}
_LOCK = threading.Lock()


class ModelsResource(dg.ConfigurableResource):
    registry_path: str = "models.yaml"

    def registry(self) -> ModelRegistry:
        return ModelRegistry(self.registry_path)

    def spec(self, slug: str) -> ModelSpec:
        return self.registry().get(slug)

    def generator(self, slug: str) -> Generator:
        spec = self.spec(slug)
        key = f"{slug}:{spec.fingerprint()}"
        with _LOCK:
            if key not in _CACHE:
                _CACHE[key] = make_generator(spec)
            return _CACHE[key]
