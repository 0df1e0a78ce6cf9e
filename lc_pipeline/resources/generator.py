"""Models: the registry (slug -> settings), truncation overrides, generators cached per process.

A generator holds model weights; steps of one in-process run (e.g. ``lcp demo``, ``lcp backfill``)
share it instead of loading the model once per length partition. That includes a vLLM engine or a
vLLM server the project started (``serve: server``): one start per model per run. The runner
releases them when it is done with a model (``release_engines``, also on an error or Ctrl-C), so a
GPU holds one such model at a time; whatever is still held when the process exits is closed then
(``release_all``, registered with atexit), so the process exits instead of waiting on the engine's
processes. A run whose steps each get a process (the multiprocess executor of the UI and the
daemon) starts one engine per step; to start it once, run ``vllm serve`` yourself and register the
model as ``backend: openai`` (docs/vllm.md).
"""

from __future__ import annotations

import atexit
import json
import threading

import dagster as dg

from lc_pipeline.construct.truncation import validate_policy
from lc_pipeline.generate.backends import CAPABILITIES, make_generator
from lc_pipeline.generate.base import Generator
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec

_CACHE: dict[str, Generator] = {}  # "<slug>:<hash of its settings>" -> generator
_LOCK = threading.Lock()
# Backends whose generator holds an engine or a server process (and its GPU memory) until closed.
ENGINE_BACKENDS = tuple(name for name, caps in CAPABILITIES.items() if caps.holds_engine)
_EXIT_HOOK: list[bool] = []  # non-empty once release_all is registered with atexit


def _settings_key(slug: str, spec: ModelSpec) -> str:
    # The fingerprint (it hashes a chat template file's content) and every setting: serve, kv_cache_gib etc.
    # change the engine, not the outputs.
    return f"{slug}:{spec.fingerprint()}:{json.dumps(spec.settings(), sort_keys=True, default=str)}"


def _close(keys: list[str]) -> None:
    """Pop and close the generators under ``keys`` (caller holds _LOCK); every one is closed even when one
    fails, then the first failure is raised."""
    failure: BaseException | None = None
    for key in keys:
        close = getattr(_CACHE.pop(key), "close", None)
        if close is None:
            continue
        try:
            close()
        except BaseException as exc:  # noqa: BLE001 - the others still have to be closed
            failure = failure or exc
    if failure is not None:
        raise failure


def release_all() -> None:
    """Close every cached generator (at process exit: before multiprocessing joins the engine's processes)."""
    with _LOCK:
        _close(list(_CACHE))


def _register_exit_hook() -> None:
    if _EXIT_HOOK:
        return
    # atexit runs the last registered first: importing multiprocessing.util first (it registers the join of
    # child processes when imported) makes release_all run before that join, not after it.
    import multiprocessing.util  # noqa: F401

    atexit.register(release_all)
    _EXIT_HOOK.append(True)


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
        key = _settings_key(slug, spec)
        with _LOCK:
            if key not in _CACHE:
                # The model's settings changed since its generator was made: the old one goes first.
                _close([k for k in _CACHE if k.split(":", 1)[0] == slug])
                _register_exit_hook()
                _CACHE[key] = make_generator(spec)
            return _CACHE[key]

    def release(self, slug: str) -> None:
        """Drop the cached generator of ``slug`` and free what it holds (weights, a vLLM engine or server)."""
        with _LOCK:
            _close([k for k in _CACHE if k.split(":", 1)[0] == slug])

    def release_engines(self, slug: str | None = None) -> list[str]:
        """Close the cached generators that hold an engine or a server (ENGINE_BACKENDS) of ``slug``, or of every
        model when None; other generators stay cached. Returns the slugs released."""
        with _LOCK:
            keys = [k for k, gen in _CACHE.items() if getattr(gen, "backend", None) in ENGINE_BACKENDS
                    and (slug is None or k.split(":", 1)[0] == slug)]
            _close(keys)
        return [k.split(":", 1)[0] for k in keys]
