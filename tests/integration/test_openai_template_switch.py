"""The task's chat-template switch through a real server (issue 30, "Template switches honoured on every backend";
newcomer review: LongBench's few-shot and code tasks were templated by the server under the default ``api: chat``).

llama-cpp-python's server on 127.0.0.1 serves SmolLM2-135M-Instruct, behind a loopback relay of this module that
records the path and body of every request: a ``chat_template: false`` request of an ``api: chat`` model goes to
``/v1/completions`` with the raw prompt, its row says ``chat_template_source`` "none" and it is answered as the
completions mode answers it; a templated request of the same model still goes to ``/v1/chat/completions``. Behind
a relay that answers 404 on ``/v1/completions`` (a chat-only server), the first plain request learns it, one
warning says so, and the plain requests go as chat with their rows marked ``server:forced``.
"""

from __future__ import annotations

import logging

import pytest
from servers import (
    RecordingRelay,
    llama_server,
    needs_llama_server,
    served_smollm2,
    smollm2_gguf,
)

from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.openai_backend import FORCED_TEMPLATE
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = needs_llama_server

BUILTIN = BUILTIN_MODELS["smollm2-135m"]
# A few-shot prompt of our own, fed as written (no template) by a task with chat_template: false.
FEW_SHOT = "Question: 2 + 2?\nAnswer: 4\n\nQuestion: 3 + 3?\nAnswer: 6\n\nQuestion: 4 + 4?\nAnswer:"
CHAT = "What is the capital of France?"


def relay_to(upstream: str, chat_only: bool = False) -> RecordingRelay:
    """The server behind a recorder of (path, body) per POST; ``chat_only``: it answers 404 on the completions
    endpoint, as a server without one does."""
    def refuse(path: str) -> str | None:
        if chat_only and path.endswith("/completions") and "/chat/" not in path:
            return "Not Found: no completions endpoint"
        return None

    return RecordingRelay(upstream, refuse=refuse)


@pytest.fixture(scope="module")
def server_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        yield url


def test_a_plain_task_of_a_chat_model_goes_to_completions_with_the_raw_prompt(server_url, caplog):
    plain = GenerationRequest("plain", FEW_SHOT, 6, chat_template=False)
    templated = GenerationRequest("chat", CHAT, 6)
    with relay_to(server_url) as relay, caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        gen = served_smollm2(relay.url, api="chat", send_token_ids=False)  # llama-cpp-python's server takes text only
        p, c = gen.generate([plain, templated])
    (path_p, body_p), (path_c, body_c) = sorted(relay.posts, key=lambda x: "messages" in x[1])
    assert path_p == "/v1/completions" and body_p["prompt"] == FEW_SHOT and "messages" not in body_p
    assert path_c == "/v1/chat/completions" and body_c["messages"] == [{"role": "user", "content": CHAT}]
    assert len(relay.posts) == 2 and not caplog.records
    assert (p.chat_template_source, c.chat_template_source) == ("none", "server")
    assert p.prompt_ids_hash and p.bos_tokens is not None  # what was fed is known: our ids, sent as their text
    # The same request in completions mode (the plain prompt, no template) gets the same answer.
    [same] = served_smollm2(server_url, api="completions", send_token_ids=False).generate([plain])
    assert (p.output, p.completion_tokens) == (same.output, same.completion_tokens) and p.output


def test_a_chat_only_server_is_learned_once_and_its_plain_rows_are_marked(server_url, caplog):
    requests = [GenerationRequest(f"plain{i}", FEW_SHOT.replace("4 + 4", f"{i} + {i}"), 6, chat_template=False)
                for i in range(3)]
    with relay_to(server_url, chat_only=True) as relay, \
            caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        # One request in flight: the first plain one learns it (with more in flight, each of those asks once too).
        gen = served_smollm2(relay.url, api="chat", send_token_ids=False, max_concurrency=1)
        results = gen.generate([*requests, GenerationRequest("chat", CHAT, 6)])
        later = served_smollm2(relay.url, api="chat", send_token_ids=False).generate(requests[:1])  # the next partition
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "no completions endpoint" in said[0] and FORCED_TEMPLATE in said[0], said
    assert relay.paths().count("/v1/completions") == 1  # asked once, then every plain request went as chat
    assert relay.paths().count("/v1/chat/completions") == 5
    sent = [b["messages"][-1]["content"] for p, b in relay.posts if p == "/v1/chat/completions"]
    assert sorted(sent) == sorted([CHAT, *(r.prompt for r in requests), requests[0].prompt])
    assert [r.chat_template_source for r in [*results, *later]] == [FORCED_TEMPLATE] * 3 + ["server", FORCED_TEMPLATE]
    assert all(r.output and r.prompt_ids_hash == "" and r.bos_tokens is None for r in results)
