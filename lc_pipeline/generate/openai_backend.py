"""Generation through any OpenAI-compatible server: ``vllm serve``, llama.cpp's server, OpenAI.

Requests go out concurrently (asyncio, at most ``spec.max_concurrency`` in flight), each with
a timeout; failed calls (connection errors, timeouts, 408/409/429/5xx, honouring
``Retry-After``) are retried by the openai client's own machinery with exponential backoff and
jitter, ``spec.max_retries`` times. A 200 reply that is not a completion (a body cut off or not
JSON, no choices), which the client hands back as is, is asked again on the same schedule
(:func:`create_checked`). A call that still fails raises an error naming the model, the
request and what the server did, with the key scrubbed from it (:func:`describe_failure`).
Token usage comes from the server's ``usage`` field.

Two modes (``spec.api``):
- ``chat``: the user prompt goes out as a chat message and the *server* applies the model's
  template; we render it locally with the same template only to count and truncate.
- ``completions``: we render the template ourselves (or the plain prompt for base models)
  and send the token ids, so the server sees exactly the ids we counted (vLLM, llama.cpp's
  own server and OpenAI accept token arrays). For servers that take only strings
  (llama-cpp-python's), ``send_token_ids: false`` sends the rendered text; if the server's
  count (``usage.prompt_tokens``) then differs from ours (e.g. it added a BOS), the log says so.

A request under truncation policy ``skip`` whose prompt does not fit (counted as above) is never sent: its
result says ``status: skipped`` (prompting.skipped_result). What was fed is recorded per row: in completions
mode the hash and BOS count of the ids we rendered; in chat mode the server renders the prompt
(``chat_template_source`` "server", no hash, BOS count unknown).

A reasoning model's thoughts (``thinking: {location: field}``), which the server returns apart from the answer
in a chat completion's message (``reasoning_content``: vLLM, llama.cpp's server, DeepSeek; ``reasoning``:
OpenRouter, newer vLLM), go into ``GenerationResult.thinking`` (:func:`reasoning_field`); generate/thinking.py
decides the row's status from them.

Where the server is: ``spec.base_url``, else ``$OPENAI_BASE_URL``. The key: the variable
named by ``spec.api_key_env`` (default ``OPENAI_API_KEY``); it is never logged or recorded.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lc_pipeline.construct.truncation import FittedPrompt
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, greedy_params
from lc_pipeline.generate.prompting import (
    PromptTokenizer,
    fed_prompt_fields,
    fit_request,
    load_tokenizer,
    messages_for,
    render_ids,
    skipped_result,
)
from lc_pipeline.generate.registry import ModelSpec

log = logging.getLogger(__name__)

# A self-hosted server without authentication still needs some key in the client.
_NO_KEY = "no-key-needed"
_KEY_LIKE = re.compile(r"sk-[A-Za-z0-9_*\-]{4,}")
# Statuses the openai client retries; any other 4xx is the request's fault and is not retried.
_RETRIED_STATUSES = (408, 409, 429)


def scrub(text: str, secret: str | None) -> str:
    """``text`` without the key: the exact value, and key-like strings (servers echo masked keys)."""
    if secret and secret != _NO_KEY:
        text = text.replace(secret, "***")
    return _KEY_LIKE.sub("sk-***", text)


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


def _backoff_s(attempt: int) -> float:
    # The openai client's own schedule: 0.5 s doubling up to 8 s, less up to 25 % jitter.
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


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

    The client retries failed calls itself but returns a 200 whose body is cut off, not JSON
    or without choices as is (or raises on parsing it); such a reply is asked for again, up to
    ``max_retries`` times with the client's backoff, then raises :class:`MalformedReply`.
    """
    import openai

    for attempt in range(max_retries + 1):
        try:
            resp = await create(**kwargs)
            if not getattr(resp, "choices", None):
                raise MalformedReply("the reply has no choices")
            return resp
        except (json.JSONDecodeError, openai.APIResponseValidationError, MalformedReply) as exc:
            if attempt == max_retries:
                raise MalformedReply(
                    f"{attempt + 1} replies in a row were not a completion, the last: {type(exc).__name__}: {exc}"
                ) from None
            await asyncio.sleep(_backoff_s(attempt))
    raise AssertionError("unreachable")


def describe_failure(exc: BaseException, max_retries: int, secret: str | None, timeout_s: float | None = None) -> str:
    """How a server call ended, for an error message, without the key: refused (a 4xx the client
    does not retry, e.g. a bad key) or failed after the retries (the last error)."""
    import openai

    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status < 500 and status not in _RETRIED_STATUSES:
        what = f"was refused (HTTP {status}, not retried)"
    elif isinstance(exc, MalformedReply):
        what = f"got no usable reply after {max_retries} retries"
    else:
        what = f"failed after {max_retries} retries"
    detail = f"{type(exc).__name__}: {scrub(str(exc), secret)}"
    if isinstance(exc, openai.APITimeoutError) and timeout_s is not None:
        detail += f" (no reply within {timeout_s:g} s)"
    return f"{what}: {detail}"


class OpenAIGenerator:
    backend = "openai"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != "openai":
            raise ValueError(f"model {spec.slug!r}: OpenAIGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.api_model = spec.api_model or spec.model_id
        self.model_id = self.api_model
        self._tok: PromptTokenizer | None = None

    # ------------------------------------------------------------------ setup

    def base_url(self) -> str | None:
        return self.spec.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def _api_key(self) -> str:
        key = os.environ.get(self.spec.api_key_env)
        if key:
            return key
        if self.base_url() is None:
            raise ValueError(
                f"model {self.spec.slug!r}: no API key: set the environment variable {self.spec.api_key_env} "
                "(or base_url / OPENAI_BASE_URL for a self-hosted server without authentication)"
            )
        return _NO_KEY

    def client(self) -> Any:
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:  # a core dependency; only a broken environment lacks it
            raise ImportError("the openai package is missing: pip install openai") from exc
        return AsyncOpenAI(
            base_url=self.base_url(),
            api_key=self._api_key(),
            timeout=self.spec.request_timeout_s,
            max_retries=self.spec.max_retries,
        )

    @property
    def prompt_tokenizer(self) -> PromptTokenizer:
        if self._tok is None:
            self._tok = load_tokenizer(self.spec)
        return self._tok

    def load(self) -> None:
        self.prompt_tokenizer  # noqa: B018  (the only local state: the tokenizer)

    # ------------------------------------------------------------------ prompts

    def render(self, user_text: str) -> list[int]:
        tok = self.prompt_tokenizer
        if self.spec.api == "chat" and self.spec.chat_template and tok.chat_text(messages_for(self.spec, user_text)) is None:
            # No local template (e.g. tiktoken for an API model): the user text plus a margin.
            return tok.encode(user_text) + [0] * getattr(tok, "CHAT_OVERHEAD", 16)
        return render_ids(self.spec, tok, user_text)

    def fit(self, request: GenerationRequest) -> FittedPrompt:
        """In completions mode: the exact ids sent. In chat mode: the ids the server's template
        should produce (the server reports its own count as ``usage.prompt_tokens``)."""
        from lc_pipeline.construct.truncation import fit_prompt

        if self.spec.api == "completions":
            return fit_request(self.spec, self.prompt_tokenizer, request)
        budget = self.spec.max_model_len - request.max_new_tokens
        tok = self.prompt_tokenizer
        return fit_prompt(request.prompt, budget, render=self.render, encode=tok.encode, decode=tok.decode,
                          policy=request.truncation, context=request.context, key=request.key)

    def sampling_params(self) -> dict:
        return greedy_params(self.spec, temperature=0.0, api=self.spec.api, extra_body=self.spec.extra_body)

    def fed_fields(self, req: GenerationRequest, fit: FittedPrompt) -> dict:
        """What a row records as fed: the server renders chat requests; completions get our ids."""
        if self.spec.api == "chat":
            return {"prompt_ids_hash": "", "bos_tokens": None, "chat_template_source": "server"}
        return fed_prompt_fields(self.spec, self.prompt_tokenizer, fit.ids, req.chat_template)

    # ------------------------------------------------------------------ generation

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        if not requests:
            return []
        fitted = [self.fit(r) for r in requests]  # tokenizer work, before any request goes out
        return asyncio.run(self._generate_all(requests, fitted, progress))

    async def _generate_all(
        self,
        requests: Sequence[GenerationRequest],
        fitted: list[FittedPrompt],
        progress: Callable[[int], None] | None,
    ) -> list[GenerationResult]:
        client = self.client()
        secret = client.api_key

        async def one(req: GenerationRequest, fit: FittedPrompt) -> GenerationResult:
            if fit.skipped:  # policy skip, over the window: no call is made
                if progress is not None:
                    progress(1)
                return skipped_result(req, fit, self.fed_fields(req, fit)["chat_template_source"])
            t0 = time.perf_counter()
            try:
                text, finish, usage, thoughts = await self._call(client, req, fit)
            except Exception as exc:
                # Not chained (``from None``): the original error may quote the key.
                raise RuntimeError(
                    f"model {self.spec.slug!r}, request {req.key!r}: the server call "
                    f"{describe_failure(exc, self.spec.max_retries, secret, self.spec.request_timeout_s)}"
                ) from None
            latency = time.perf_counter() - t0
            if progress is not None:
                progress(1)
            prompt_tokens = usage.prompt_tokens if usage is not None else len(fit.ids)
            completion_tokens = (
                usage.completion_tokens if usage is not None else len(self.prompt_tokenizer.encode(thoughts + text))
            )
            return GenerationResult(
                key=req.key,
                output=text.strip(),
                prompt_tokens=prompt_tokens,
                original_prompt_tokens=fit.original_tokens,
                truncated=fit.truncated,
                completion_tokens=completion_tokens,
                finish_reason=finish or "stop",
                latency_s=latency,
                truncation_policy=fit.policy,
                **self.fed_fields(req, fit),
                thinking=thoughts,
            )

        try:
            jobs = [functools.partial(one, r, f) for r, f in zip(requests, fitted, strict=True)]
            return await gather_bounded(jobs, self.spec.max_concurrency)
        finally:
            await client.close()

    async def _call(self, client: Any, req: GenerationRequest,
                    fit: FittedPrompt) -> tuple[str, str | None, Any, str]:
        """(reply text, finish reason, usage, the server's separate reasoning: "" for text completions)."""
        common = {"model": self.api_model, "max_tokens": req.max_new_tokens, "temperature": 0.0, "seed": 0,
                  "frequency_penalty": 0.0, "presence_penalty": 0.0}
        if self.spec.extra_body:
            common["extra_body"] = self.spec.extra_body
        retries = self.spec.max_retries
        if self.spec.api == "chat":
            resp = await create_checked(client.chat.completions.create, retries,
                                        messages=messages_for(self.spec, fit.text), **common)
            choice = resp.choices[0]
            return choice.message.content or "", choice.finish_reason, resp.usage, reasoning_field(choice.message)
        if self.spec.send_token_ids:
            resp = await create_checked(client.completions.create, retries, prompt=fit.ids, **common)
        else:
            resp = await create_checked(client.completions.create, retries,
                                        prompt=self.prompt_tokenizer.decode(fit.ids), **common)
            if resp.usage is not None and resp.usage.prompt_tokens != len(fit.ids):
                log.warning(
                    "model %r, request %r: the server counted %d prompt tokens for the text, we rendered %d "
                    "(does it add a BOS?)", self.spec.slug, req.key, resp.usage.prompt_tokens, len(fit.ids),
                )
        choice = resp.choices[0]
        return choice.text or "", choice.finish_reason, resp.usage, ""
