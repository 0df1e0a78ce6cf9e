"""Server faults, injected for real: a local HTTP server (fault_server.py) answers 500s, stalls
past the client's timeout, resets connections, sends malformed JSON, rate-limits with
Retry-After, refuses the key and answers validation errors. The openai generation backend and
the LLM judge retry with backoff and recover from one fault (the generator logs each retry, and
sends a timed-out request again only when the model says ``retry_timeouts``); a fault that
persists ends in an error that says which request failed and how, without the key, and every
answer that arrived before it is kept: a rerun asks the server only for what is missing."""

from __future__ import annotations

import logging
import time

import duckdb
import polars as pl
import pytest
from fault_server import FaultyOpenAIServer, reply_for
from lake_world import served_model

from lc_pipeline.benchmarks.loong.rubrics import LOONG_PROMPT
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import chunk_size, generate_partition, plan_partition
from lc_pipeline.resources.judge import JudgeCache, JudgeClient
from lc_pipeline.score.judge import JudgeCall

SECRET = "sk-planted-fault-test-0123456789abcdef"
# One retry: a persistent fault costs two attempts and one backoff wait (0.4-0.5 s) instead of three and two (the
# second 0.8-1 s); the retry count the error names, the attempts counted and the recovery are the same checks.
RETRIES = 1
TIMEOUT_S = 1.0
TRANSIENT = ["500", "slow", "reset", "malformed", "429"]
# What the error says when a fault persists (after the model/request or judge/call prefix).
PERSISTENT = {
    "500": r"failed after 1 retries: InternalServerError: Error code: 500",
    "slow": r"failed after 1 retries: APITimeoutError: Request timed out\. \(no reply within 1 s\)",
    "reset": r"failed after 1 retries: APIConnectionError: Connection error",
    "malformed": r"got no usable reply after 1 retries: MalformedReply: 2 replies in a row were not a completion",
    "429": r"failed after 1 retries: RateLimitError: Error code: 429",
    "auth": r"was refused \(HTTP 401, not retried\): AuthenticationError: .*Incorrect API key provided: \*\*\*",
}
ATTEMPTS = {fault: 1 if fault == "auth" else 1 + RETRIES for fault in PERSISTENT}


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # sent to the server; must never come back in an error
    with FaultyOpenAIServer(slow_s=2.5, retry_after_s=0.3) as s:
        yield s


def generator(url: str, **changes):
    return make_generator(served_model("served", url, **{"max_retries": RETRIES, "request_timeout_s": TIMEOUT_S,
                                                         **changes}))


def instances(n: int) -> pl.DataFrame:
    prompts = [f"Name a river that flows through city number {i}." for i in range(n)]
    return pl.DataFrame({"instance_id": [f"inst-{i:02d}" for i in range(n)], "benchmark": ["qa"] * n, "task": ["single_hop_qa"] * n,
                         "prompt": prompts, "context": prompts, "max_new_tokens": [8] * n})


def judge_calls(n: int) -> list[JudgeCall]:
    return [JudgeCall(f"call-{i:02d}", LOONG_PROMPT.format(question=f"Who founded town {i}?", answers="Ada",
                                                            output=f"Maybe person {i}.")) for i in range(n)]


# ----------------------------------------------------------------------------- one fault, then recovery


@pytest.mark.parametrize("fault", TRANSIENT)
def test_generation_retries_past_one_fault(server, fault, caplog):
    server.plan(fault)
    # A timeout is sent again only when the model asks for it (the server may still be computing it).
    gen = generator(server.url, retry_timeouts=fault == "slow")
    with caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        [result] = gen.generate([GenerationRequest("k", "Which river?", 8)])
    assert result.output == reply_for("Which river?")  # the answer of the retry, intact
    seen = server.requests()
    assert [r.fault for r in seen] == [fault, "ok"]
    assert seen[0].body == seen[1].body  # the same request again
    if fault == "429":  # the retry waited as long as Retry-After asked
        assert seen[1].at - seen[0].at >= server.retry_after_s
    # The retry is one log line: model, request, attempt, reason, wait; without the key.
    [line] = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert line.startswith("model 'served', request 'k': attempt 1 of 2 failed (") and SECRET not in line
    if fault == "429":
        assert line.endswith(f"retrying in {server.retry_after_s:.1f} s")


def test_a_timed_out_request_is_not_sent_again_by_default(server, caplog):
    server.plan("slow")
    with pytest.raises(RuntimeError, match=r"request 'k': the server call timed out and was not sent again \(the "
                                           r"server may still be computing it; retry_timeouts: true") as err:
        generator(server.url).generate([GenerationRequest("k", "Which river?", 8)])
    assert "no reply within 1 s" in str(err.value)
    assert [r.fault for r in server.requests()] == ["slow"]  # asked once


def test_a_request_that_cannot_succeed_fails_at_once_with_a_short_message(server):
    # A validation error (llama-cpp-python's HTTP 500 for a prompt it cannot read) and a 4xx are not retried,
    # and the server's long reply is cut.
    for fault in ("invalid", "auth"):
        server.plan(fault)
        with pytest.raises(RuntimeError, match=r"request 'k': the server call was refused \(HTTP (500|401)") as err:
            generator(server.url).generate([GenerationRequest("k", f"Which river? {fault}", 8)])
        assert len(str(err.value)) < 600 and SECRET not in str(err.value)
        assert [r.fault for r in server.requests() if r.prompt.endswith(fault)] == [fault]


@pytest.mark.parametrize("fault", TRANSIENT)
def test_judge_retries_past_one_fault(server, fault, tmp_path):
    server.plan(fault)
    client = JudgeClient("judge", server.url, cache=JudgeCache(tmp_path / "judge.sqlite"), max_concurrency=1,
                         max_retries=RETRIES, timeout_s=TIMEOUT_S)
    [call] = judge_calls(1)
    assert client.ask([call]) == {call.key: reply_for(call.prompt)}
    assert [r.fault for r in server.requests()] == [fault, "ok"] and client.calls == 1


# ----------------------------------------------------------------------------- a fault that persists


@pytest.mark.parametrize("fault", list(PERSISTENT))
def test_generation_fails_clearly_and_keeps_every_answer(server, fault, tmp_path):
    gen = generator(server.url, retry_timeouts=True)
    plan = plan_partition(instances(6), gen.spec, gen)
    store = GenerationCheckpoint(tmp_path / "store")
    step = chunk_size(gen.spec)
    assert step == 0  # the whole partition in one call, each answer stored as it arrives
    server.plan(*["ok"] * 4)  # four answers, then the server breaks for good
    server.always = fault

    with pytest.raises(RuntimeError, match=rf"model 'served', request '[0-9a-f]+': the server call {PERSISTENT[fault]}") as err:
        generate_partition(plan, gen, store, step)
    assert SECRET not in str(err.value) and err.value.__cause__ is None  # nothing left that quotes the key
    failed_key = str(err.value).split("request '")[1].split("'")[0]
    failed_prompt = next(p.request.prompt for p in plan.items if p.request.key == failed_key)
    assert len([r for r in server.requests() if r.prompt == failed_prompt]) == ATTEMPTS[fault]

    # The four answers are on disk, folded into a whole Parquet part when the run ended, readable by DuckDB.
    kept = store.load()
    assert kept.height == 4 and len(store.parts()) == 1 and store.journals() == []
    assert duckdb.sql(f"select count(*) from read_parquet('{store.directory}/*.parquet')").fetchall() == [(4,)]
    assert set(kept["output"]) == {reply_for(p.request.prompt) for p in plan.items[:4]}

    # The server recovers: the rerun asks only for the two missing prompts.
    server.always = "ok"
    before = len(server.received)
    outcome = generate_partition(plan, gen, store, step)
    asked = [r.prompt for r in server.received[before:]]
    assert (outcome.reused, outcome.generated) == (4, 2)
    assert sorted(asked) == sorted(p.request.prompt for p in plan.items[4:])
    assert outcome.rows["output"].to_list() == [reply_for(p.request.prompt) for p in plan.items]


@pytest.mark.parametrize("fault", list(PERSISTENT))
def test_judge_fails_clearly_and_keeps_answered_calls(server, fault, tmp_path):
    cache = JudgeCache(tmp_path / "judge.sqlite")
    calls = judge_calls(5)

    def client() -> JudgeClient:
        return JudgeClient("judge", server.url, cache=cache, max_concurrency=1, max_retries=RETRIES,
                           timeout_s=TIMEOUT_S)

    server.plan(*["ok"] * 3)
    server.always = fault
    first = client()
    with pytest.raises(RuntimeError, match=rf"judge 'judge' at http://127\.0\.0\.1:\d+: call call-03 {PERSISTENT[fault]}") as err:
        first.ask(calls)
    assert SECRET not in str(err.value) and err.value.__cause__ is None
    assert len([r for r in server.requests() if r.prompt == calls[3].prompt]) == ATTEMPTS[fault]
    # Every reply that arrived before the failure is in the cache, the failed call is not.
    stored = cache.get_many([c.key for c in calls])
    assert set(stored) == {"call-00", "call-01", "call-02"}

    server.always = "ok"
    before = len(server.received)
    second = client()
    replies = second.ask(calls)
    assert replies == {c.key: reply_for(c.prompt) for c in calls}
    assert (second.calls, second.cache_hits) == (2, 3)
    assert sorted(r.prompt for r in server.received[before:]) == sorted(c.prompt for c in calls[3:])


def test_token_ids_refused_once_then_text_and_refused_later_is_a_failure(server, caplog):
    # A completions model sending token ids: the first reply is a validation error (what llama-cpp-python answers
    # to a prompt of ids): the same request goes out again as text at once, and so does every later one. A
    # server that took ids before is not "learned" from a later validation error: that request fails.
    gen = generator(server.url, api="completions", chat_template=False)
    server.plan("invalid")
    with caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        [a, b] = gen.generate([GenerationRequest("a", "Which river?", 8), GenerationRequest("b", "Which lake?", 8)])
    first, again, second = server.requests()
    assert isinstance(first.body["prompt"], list) and again.body["prompt"] == "Which river?"
    assert second.body["prompt"] == "Which lake?" and a.output == reply_for("Which river?")
    [line] = [r.getMessage() for r in caplog.records if "token ids" in r.getMessage()]
    assert "refused a prompt of token ids" in line and "send_token_ids: false" in line
    # The fault server counts words, not tokens: its count differs from ours (the warning says so for each), so
    # what it fed is unknown.
    assert len([r for r in caplog.records if "does it add a BOS?" in r.getMessage()]) == 2
    assert (a.prompt_ids_hash, a.bos_tokens, a.chat_template_source) == ("", None, "none")

    with FaultyOpenAIServer() as other:
        ids = generator(other.url, api="completions", chat_template=False)
        ids.generate([GenerationRequest("c", "Which sea?", 8)])
        other.plan("invalid")
        with pytest.raises(RuntimeError, match=r"request 'd': the server call was refused \(HTTP 500: the server "
                                               r"could not validate the request, not retried\)"):
            ids.generate([GenerationRequest("d", "Which bay?", 8)])
        assert [type(r.body["prompt"]).__name__ for r in other.requests()] == ["list", "list"]


def test_the_window_stays_full_while_one_request_is_held(server, tmp_path):
    # Two requests in flight: the first is held by the server; the other slot goes on through every other request
    # of the partition (no chunk waits for the held one), and each answer is stored as it arrives.
    import threading

    gen = generator(server.url, max_concurrency=2, request_timeout_s=120.0)
    plan = plan_partition(instances(8), gen.spec, gen)
    store = GenerationCheckpoint(tmp_path / "store")
    server.plan("held")
    outcome: list = []
    run = threading.Thread(target=lambda: outcome.append(generate_partition(plan, gen, store, chunk_size(gen.spec))))
    run.start()
    try:
        deadline = time.monotonic() + 60
        while not (len(server.delivered()) == 7 and store.load() is not None and store.load().height == 7):
            assert run.is_alive() and time.monotonic() < deadline, "the other requests waited for the held one"
            time.sleep(0.01)
        [held] = [r for r in server.requests() if r.fault == "held"]
        assert not held.delivered and len(server.requests()) == 8  # all asked, seven answered and stored
    finally:
        server.release()
        run.join(timeout=60)
    assert outcome[0].generated == 8 and store.load().height == 8
