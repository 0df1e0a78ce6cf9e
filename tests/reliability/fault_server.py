"""A real OpenAI-compatible HTTP server on 127.0.0.1 that misbehaves on purpose.

It speaks enough of the API (``GET /v1/models``, ``POST /v1/chat/completions`` and
``/v1/completions``) for the openai backend and the judge to work against it, and answers
deterministically: the same prompt always gets the same reply. Judge prompts get a verdict
in the rubric's format (Loong's ``Rating: [[n]]`` or a JSON grade), everything else a short
answer derived from the prompt.

Faults are scheduled per request: ``server.plan("500", "429", "ok", ...)`` makes the next
requests fail in that order, and ``server.always = "500"`` makes every later request fail.
Kinds:

    ok         a good answer
    500        HTTP 500 with an OpenAI-style error body
    slow       no answer for ``slow_s`` seconds (longer than the client's timeout), then a good one
    reset      the connection is reset (TCP RST) after the request was read
    malformed  HTTP 200, JSON content type, a body that is not JSON
    429        HTTP 429 with ``Retry-After`` (``retry_after_s``)
    auth       HTTP 401 whose message quotes the key it was sent (as some gateways do)
    hang       no answer at all until the server stops (a request the server never finishes)
    held       a good answer once ``release()`` is called (a request far slower than the others)
    invalid    HTTP 500 whose body lists validation errors (llama-cpp-python's reply to a prompt of token ids)
    drip       headers at once, then a good answer's body one byte every ``drip_s`` seconds (a stalled proxy)

Replies that are HTTP 200 JSON but not to be trusted (issue 31 D8, D23), the answer otherwise good:

    empty_choices      ``choices: []``
    no_message         a chat choice without ``message`` (a text choice without ``text``)
    content_int / content_list / content_obj   the content (or text) is 42, a list or an object
    usage_str / usage_neg / usage_huge         ``prompt_tokens`` "lots", ``prompt_tokens`` -5,
                                               ``completion_tokens`` 1e30
    finish_weird       a 5,000-character ``finish_reason``
    long       ``long_words`` words of content, whatever ``max_tokens`` asked for
    huge       ``huge_chars`` characters of content (the probe's 40 MB, smaller)

Every request is recorded (path, parsed body, headers, arrival time, what it got), so tests
can count what reached the server and prove what did not.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# Good answers changed in one way (Handler._bad): what each does to the answer's JSON.
BAD_REPLIES = ("empty_choices", "no_message", "content_int", "content_list", "content_obj", "usage_str", "usage_neg",
               "usage_huge", "finish_weird", "long", "huge")
FAULTS = ("ok", "500", "slow", "reset", "malformed", "429", "auth", "hang", "invalid", "held", "drip", *BAD_REPLIES)


@dataclass
class Received:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # names in lower case
    at: float  # time.monotonic() on arrival
    fault: str  # what the server did with it
    delivered: bool = False  # a good answer was written to the connection in full

    @property
    def prompt(self) -> str:
        """The user text: the last chat message, or the completions prompt."""
        if "messages" in self.body:
            return str(self.body["messages"][-1]["content"])
        return str(self.body.get("prompt", ""))


def reply_for(prompt: str) -> str:
    """A deterministic answer in the format the prompt asks for."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    if "Rating: [[" in prompt:  # Loong's judge rubric
        return f"Evaluation evidence: compared with the gold answer.\nRating: [[{int(digest[:4], 16) % 100 + 1}]]"
    if '"correctness"' in prompt:  # HELMET / 100-LongBench QA rubrics
        return 'The answer agrees with the reference. {"fluency": 1, "correctness": 3}'
    if '"fluency"' in prompt:
        return '{"fluency": 1}'
    return f"answer {digest[:8]}"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A client that gave up (its timeout) or closed a kept-alive connection is expected here.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class FaultyOpenAIServer:
    """Start with ``with FaultyOpenAIServer() as server:``; ``server.url`` is the ``/v1`` base URL."""

    slow_s: float = 3.0
    retry_after_s: float = 0.3
    answer_delay_s: float = 0.0  # before every good answer (makes a run slow enough to kill mid-way)
    # While set, good answers wait (at most hold_s) until ``release()``: requests pile up, which
    # proves that several clients were in flight at once.
    hold_s: float = 0.0
    drip_s: float = 0.5  # "drip": seconds between the body's bytes
    long_words: int = 200  # "long": words of content
    huge_chars: int = 4_000_000  # "huge": characters of content
    always: str = "ok"  # what requests get once the planned faults are used up
    received: list[Received] = field(default_factory=list)
    _planned: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self._released.set()

    def plan(self, *faults: str) -> None:
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {FAULTS}")
        with self._lock:
            self._planned.extend(faults)

    def _next_fault(self) -> str:
        with self._lock:
            return self._planned.popleft() if self._planned else self.always

    def answered(self) -> list[Received]:
        """Requests that got a good answer."""
        with self._lock:
            return [r for r in self.received if r.fault in ("ok", "slow", "held")]

    def delivered(self) -> list[Received]:
        """Requests whose good answer was written to the connection in full (the client may have it)."""
        with self._lock:
            return [r for r in self.received if r.delivered]

    def requests(self, path_suffix: str = "completions") -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path.endswith(path_suffix)]

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            # TCP_NODELAY, and headers and body in one write (a buffered wfile, which handle_one_request flushes
            # after each request): otherwise every reply waits ~40 ms for Nagle's algorithm and the client's
            # delayed ACK (review 2026-11-27-performance §1).
            disable_nagle_algorithm = True
            wbufsize = 64 * 1024

            def log_message(self, *args) -> None:  # quiet: the test output stays readable
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._json(400, {"error": {"message": "request body is not JSON"}})
                    return
                fault = server._next_fault()
                record = Received(self.path, body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic(),
                                  fault)
                with server._lock:
                    server.received.append(record)
                if fault == "500":
                    self._json(500, {"error": {"message": "injected internal error", "type": "server_error"}})
                elif fault == "429":
                    self._json(429, {"error": {"message": "injected rate limit", "type": "rate_limit"}},
                               {"Retry-After": f"{server.retry_after_s:g}"})
                elif fault == "auth":
                    key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    self._json(401, {"error": {"message": f"Incorrect API key provided: {key}", "type": "auth"}})
                elif fault == "reset":
                    # SO_LINGER 0: close() sends RST instead of FIN, a "connection reset by peer".
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                elif fault == "malformed":
                    self._raw(200, b'{"id": "x", "choices": [{"message": ', "application/json")
                elif fault == "hang":
                    server._stop.wait()
                elif fault == "drip":
                    self._drip(json.dumps(self._answer(body)).encode())
                elif fault in BAD_REPLIES:
                    self._json(200, self._bad(fault, self._answer(body)))
                elif fault == "invalid":
                    errors = "\n".join(f"prompt.list[int].{i}\n  Input should be a valid string [type=string_type]"
                                       for i in range(400))
                    self._json(500, {"error": {"message": f"400 validation errors:\n{errors}", "type": "internal_server_error"}})
                else:
                    if fault == "slow":
                        server._stop.wait(server.slow_s)
                    elif fault == "held":
                        server._released.wait()
                    elif server.answer_delay_s:
                        server._stop.wait(server.answer_delay_s)
                    if server.hold_s:
                        server._released.wait(server.hold_s)
                    if self._json(200, self._answer(body)):
                        with server._lock:
                            record.delivered = True

            def _answer(self, body: dict) -> dict:
                chat = self.path.rstrip("/").endswith("/chat/completions")
                prompt = str(body["messages"][-1]["content"]) if chat else str(body.get("prompt", ""))
                text = reply_for(prompt)
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
                         "total_tokens": len(prompt.split()) + len(text.split())}
                choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                return {"id": "cmpl-fault", "object": "chat.completion" if chat else "text_completion",
                        "created": int(time.time()), "model": body.get("model", "fault-model"),
                        "choices": [choice], "usage": usage}

            def _bad(self, fault: str, answer: dict) -> dict:
                choice = answer["choices"][0]
                field = "message" if "message" in choice else "text"
                values = {"content_int": 42, "content_list": ["a", "b"], "content_obj": {"answer": "Paris"},
                          "long": " ".join(["word"] * server.long_words), "huge": "word " * (server.huge_chars // 5)}
                if fault == "empty_choices":
                    answer["choices"] = []
                elif fault == "no_message":
                    del choice[field]
                elif fault in values:
                    if field == "message":
                        choice["message"]["content"] = values[fault]
                    else:
                        choice["text"] = values[fault]
                elif fault == "usage_str":
                    answer["usage"]["prompt_tokens"] = "lots"
                elif fault == "usage_neg":
                    answer["usage"]["prompt_tokens"] = -5
                elif fault == "usage_huge":
                    answer["usage"]["completion_tokens"] = 1e30
                elif fault == "finish_weird":
                    choice["finish_reason"] = "x" * 5000
                return answer

            def _drip(self, data: bytes) -> None:
                """Headers now, then the body a byte at a time until done or the server stops."""
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.flush()
                    for i in range(len(data)):
                        if server._stop.wait(server.drip_s):
                            return
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its deadline)

            def _json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> bool:
                return self._raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> bool:
                """Whether the reply was written in full."""
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()  # headers and body: one write
                    return True
                except (BrokenPipeError, ConnectionResetError):
                    return False  # the client gave up (its timeout): nothing to answer

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # slow handlers return at once
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"
