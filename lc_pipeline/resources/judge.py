"""The LLM judge: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp), with a persistent cache.

Like the openai generation backend (generate/openai_backend.py): the ``openai`` client, at
most ``max_concurrency`` requests in flight (asyncio), a timeout per request, and the
client's own retries with exponential backoff and jitter on connection errors, timeouts,
408, 409, 429 (honouring ``Retry-After``) and 5xx; a 200 reply that is not a completion is
asked again on the same schedule. Where the server is: ``base_url``, else ``$OPENAI_BASE_URL``; the model:
``model``, else ``$LCP_JUDGE_MODEL``; the key: the variable named by ``api_key_env``. The key
is read when the client is made and goes nowhere else: not into fields, rows, logs or metadata.

Every reply is stored, as it arrives, in a SQLite file keyed by (judge model, rubric,
rubric version, question, decoding): a rerun, or a run after a crash, asks the server only
what it has not answered yet. ``JudgeClient.calls`` counts the requests actually sent.

Protocols (score/judge.py): under ``ours`` every question goes with :data:`SYSTEM_PROMPT` and this resource's
``temperature``, ``max_tokens``, seed 0 and ``json_mode``. Under ``official`` (``protocol``, else the benchmark
config's) a question carries its rubric's :class:`~lc_pipeline.score.judge.JudgeSettings`, the benchmark
authors': only those are sent (their system turn or none, temperature, top_p, max_tokens, seed), JSON is never
forced, and ``api_retries`` replaces ``max_retries`` where the authors retry a failed request another number of
times.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg

from lc_pipeline.generate.openai_backend import (
    create_checked,
    describe_failure,
    gather_bounded,
    scrub,
)
from lc_pipeline.score.judge import OURS, PROTOCOLS, SYSTEM_PROMPT, JudgeCall
from lc_pipeline.settings import env, key_in

JUDGE_BACKOFF_CAP_S = 8.0  # the openai client's longest wait between two attempts

__all__ = ["MODEL_ENV", "JudgeCache", "JudgeClient", "JudgeResource", "scrub"]

MODEL_ENV = "LCP_JUDGE_MODEL"
_NO_KEY = "no-key-needed"  # a self-hosted server without authentication still needs some key in the client


class JudgeCache:
    """Judge replies by call key in one SQLite file (WAL: parallel partitions may share it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, judge_model TEXT NOT NULL, "
                "reply TEXT NOT NULL, created REAL NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        with closing(self._connect()) as db:
            for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                out.update(db.execute(f"SELECT key, reply FROM replies WHERE key IN ({marks})", chunk).fetchall())
        return out

    def put(self, key: str, judge_model: str, reply: str) -> None:
        with closing(self._connect()) as db, db:
            db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?)", (key, judge_model, reply, time.time()))

    def __len__(self) -> int:
        with closing(self._connect()) as db:
            return int(db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])


class JudgeClient:
    """Asks the judge model; cached replies are never asked again."""

    def __init__(self, model: str, base_url: str | None, api_key_env: str = "OPENAI_API_KEY", *,
                 cache: JudgeCache | None = None, max_concurrency: int = 8, max_retries: int = 4,
                 timeout_s: float = 120.0, temperature: float = 0.0, max_tokens: int = 512,
                 json_mode: bool = False) -> None:
        if not model:
            raise ValueError(f"judge: no model name: set JudgeResource.model or ${MODEL_ENV}")
        if max_concurrency < 1:
            raise ValueError("judge: max_concurrency must be >= 1")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.cache = cache
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.json_mode = json_mode
        self.calls = 0  # requests sent to the server (cache misses)
        self.cache_hits = 0

    @property
    def decoding(self) -> dict:
        """Part of every cache key: other decoding settings are other judgments."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "json_mode": self.json_mode}

    def server(self) -> str:
        """Where the judge runs, for logs: scheme, host and port only (a URL may carry credentials)."""
        if not self.base_url:
            return "api.openai.com"
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"

    def _api_key(self) -> str:
        key = key_in(self.api_key_env)
        if key:
            return key
        if self.base_url is None:
            raise ValueError(
                f"judge: no API key: set the environment variable {self.api_key_env} "
                "(or base_url / OPENAI_BASE_URL for a self-hosted server without authentication)"
            )
        return _NO_KEY

    def deadline_s(self, retries: int) -> float:
        """Wall-clock bound of one judge call, its retries included (issue 31 D7: the client's ``timeout`` bounds
        each read, so a server trickling its reply a byte at a time would hold the call for ever): ``timeout_s``
        per attempt plus the client's longest backoff (8 s) between attempts."""
        return self.timeout_s * (retries + 1) + JUDGE_BACKOFF_CAP_S * retries

    def _client(self) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(base_url=self.base_url, api_key=self._api_key(), timeout=self.timeout_s,
                           max_retries=self.max_retries)

    def ask(self, calls: Sequence[JudgeCall], progress: Callable[[int], None] | None = None) -> dict[str, str]:
        """Replies by call key for ``calls`` (duplicates asked once), from the cache or the server."""
        unique = {c.key: c for c in calls}
        replies = self.cache.get_many(list(unique)) if self.cache is not None else {}
        self.cache_hits += len(replies)
        todo = [c for k, c in unique.items() if k not in replies]
        if progress is not None and replies:
            progress(len(replies))
        if todo:
            replies.update(asyncio.run(self._ask_all(todo, progress)))
        return replies

    async def _ask_all(self, todo: list[JudgeCall], progress) -> dict[str, str]:
        client = self._client()
        secret = client.api_key
        out: dict[str, str] = {}

        async def one(call: JudgeCall) -> None:
            try:
                if call.settings is None:  # ours
                    # JSON mode (OpenAI, vLLM and llama.cpp all take it) for rubrics whose verdict is JSON.
                    forced = {"response_format": {"type": "json_object"}} if self.json_mode and call.json_reply else {}
                    resp = await asyncio.wait_for(create_checked(
                        client.chat.completions.create, self.max_retries,
                        model=self.model,
                        messages=[{"role": "system", "content": SYSTEM_PROMPT},
                                  {"role": "user", "content": call.prompt}],
                        temperature=self.temperature, max_tokens=self.max_tokens, seed=0, **forced,
                    ), self.deadline_s(self.max_retries))
                else:  # the benchmark authors' settings, and nothing else
                    retries = self.max_retries if call.settings.api_retries is None else call.settings.api_retries
                    resp = await asyncio.wait_for(create_checked(
                        client.with_options(max_retries=retries).chat.completions.create, retries,
                        model=self.model, messages=call.settings.messages(call.prompt), **call.settings.request(),
                    ), self.deadline_s(retries))
            except Exception as exc:
                # Not chained (``from None``): the original error may quote the key.
                raise RuntimeError(
                    f"judge {self.model!r} at {self.server()}: call {call.key[:12]} "
                    f"{describe_failure(exc, self.max_retries, secret, self.timeout_s)}"
                ) from None
            self.calls += 1
            reply = resp.choices[0].message.content or ""
            out[call.key] = reply
            if self.cache is not None:  # stored at once: a crash later loses nothing answered
                self.cache.put(call.key, self.model, reply)
            if progress is not None:
                progress(1)

        try:
            await gather_bounded([functools.partial(one, c) for c in todo], self.max_concurrency)
        finally:
            await client.close()
        return out


class JudgeResource(dg.ConfigurableResource):
    """Judge settings; the key itself is never a field (only the name of its variable)."""

    model: str | None = None  # else $LCP_JUDGE_MODEL
    base_url: str | None = None  # else $OPENAI_BASE_URL; neither: OpenAI's API
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 120.0
    temperature: float = 0.0  # the papers' judges: Loong 0.0, HELMET/100-LongBench 0.1; we take 0 (reproducible)
    max_tokens: int = 512
    # Ask the server to force a JSON reply for JSON rubrics (small judges rarely end with the
    # JSON otherwise); off by default, the papers' judges answer freely.
    json_mode: bool = False
    cache_path: str = ""  # SQLite reply cache; "" = no cache
    rubric_overrides: dict[str, str] = {}  # "benchmark/task" or "benchmark/*" -> rubric name, or "none"
    # "official" (the benchmark authors' judge prompts and settings, score/judge.py) or "ours"; unset: the
    # benchmark config's protocol (official where its authors' files are used), else ours.
    protocol: str | None = None

    def resolved_protocol(self, config=None) -> str:
        """``protocol`` when set, else ``official`` when ``config`` (a BenchmarkConfig) runs under its authors'
        protocol, else ``ours``."""
        if self.protocol is not None:
            if self.protocol not in PROTOCOLS:
                raise ValueError(f"judge: field protocol: {self.protocol!r}: expected one of {list(PROTOCOLS)}")
            return self.protocol
        return OURS if config is None or config.protocol_label() == OURS else "official"

    def resolved_model(self) -> str | None:
        return self.model or env(MODEL_ENV) or None

    def client(self) -> JudgeClient:
        return JudgeClient(
            self.resolved_model() or "", self.base_url or env("OPENAI_BASE_URL") or None, self.api_key_env,
            cache=JudgeCache(self.cache_path) if self.cache_path else None, max_concurrency=self.max_concurrency,
            max_retries=self.max_retries, timeout_s=self.timeout_s, temperature=self.temperature,
            max_tokens=self.max_tokens, json_mode=self.json_mode,
        )
