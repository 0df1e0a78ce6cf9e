"""Generation through any OpenAI-compatible server: ``vllm serve``, llama.cpp's server, OpenAI.

**The window.** A partition's requests go out through one client on one event loop (both kept per thread
for the generator's life, so later partitions reuse the connections), ``spec.max_concurrency`` workers
each taking the next request as soon as its last one is answered: ``max_concurrency`` requests are in
flight from the first to the last, with no barrier between groups of them. Each result goes to
``on_result`` the moment it arrives (generate_partition stores it at once) and to ``progress``.
After a request has failed for good no new one starts; those in flight finish (and are stored), then
the failure is raised.

**Retries** are ours, not the openai client's (its ``max_retries`` is 0), so that each one is logged (one
line: model, request, attempt, reason, wait) and a timeout is not sent again by default:
- retried, ``spec.max_retries`` times with the client's schedule (0.5 s doubling up to 8 s, less up to
  25 % jitter, :func:`_backoff_s`; a ``Retry-After`` of up to 120 s instead): connection errors, HTTP
  408/409/429/5xx (or what an ``x-should-retry`` header says), a 200 that is not a completion (a body cut
  off or not JSON, no choices: :class:`MalformedReply`);
- a timeout only with ``spec.retry_timeouts`` (default off: the server may still be computing the request,
  and a one-slot server would then compute it twice);
- never: any other 4xx, and a server's validation error (e.g. llama-cpp-python's HTTP 500 "N validation
  errors"): such a request cannot succeed.
A call that still fails raises an error naming the model, the request and what the server did, its reply
cut to a few hundred characters, the key scrubbed from it (:func:`describe_failure`). Token usage comes from
the server's ``usage`` field.

Two modes (``spec.api``):
- ``chat``: the user prompt goes out as a chat message and the *server* applies the model's
  template; we render it locally with the same template only to count and truncate.
- ``completions``: we render the template ourselves (or the plain prompt for base models)
  and send the token ids, so the server sees exactly the ids we counted (vLLM, llama.cpp's
  own server and OpenAI accept token arrays). For servers that take only strings
  (llama-cpp-python's), ``send_token_ids: false`` sends the rendered text. A server that refuses token
  ids (a validation error before any token-id request of it succeeded) is learned once per process: the
  log says so once, with the models.yaml fix, and the request and every later one to that server go out
  as text.

**The task's template switch** (a task file's ``chat_template: false``: LongBench's few-shot and code tasks, HELMET's
RAG, recall and re-rank) holds in chat mode too: such a request of a chat model goes to the completions
endpoint with the plain prompt (as ids, or as text where the server takes only text, as above), fitted as in
completions mode, and its row says ``chat_template_source`` "none". A server that has no completions endpoint (a
404, 405 or 501, or a 400 saying the endpoint or model does not support it, before any completions request of
it succeeded) is learned once per process, with one warning: that request and every later plain one to it go
out as chat messages, so the server's template is applied against the task's switch, and their rows say so:
``chat_template_source`` :data:`FORCED_TEMPLATE` (never silently templated).

Under a ``prompt_middle:<budget>`` policy (a benchmark's official protocol) the prompt is cut to the protocol's
budget before the template in either mode (prompting.fit_request / fit_prompt_budget), as the authors' harness
cuts it.

A request under truncation policy ``skip`` whose prompt does not fit (counted as above) is never sent: its
result says ``status: skipped`` (prompting.skipped_result). What was fed is recorded per row: in completions
mode the hash and BOS count of the ids we rendered; when the text went out instead, the server tokenized it:
the same record while its count (``usage.prompt_tokens``) agrees with ours, and ``prompt_ids_hash`` "" /
``bos_tokens`` null (unknown: what it fed is not what we rendered) when it does not, with a warning. The
template is ours either way (``chat_template_source`` "model", "file:..." or "none"). In chat mode the server
renders the prompt (``chat_template_source`` "server", no hash, BOS count unknown).

**An official protocol's API decoding** (``GenerationRequest.api``, base.ApiDecoding, declared by the benchmark's
protocol module): the request goes out without ``max_tokens`` and / or ``temperature`` where the authors' API
script sends none (the server's defaults; :func:`request_body`), with the protocol's system turn before the prompt
in place of the model's ``system_prompt`` (in completions mode, rendered into the template). The prompt is still
fitted with ``max_new_tokens`` reserved for the answer, and a reply is checked against the window instead of the
cap (:meth:`OpenAIGenerator.reply_cap`).

A reasoning model's thoughts (``thinking: {location: field}``), which the server returns apart from the answer
in a chat completion's message (``reasoning_content``: vLLM, llama.cpp's server, DeepSeek; ``reasoning``:
OpenRouter, newer vLLM), go into ``GenerationResult.thinking`` (:func:`reasoning_field`); generate/thinking.py
decides the row's status from them.

Where the server is: ``spec.base_url``, else ``$OPENAI_BASE_URL``. The key: the variable
named by ``spec.api_key_env`` (default ``OPENAI_API_KEY``); it is never logged or recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import math
import random
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from lc_pipeline.construct.truncation import FittedPrompt, prompt_budget_name
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.prompting import (
    PromptTokenizer,
    chat_ids,
    fed_prompt_fields,
    fit_prompt_budget,
    fit_request,
    load_tokenizer,
    messages_for,
    render_ids,
    skipped_result,
)
from lc_pipeline.generate.registry import ModelSpec, redact_url
from lc_pipeline.settings import env, key_in

log = logging.getLogger(__name__)

# A self-hosted server without authentication still needs some key in the client.
_NO_KEY = "no-key-needed"
_KEY_LIKE = re.compile(r"sk-[A-Za-z0-9_*\-]{4,}")
# Statuses retried besides 5xx; any other 4xx is the request's fault and is not retried.
_RETRIED_STATUSES = (408, 409, 429)
# A Retry-After longer than this is not waited for (the openai client's limit): the call fails instead.
MAX_RETRY_AFTER_S = 120.0
# How much of a server's reply an error message or a retry line quotes.
REPLY_CHARS = 300
_VALIDATION_ERROR = re.compile(r"validation errors?\b", re.IGNORECASE)


def scrub(text: str, secret: str | None) -> str:
    """``text`` without the key: the exact value, and key-like strings (servers echo masked keys)."""
    if secret and secret != _NO_KEY:
        text = text.replace(secret, "***")
    return _KEY_LIKE.sub("sk-***", text)


def shorten(text: str, limit: int = REPLY_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


# A chat completion message's field for a reasoning model's thoughts, by server (first one set wins).
REASONING_FIELDS = ("reasoning_content", "reasoning")


def reasoning_field(message: Any) -> str:
    """The thoughts a server returned beside a chat completion's content ("" if none): fields the openai client
    does not declare, which it keeps in ``model_extra``."""
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = extra.get(name, getattr(message, name, None))
        if isinstance(value, str) and value:
            return value
    return ""


class MalformedReply(ValueError):
    """The server answered 200, but not with a completion."""


# A reply is a completion of its request while its length is at most twice the max_tokens asked for plus this margin
# (our tokenizer may count the server's model's tokens differently); a token is at most this many characters.
LENGTH_MARGIN_TOKENS = 16
MAX_CHARS_PER_TOKEN = 64


def token_limit(max_new_tokens: int) -> int:
    """The most tokens a reply to ``max_tokens`` = ``max_new_tokens`` may count (ours or the server's)."""
    return 2 * max_new_tokens + LENGTH_MARGIN_TOKENS


def reply_text(value: Any, field: str) -> str:
    """A choice's text: a string, or None / absent for an empty answer; anything else is a :class:`MalformedReply`
    (issue 31 D8: an int, a list or an object ended in an AttributeError traceback)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReply(f"the reply's {field} is {type(value).__name__} {shorten(repr(value), 60)}, not a string")
    return value


def finish_reason(choice: Any) -> str:
    """The row's finish reason in the table's terms: "length" when the server says the answer was cut at
    max_tokens, else "stop" (a missing, odd or 5,000-character value included)."""
    return "length" if getattr(choice, "finish_reason", None) == "length" else "stop"


def request_body(req: GenerationRequest) -> dict:
    """The decoding fields of ``req``'s body: ``max_tokens`` (its ``max_new_tokens``), ``temperature`` 0 (or an
    official protocol's sampling temperature with ``top_p`` 1 and the request's seed), ``seed`` 0 and no penalties;
    an official protocol's API decoding (``req.api``, base.ApiDecoding) leaves out ``max_tokens`` and / or
    ``temperature``, so the server's defaults apply, as the authors' API scripts send them."""
    body: dict = {"max_tokens": req.max_new_tokens, "temperature": 0.0, "seed": 0, "frequency_penalty": 0.0,
                  "presence_penalty": 0.0}
    if req.sampled:  # an official protocol's sampling (GenerationRequest.temperature), seeded per instance
        body.update(temperature=req.temperature, top_p=1.0, seed=req.seed)
    if req.api is not None:
        if not req.api.send_max_tokens:
            del body["max_tokens"]
        if not req.api.send_temperature:
            del body["temperature"]
    return body


def _backoff_s(attempt: int) -> float:
    # The openai client's own schedule: 0.5 s doubling up to 8 s, less up to 25 % jitter.
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


def _malformed(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError, MalformedReply))


def is_validation_error(exc: BaseException) -> bool:
    """The server could not validate the request (a 400/422, or llama-cpp-python's HTTP 500 "N validation
    errors" for a prompt of token ids): sending it again cannot help."""
    status = getattr(exc, "status_code", None)
    return status in (400, 422, 500) and bool(_VALIDATION_ERROR.search(str(exc)))


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a failed reply asks for (``retry-after-ms``, ``retry-after`` in seconds or as a date), if any."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            pass
    parsed = email.utils.parsedate_tz(headers.get("retry-after") or "")
    return float(email.utils.mktime_tz(parsed) - time.time()) if parsed is not None else None


def retry_reason(exc: BaseException, retry_timeouts: bool) -> str | None:
    """Why a failed call may be sent again (for the retry's log line), None when it must not be."""
    import openai

    if _malformed(exc):
        return f"not a completion ({type(exc).__name__})"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out" if retry_timeouts else None
    if isinstance(exc, openai.APIConnectionError):
        return "connection error"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        wait = retry_after_s(exc)
        if wait is not None and math.isfinite(wait) and wait > MAX_RETRY_AFTER_S:
            return None
        should = exc.response.headers.get("x-should-retry")
        if should in ("true", "false"):
            return f"HTTP {status}" if should == "true" else None
        if is_validation_error(exc):
            return None
        if status in _RETRIED_STATUSES or status >= 500:
            return f"HTTP {status}"
    return None


async def gather_bounded(jobs: Sequence[Callable[[], Awaitable[Any]]], max_concurrency: int) -> list[Any]:
    """Results of ``jobs`` in order, at most ``max_concurrency`` running at once.

    After the first failure no job that has not started starts (each would be another paid
    request, and with one at a time the next one would otherwise slip in as the failed one
    frees its slot); the failure is raised. Jobs already in flight are cancelled with the loop.
    """
    limit = asyncio.Semaphore(max_concurrency)
    failed = False

    async def run(job: Callable[[], Awaitable[Any]]) -> Any:
        nonlocal failed
        async with limit:
            if failed:
                return None  # never seen: gather has already raised the failure
            try:
                return await job()
            except BaseException:
                failed = True  # set before the slot is released
                raise

    return list(await asyncio.gather(*(run(j) for j in jobs)))


async def create_checked(create: Callable[..., Awaitable[Any]], max_retries: int, **kwargs: Any) -> Any:
    """``await create(**kwargs)`` (a chat or text completion) whose reply has choices.

    For a client that retries failed calls itself (the judge's) but returns a 200 whose body is cut off, not
    JSON or without choices as is (or raises on parsing it): such a reply is asked for again, up to
    ``max_retries`` times with the client's backoff, then raises :class:`MalformedReply`.
    """
    for attempt in range(max_retries + 1):
        try:
            resp = await create(**kwargs)
            if not getattr(resp, "choices", None):
                raise MalformedReply("the reply has no choices")
            return resp
        except Exception as exc:
            if not _malformed(exc):
                raise
            if attempt == max_retries:
                raise MalformedReply(
                    f"{attempt + 1} replies in a row were not a completion, the last: {type(exc).__name__}: {exc}"
                ) from None
            await asyncio.sleep(_backoff_s(attempt))
    raise AssertionError("unreachable")


def describe_failure(exc: BaseException, max_retries: int, secret: str | None, timeout_s: float | None = None,
                     retried: int | None = None, timeouts_retried: bool = True) -> str:
    """How a server call ended, for an error message, without the key and with the server's reply cut to
    ``REPLY_CHARS``: refused (a 4xx that is not retried, e.g. a bad key, or a validation error), a timeout
    not retried, or failed after the retries (the last error). ``retried``: the retries made (default
    ``max_retries``); ``timeouts_retried``: whether a timeout would have been retried."""
    import openai

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # "unhandled errors in a TaskGroup": its first
        exc = exc.exceptions[0]
    status = getattr(exc, "status_code", None)
    retries = max_retries if retried is None else retried
    if isinstance(status, int) and status < 500 and status not in _RETRIED_STATUSES:
        what = f"was refused (HTTP {status}, not retried)"
    elif is_validation_error(exc):
        what = f"was refused (HTTP {status}: the server could not validate the request, not retried)"
    elif isinstance(exc, MalformedReply):
        what = f"got no usable reply after {retries} retries"
    elif isinstance(exc, openai.APITimeoutError) and not timeouts_retried:
        what = ("timed out and was not sent again (the server may still be computing it; retry_timeouts: true in "
                f"models.yaml retries timeouts{f', after {retries} retries of other errors' if retries else ''})")
    else:
        what = f"failed after {retries} retries"
    detail = f"{type(exc).__name__}: {shorten(scrub(str(exc), secret))}"
    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        # "Connection error." alone does not say refused, unresolved or reset (issue 31 D23): the first and the
        # last of the errors under it (httpx's, and the socket's).
        chain, cause = [], exc.__cause__ or exc.__context__
        while cause is not None and len(chain) < 8:
            chain.append(f"{type(cause).__name__}: {shorten(scrub(str(cause), secret), 120)}")
            cause = cause.__cause__ or cause.__context__
        if chain:
            detail += f" ({'; '.join(dict.fromkeys([chain[0], chain[-1]]))})"
    if isinstance(exc, openai.APITimeoutError) and timeout_s is not None:
        detail += f" (no reply within {timeout_s:g} s)"
    return f"{what}: {detail}"


class _Failed(Exception):
    """A call that failed for good, with the retries it was given."""

    def __init__(self, exc: BaseException, retried: int) -> None:
        super().__init__(str(exc))
        self.exc, self.retried = exc, retried


# Servers (base URL, served model) found to refuse token ids in completions mode, and those that took them:
# learned once per process, so a later partition (or generator) does not ask the first request again.
_REFUSE_TOKEN_IDS: set[tuple[str, str]] = set()
_TAKE_TOKEN_IDS: set[tuple[str, str]] = set()
# Servers found to have no completions endpoint (plain requests of a chat model then go as chat, marked), and those
# that answered one: learned once per process.
_CHAT_ONLY: set[tuple[str, str]] = set()
_TAKE_COMPLETIONS: set[tuple[str, str]] = set()
# A row whose task asked for no chat template but whose server could only chat: the server's template was applied.
FORCED_TEMPLATE = "server:forced"
_NO_COMPLETIONS_STATUSES = (404, 405, 501)
_NO_COMPLETIONS = re.compile(r"not supported|does not support|unsupported|chat model|no such endpoint|not found",
                             re.IGNORECASE)


def lacks_completions(exc: BaseException) -> bool:
    """Whether ``exc`` says the server has no completions endpoint (for this model): HTTP 404 / 405 / 501, or a 400
    whose body says the endpoint or model does not support it."""
    status = getattr(exc, "status_code", None)
    if status in _NO_COMPLETIONS_STATUSES:
        return True
    return status == 400 and bool(_NO_COMPLETIONS.search(str(exc)))


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Session:
    """One thread's event loop (an ``asyncio.Runner``) and the client whose connections live on it."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.client: Any = None

    def close(self) -> None:
        if _loop_running():
            # Collected while some loop runs in this thread (a finalizer): nothing can be awaited here; the
            # loop and its connections go with the objects.
            return
        try:
            if self.client is not None:
                self.runner.run(self.client.close())
        finally:
            self.client = None
            self.runner.close()


def _close_sessions(sessions: list[_Session]) -> None:
    while sessions:
        try:
            sessions.pop().close()
        except Exception as exc:  # noqa: BLE001  (closing: a loop of another thread still running, ...)
            log.debug("closing an openai client session: %s", exc)


class OpenAIGenerator:
    backend = "openai"
    streams_results = True  # generate() hands every result to on_result as it arrives
    honours_api_decoding = True  # an official protocol's ApiDecoding reaches the server (generate/partition.py)

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "openai":
            raise ValueError(f"model {spec.slug!r}: OpenAIGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.api_model = spec.api_model or spec.model_id
        self.model_id = self.api_model
        self._tok: PromptTokenizer | None = None
        self._local = threading.local()
        self._sessions: list[_Session] = []
        self._finalizer = weakref.finalize(self, _close_sessions, self._sessions)

    # ------------------------------------------------------------------ setup

    def base_url(self) -> str | None:
        return self.spec.base_url or env("OPENAI_BASE_URL") or None

    def server(self) -> str:
        """Where the server is, for logs: scheme, host and port only (a URL may carry credentials)."""
        url = self.base_url()
        if not url:
            return "api.openai.com"
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"

    def _api_key(self) -> str:
        key = key_in(self.spec.api_key_env)
        if key:
            return key
        if self.base_url() is None:
            raise ValueError(
                f"model {self.spec.slug!r}: no API key: set the environment variable {self.spec.api_key_env} "
                "(or base_url / OPENAI_BASE_URL for a self-hosted server without authentication)"
            )
        return _NO_KEY

    def client(self) -> Any:
        """A new AsyncOpenAI client for the server, without retries of its own (this module retries)."""
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:  # a core dependency; only a broken environment lacks it
            raise ImportError("the openai package is missing: pip install openai") from exc
        if self.spec.base_url is None and self.base_url() is not None:  # $OPENAI_BASE_URL: checked as base_url is
            from lc_pipeline.generate.registry import ModelSpecError

            try:
                dataclasses.replace(self.spec, base_url=self.base_url())
            except ModelSpecError as exc:
                raise ModelSpecError(f"{exc} (from $OPENAI_BASE_URL: the model's base_url is not set)") from None
        return AsyncOpenAI(base_url=self.base_url(), api_key=self._api_key(), timeout=self.spec.request_timeout_s,
                           max_retries=0)

    def _session(self) -> _Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = _Session()
            self._sessions.append(session)
        return session

    def close(self) -> None:
        """Close the clients and event loops (a later ``generate`` opens new ones)."""
        self._local = threading.local()
        _close_sessions(self._sessions)

    @property
    def prompt_tokenizer(self) -> PromptTokenizer:
        if self._tok is None:
            self._tok = load_tokenizer(self.spec)
        return self._tok

    def load(self) -> None:
        self.prompt_tokenizer  # noqa: B018  (the only local state: the tokenizer)

    # ------------------------------------------------------------------ prompts

    def render(self, user_text: str, system: str | None = None) -> list[int]:
        """The ids a chat request should be fed (``system``: the request's system turn, base.ApiDecoding)."""
        tok = self.prompt_tokenizer
        if self.spec.api == "chat" and self.spec.chat_template:
            ids = chat_ids(self.spec, tok, user_text, system)  # the template rendered once
            if ids is None:  # no local template (e.g. tiktoken for an API model): the user text plus a margin
                return tok.encode(user_text) + [0] * getattr(tok, "CHAT_OVERHEAD", 16)
            return ids
        return render_ids(self.spec, tok, user_text, system=system)

    @property
    def plain_prompt_route(self) -> str:
        """How a chat model's plain requests travel, for their cache keys (generate/partition.py): in chat mode they
        go to the completions endpoint (before, the server templated them), so their rows never reuse old ones."""
        return "completions-endpoint" if self.spec.api == "chat" and self.spec.chat_template else ""

    def api_for(self, request: GenerationRequest) -> str:
        """The endpoint ``request`` goes to: ``completions`` in completions mode, and in chat mode for a task that
        asks for no chat template (``request.chat_template`` false) of a chat model, unless the server was found to
        have no completions endpoint (module docstring); ``chat`` otherwise."""
        if self.spec.api == "completions":
            return "completions"
        if request.chat_template or not self.spec.chat_template or self._server_key() in _CHAT_ONLY:
            return "chat"
        return "completions"

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        """To the completions endpoint: the exact ids sent. To chat: the ids the server's template should produce
        (the server reports its own count as ``usage.prompt_tokens``). A ``prompt_middle:<budget>`` policy cuts the
        prompt to its budget before the template either way (prompting.fit_prompt_budget)."""
        from lc_pipeline.construct.truncation import fit_prompt

        tok = self.prompt_tokenizer
        if self.api_for(request) == "completions":
            return fit_request(self.spec, tok, request)
        if prompt_budget_name(request.truncation) is not None:
            return fit_prompt_budget(self.spec, tok, request,
                                     render=lambda text, chat: self.render(text, request.system))
        budget = self.spec.max_model_len - request.max_new_tokens
        if request.input_budget is not None:  # an official protocol's budget below the window's (prompting.fit_request)
            budget = min(budget, request.input_budget)
        return fit_prompt(request.prompt, budget, render=lambda text: self.render(text, request.system),
                          encode=tok.encode, decode=tok.decode,
                          policy=request.truncation, context=request.context, key=request.key)

    def sampling_params(self) -> dict:
        return greedy_params(self.spec, temperature=0.0, api=self.spec.api, extra_body=self.spec.extra_body)

    def fed_fields(self, req: GenerationRequest, fit: FittedPrompt, api: str | None = None) -> dict:
        """What a row records as fed: the server renders chat requests (:data:`FORCED_TEMPLATE` for a task that
        asked for none); completions get our ids. ``api``: the endpoint the request went to (default: where it
        goes now)."""
        if (api or self.api_for(req)) == "chat":
            forced = not req.chat_template and self.spec.chat_template
            return {"prompt_ids_hash": "", "bos_tokens": None,
                    "chat_template_source": FORCED_TEMPLATE if forced else "server"}
        return fed_prompt_fields(self.spec, self.prompt_tokenizer, fit.ids, req.chat_template)

    # ------------------------------------------------------------------ what the server takes

    def _server_key(self) -> tuple[str, str]:
        return (self.base_url() or "", self.api_model)

    def sends_text(self) -> bool:
        """Completions mode: whether prompts go out as text (``send_token_ids: false``, or the server was found
        to refuse token ids)."""
        return not self.spec.send_token_ids or self._server_key() in _REFUSE_TOKEN_IDS

    def _refuses_token_ids(self, exc: BaseException) -> bool:
        """A validation error for a token-id prompt from a server that has taken none yet: learned (logged once
        per process and server), and every later request goes out as text."""
        key = self._server_key()
        if key in _TAKE_TOKEN_IDS or not is_validation_error(exc):
            return False
        if key not in _REFUSE_TOKEN_IDS:
            _REFUSE_TOKEN_IDS.add(key)
            log.warning(
                "model %r: the server at %s refused a prompt of token ids (HTTP %s, a validation error); sending "
                "the rendered text instead from now on. To send text from the start, put `send_token_ids: false` in "
                "the model's entry in models.yaml (that changes the model's fingerprint: its stored rows would be "
                "generated again)", self.spec.slug, self.server(), getattr(exc, "status_code", "?"))
        return True

    def _has_no_completions(self, exc: BaseException) -> bool:
        """A chat model's plain request refused because the server has no completions endpoint (and none of its
        completions requests succeeded yet): learned (one warning per process and server); every later plain
        request goes out as chat, its row marked :data:`FORCED_TEMPLATE`."""
        key = self._server_key()
        if key in _TAKE_COMPLETIONS or not lacks_completions(exc):
            return False
        if key not in _CHAT_ONLY:
            _CHAT_ONLY.add(key)
            log.warning(
                "model %r: the server at %s has no completions endpoint (HTTP %s: %s); the tasks that run without the "
                "chat template (chat_template: false) are sent as chat messages from now on, so the server applies "
                "its template to them: their generations rows say chat_template_source %r. Serve the model with a "
                "completions endpoint to run them as their task files say", self.spec.slug, self.server(),
                getattr(exc, "status_code", "?"), shorten(scrub(str(exc), None), 160), FORCED_TEMPLATE)
        return True

    # ------------------------------------------------------------------ generation

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[GenerationResult], None] | None = None,
    ) -> list[GenerationResult]:
        """One result per request, in order; each also to ``progress(1)`` and ``on_result`` as it arrives."""
        if not requests:
            return []
        fitted = [self.fit(r) for r in requests]  # tokenizer work, before any request goes out
        session = self._session()
        return session.runner.run(self._generate_all(session, requests, fitted, progress, on_result))

    async def _generate_all(
        self,
        session: _Session,
        requests: Sequence[GenerationRequest],
        fitted: list[FittedPrompt],
        progress: Callable[[int], None] | None,
        on_result: Callable[[GenerationResult], None] | None,
    ) -> list[GenerationResult]:
        if session.client is None:
            session.client = self.client()
        client = session.client
        results: list[GenerationResult | None] = [None] * len(requests)
        failures: list[BaseException] = []
        interrupts: list[BaseException] = []  # Ctrl-C raised in a worker: ``on_result`` stops on a signal
        queue = iter(range(len(requests)))  # shared: each worker takes the next request when it is free

        async def worker() -> None:
            for i in queue:
                if failures:
                    return  # no new request after a failure; the ones in flight finish
                try:
                    result = await self._one(client, requests[i], fitted[i], lambda: bool(failures))
                    results[i] = result
                    if on_result is not None:  # stored first, then counted: the bar never shows an unstored answer
                        on_result(result)
                    if progress is not None:
                        progress(1)
                except Exception as exc:  # noqa: BLE001  (the first one is raised below)
                    failures.append(exc)
                    return
                except KeyboardInterrupt as exc:  # asyncio would raise it out of the loop with the workers running
                    interrupts.append(exc)
                    for other in workers:  # the requests in flight are dropped: their answers are not awaited
                        if other is not asyncio.current_task():
                            other.cancel()
                    return

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.spec.max_concurrency, len(requests)))]
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            if not interrupts:
                raise
        finally:
            for w in workers:  # cancelled with us (Ctrl-C): none left running on the kept loop
                w.cancel()
        if interrupts:
            await asyncio.gather(*workers, return_exceptions=True)  # the cancelled ones end here, not later
            raise interrupts[0]
        if failures:
            raise failures[0]
        return [r for r in results if r is not None]

    async def _one(self, client: Any, req: GenerationRequest, fit: FittedPrompt,
                   stopping: Callable[[], bool]) -> GenerationResult:
        if fit.skipped:  # policy skip, over the window: no call is made
            return skipped_result(req, fit, self.fed_fields(req, fit)["chat_template_source"])
        secret = client.api_key
        t0 = time.perf_counter()
        try:
            text, finish, usage, thoughts, as_text, api = await self._ask(client, req, fit, stopping)
        except _Failed as failed:
            # Not chained (``from None``): the original error may quote the key.
            raise RuntimeError(
                f"model {self.spec.slug!r}, request {req.key!r}: the server call "
                f"{describe_failure(failed.exc, self.spec.max_retries, secret, self.spec.request_timeout_s, failed.retried, self.spec.retry_timeouts)}"
                f"; server {redact_url(self.base_url()) or 'api.openai.com'}"
            ) from None
        latency = time.perf_counter() - t0
        fed = self.fed_fields(req, fit, api)
        prompt_tokens = self._count(usage, "prompt_tokens", 2 * max(self.spec.max_model_len, len(fit.ids)),
                                    lambda: len(fit.ids), req.key)
        completion_tokens = self._count(usage, "completion_tokens", token_limit(self.reply_cap(req)),
                                        lambda: len(self.prompt_tokenizer.encode(thoughts + text)), req.key)
        if as_text and usage is not None and prompt_tokens != len(fit.ids):
            log.warning(
                "model %r, request %r: the server counted %d prompt tokens for the text, we rendered %d "
                "(does it add a BOS?)", self.spec.slug, req.key, prompt_tokens, len(fit.ids),
            )
            fed = {**fed, "prompt_ids_hash": "", "bos_tokens": None}  # it fed other ids than ours: unknown
        return GenerationResult(
            key=req.key,
            output=text.strip(),
            prompt_tokens=prompt_tokens,
            original_prompt_tokens=fit.original_tokens,
            truncated=fit.truncated,
            completion_tokens=completion_tokens,
            finish_reason=finish,
            latency_s=latency,
            truncation_policy=fit.policy,
            **fed,
            thinking=thoughts,
        )

    async def _ask(self, client: Any, req: GenerationRequest, fit: FittedPrompt,
                   stopping: Callable[[], bool]) -> tuple[str, str | None, Any, str, bool, str]:
        """The call with its retries (module docstring): (reply text, finish reason, usage, reasoning, whether
        the prompt went out as text, the endpoint it went to). Raises :class:`_Failed`."""
        retried = malformed = 0
        while True:
            api = self.api_for(req)
            as_text = api == "completions" and self.sends_text()
            try:
                reply = await self._within_deadline(self._call(client, req, fit, as_text, api), api)
                if api == "completions":
                    _TAKE_COMPLETIONS.add(self._server_key())
                    if not as_text:
                        _TAKE_TOKEN_IDS.add(self._server_key())
                return (*reply, as_text, api)
            except Exception as exc:  # noqa: BLE001  (sorted out below; raised as _Failed)
                if api == "completions" and not as_text and self._refuses_token_ids(exc):
                    continue  # the same request at once, as text (not a retry)
                if api == "completions" and self.spec.api == "chat" and self._has_no_completions(exc):
                    continue  # the same request at once, as chat (not a retry), its row marked
                malformed = malformed + 1 if _malformed(exc) else 0
                reason = retry_reason(exc, self.spec.retry_timeouts)
                if reason is None or retried >= self.spec.max_retries or stopping():
                    if malformed:
                        exc = MalformedReply(f"{malformed} replies in a row were not a completion, the last: "
                                             f"{type(exc).__name__}: {exc}")
                    raise _Failed(exc, retried) from None
                asked = retry_after_s(exc)
                wait = asked if asked is not None and 0 < asked <= MAX_RETRY_AFTER_S else _backoff_s(retried)
                retried += 1
                log.warning("model %r, request %r: attempt %d of %d failed (%s: %s); retrying in %.1f s",
                            self.spec.slug, req.key, retried, self.spec.max_retries + 1, reason,
                            shorten(scrub(str(exc), client.api_key), 160), wait)
                await asyncio.sleep(wait)

    async def _within_deadline(self, call: Awaitable[Any], api: str) -> Any:
        """``call`` bounded by ``spec.request_timeout_s`` of wall-clock time, connection to last byte (issue 31 D7:
        httpx's timeout bounds each read, so a server sending a byte a second held a request for minutes). Expiry
        is an ``openai.APITimeoutError``: retried only with ``retry_timeouts``, described as a timeout."""
        try:
            return await asyncio.wait_for(call, self.spec.request_timeout_s)
        except TimeoutError:
            import httpx
            import openai

            raise openai.APITimeoutError(request=httpx.Request("POST", f"{self.server()}/{api}")) from None

    async def _call(self, client: Any, req: GenerationRequest, fit: FittedPrompt,
                    as_text: bool, api: str | None = None) -> tuple[str, str | None, Any, str]:
        """(reply text, finish reason, usage, the server's separate reasoning: "" for text completions), from the
        endpoint ``api`` (default: the model's)."""
        api = api or self.spec.api
        common = {"model": self.api_model, **request_body(req)}
        if self.spec.extra_body:
            common["extra_body"] = self.spec.extra_body
        if api == "chat":
            resp = await client.chat.completions.create(messages=messages_for(self.spec, fit.text, req.system),
                                                        **common)
        else:
            prompt = self.prompt_tokenizer.decode(fit.ids) if as_text else fit.ids
            resp = await client.completions.create(prompt=prompt, **common)
        if not getattr(resp, "choices", None):
            raise MalformedReply("the reply has no choices")
        choice = resp.choices[0]
        if api == "chat":
            message = getattr(choice, "message", None)
            if message is None:
                raise MalformedReply("the reply's choice has no message")
            text, thoughts = reply_text(message.content, "message.content"), reasoning_field(message)
        else:
            text, thoughts = reply_text(getattr(choice, "text", None), "text"), ""
        self._check_length(req, text + thoughts)
        return text, finish_reason(choice), resp.usage, thoughts

    def reply_cap(self, req: GenerationRequest) -> int:
        """The most tokens a reply to ``req`` should have: its ``max_new_tokens``, or the model's window where the
        request sends no ``max_tokens`` (an official protocol's API decoding: the server's default)."""
        return req.max_new_tokens if req.api is None or req.api.send_max_tokens else self.spec.max_model_len

    def _check_length(self, req: GenerationRequest, text: str) -> None:
        """A reply far longer than the ``max_tokens`` asked for (more than :func:`token_limit`, counted with our
        tokenizer; characters first, so that 40 MB is not tokenized) is not a completion of the request (issue 31
        D8: a server ignoring max_tokens had its 40 MB answer stored and scored). Without ``max_tokens``, the
        window bounds it (:meth:`reply_cap`)."""
        cap = self.reply_cap(req)
        limit = token_limit(cap)
        capped = req.api is None or req.api.send_max_tokens
        asked = "asked for (max_tokens ignored?)" if capped else "of the model's window (no max_tokens was sent)"
        if len(text) > limit * MAX_CHARS_PER_TOKEN:
            raise MalformedReply(f"the reply has {len(text)} characters, far more than the {cap} tokens {asked}")
        if len(text) > limit:
            count = len(self.prompt_tokenizer.encode(text))
            if count > limit:
                raise MalformedReply(f"the reply has {count} tokens, far more than the {cap} {asked}")

    def _count(self, usage: Any, name: str, upper: int, local: Callable[[], int], key: str) -> int:
        """``usage.<name>`` when it is an int in [0, ``upper``], else (with a warning naming the value) ``local()``:
        a server's count is not trusted blindly (issue 31 D8: -5, "lots" and 1e30 were stored or crashed the
        table's write)."""
        value = getattr(usage, name, None) if usage is not None else None
        if usage is None or value is None:
            return local()
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= upper:
            return value
        counted = local()
        log.warning("model %r, request %r: the server's usage.%s %s is not a count in [0, %d]; counted locally: %d",
                    self.spec.slug, key, name, shorten(repr(value), 40), upper, counted)
        return counted
