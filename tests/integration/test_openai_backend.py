"""The openai backend against a real OpenAI-compatible server: llama-cpp-python's server on
127.0.0.1 serving the SmolLM2-135M-Instruct GGUF, started and stopped by this module."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
from conftest import free_port
from servers import llama_server, needs_llama_server, served_smollm2, smollm2_gguf

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = needs_llama_server

BUILTIN = BUILTIN_MODELS["smollm2-135m"]
PROMPT = "What is the capital of France?"
# What SmolLM2's chat template makes of PROMPT (see test_llamacpp_backend.py).
EXPECTED_IDS = [
    1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198,
    1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198,
    1, 520, 9531, 198,
]


@pytest.fixture(scope="module")
def server_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        yield url


def served_completions(url: str, **changes):
    # llama-cpp-python's server takes string prompts only: we send the text our ids decode to.
    return served_smollm2(url, api="completions", send_token_ids=False, **changes)


def test_completions_mode_feeds_exactly_our_token_ids(server_url):
    gen = served_completions(server_url)
    assert gen.fit(GenerationRequest("p", PROMPT, 16)).ids == EXPECTED_IDS
    [res] = gen.generate([GenerationRequest("p", PROMPT, 16)])
    assert res.prompt_tokens == len(EXPECTED_IDS)  # the server's usage: it evaluated just those
    # Same ids, same engine, greedy: the server answers exactly as llama.cpp in-process does.
    local = make_generator(dataclasses.replace(BUILTIN, slug="smollm2-local", backend="llamacpp", torch_threads=1))
    [mine] = local.generate([GenerationRequest("p", PROMPT, 16)])
    local.close()
    assert (res.output, res.completion_tokens, res.finish_reason) == (
        mine.output, mine.completion_tokens, mine.finish_reason)
    assert res.output and 0 < res.completion_tokens <= 16


def test_chat_mode_server_template_matches_ours(server_url):
    chat, completions = served_smollm2(server_url, api="chat"), served_completions(server_url)
    [c] = chat.generate([GenerationRequest("p", PROMPT, 16)])
    [t] = completions.generate([GenerationRequest("p", PROMPT, 16)])
    # The server rendered the GGUF's template itself and got the same number of tokens, and
    # greedy decoding then gives the same answer: it saw the same ids.
    assert c.prompt_tokens == len(EXPECTED_IDS)
    assert c.output == t.output
    assert chat.sampling_params()["api"] == "chat"


def test_concurrent_requests_keep_order_and_record_usage(server_url):
    gen = served_smollm2(server_url, max_concurrency=3)
    requests = [GenerationRequest(f"r{i}", f"Count from 1 to {i + 2}.", 12) for i in range(6)]
    done = []
    results = gen.generate(requests, progress=done.append)
    assert [r.key for r in results] == [f"r{i}" for i in range(6)]
    assert sum(done) == 6
    for r in results:
        assert r.prompt_tokens > 0 and 0 < r.completion_tokens <= 12 and r.latency_s > 0
        assert r.finish_reason in ("stop", "length")


def test_long_prompt_is_truncated_to_the_window(server_url):
    gen = served_completions(server_url, max_model_len=256)
    filler = " ".join(f"Line {i} says nothing." for i in range(200))
    [res] = gen.generate([GenerationRequest("long", f"Answer briefly.\n\n{filler}\n\nQuestion: why?", 8)])
    assert res.truncated and res.prompt_tokens <= 256 - 8 < res.original_prompt_tokens


def test_the_key_stays_out_of_what_is_recorded(server_url, monkeypatch):
    monkeypatch.setenv("LCP_TEST_KEY", "sk-test-do-not-record")
    gen = served_smollm2(server_url, api_key_env="LCP_TEST_KEY")
    [res] = gen.generate([GenerationRequest("p", PROMPT, 4)])
    assert "sk-test" not in json.dumps(gen.sampling_params()) + json.dumps(dataclasses.asdict(res))
    assert "sk-test" not in json.dumps(gen.spec.to_dict())


def test_unreachable_server_fails_after_retries_naming_the_request():
    gen = served_smollm2(f"http://127.0.0.1:{free_port()}/v1", max_retries=1, request_timeout_s=5.0)
    with pytest.raises(RuntimeError, match=r"request 'p'.*after 1 retries"):
        gen.generate([GenerationRequest("p", PROMPT, 4)])


def test_a_server_that_refuses_token_ids_is_sent_text_after_one_logged_failure(server_url, caplog):
    # llama-cpp-python's server takes string prompts only: with the default send_token_ids it answers the first
    # prompt of ids with HTTP 500 "validation errors". The run goes on with the rendered text, says so once, and
    # sends no request twice but that first one.
    gen = served_smollm2(server_url, api="completions", max_concurrency=2)
    assert gen.spec.send_token_ids
    requests = [GenerationRequest(f"r{i}", f"Count from 1 to {i + 2}.", 8) for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        results = gen.generate(requests)
    said = [r.getMessage() for r in caplog.records]
    refused = [m for m in said if "refused a prompt of token ids" in m]
    assert len(refused) == 1 and "send_token_ids: false" in refused[0]
    assert not [m for m in said if "retrying in" in m]  # nothing retried
    assert gen.sends_text()
    text = served_completions(server_url)  # the same prompts as text from the start: the same answers
    assert [r.output for r in results] == [r.output for r in text.generate(requests)]
    for r, fit in zip(results, (gen.fit(q) for q in requests), strict=True):
        # The server tokenized our text to as many tokens as we rendered: the record of what was fed holds.
        assert r.prompt_tokens == len(fit.ids) and r.prompt_ids_hash and r.chat_template_source == "model"
    # A later generator in this process (the next partition) sends text at once: no failure, no new line.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        served_smollm2(server_url, api="completions").generate(requests[:1])
    assert not caplog.records


def test_the_chat_template_is_rendered_once_per_request(server_url, monkeypatch):
    gen = served_smollm2(server_url, api="chat")
    tok = gen.prompt_tokenizer
    rendered = []
    real = tok.chat_text
    monkeypatch.setattr(tok, "chat_text", lambda messages, template=None: rendered.append(1) or real(messages, template))
    assert gen.fit(GenerationRequest("p", PROMPT, 16)).ids == EXPECTED_IDS  # what the server's template makes
    assert len(rendered) == 1
