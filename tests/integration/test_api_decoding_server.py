"""An official protocol's API decoding reaches a real OpenAI-compatible server (issue 30; fidelity review LV3, LO6).

llama-cpp-python's server with SmolLM2 on 127.0.0.1, behind a loopback relay that records every body our client
sends (tests/servers.py RecordingRelay). The relay then bounds what the server generates (``max_tokens`` 16 added
upstream where the client sent none) so that a request without a cap costs seconds: what is asserted is the body
as our client sent it.

- the switch (GenerationRequest.api): no ``max_tokens`` / ``temperature`` and the system turn first, in our own
  words; a request without it keeps today's body;
- Loong official through plan_partition / generate_partition: no ``max_tokens``, temperature 0, no system turn;
  protocol ours: today's body; the rows record it;
- LV-Eval official with the authors' ``prediction_gpt.py`` (in ``../shared/official`` or the user's cache of the
  authors' files; skipped when neither has it): the system turn sent is the one read from that file.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from servers import RecordingRelay, llama_server, needs_llama_server, served_smollm2, smollm2_gguf
from shared_files import OFFICIAL

from lc_pipeline.benchmarks.lveval import official_files as lveval_files
from lc_pipeline.generate.base import SERVER_DEFAULT, ApiDecoding, GenerationRequest
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.official import OfficialFileError, official_path
from lc_pipeline.settings import DEFAULT_LOCAL_CACHE

pytestmark = needs_llama_server

QUESTION = "Question: What is the capital of France?\nAnswer:"
SYSTEM = "Answer in as few words as you can."  # our own words, standing in for a protocol's system turn
BOUND = 16  # what the relay lets the server generate when our client sent no max_tokens


def bounded(body: dict) -> dict:
    return body if "max_tokens" in body else {**body, "max_tokens": BOUND}


@pytest.fixture(scope="module")
def relay():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url, RecordingRelay(url, rewrite=bounded) as r:
        yield r


def chat_bodies(relay: RecordingRelay, start: int) -> list[dict]:
    return [body for path, body in relay.posts[start:] if path.endswith("/chat/completions")]


def by_question(bodies: list[dict], marker: str) -> dict:
    [body] = [b for b in bodies if marker in b["messages"][-1]["content"]]
    return body


def test_the_switch_leaves_max_tokens_and_temperature_to_the_server_and_sends_the_system_turn(relay):
    gen = served_smollm2(relay.url)
    start = len(relay.posts)
    api = ApiDecoding(send_max_tokens=False, send_temperature=False, system=SYSTEM, source="test")
    results = gen.generate([GenerationRequest("today", f"Today. {QUESTION}", 8),
                            GenerationRequest("api", f"Switched. {QUESTION}", 8, api=api)])
    bodies = chat_bodies(relay, start)
    today, switched = by_question(bodies, "Today."), by_question(bodies, "Switched.")
    assert (today["max_tokens"], today["temperature"]) == (8, 0.0)
    assert [m["role"] for m in today["messages"]] == ["user"]
    assert "max_tokens" not in switched and "temperature" not in switched
    assert switched["messages"] == [{"role": "system", "content": SYSTEM},
                                    {"role": "user", "content": f"Switched. {QUESTION}"}]
    assert all(r.output for r in results)
    assert results[1].completion_tokens <= BOUND
    # The prompt is fitted with the system turn rendered in: what the server's template should produce.
    switched_ids = gen.fit(GenerationRequest("api", f"Switched. {QUESTION}", 8, api=api)).ids
    assert switched_ids == gen.render(f"Switched. {QUESTION}", SYSTEM) != gen.render(f"Switched. {QUESTION}")
    assert SYSTEM in gen.prompt_tokenizer.decode(switched_ids)


def test_in_completions_mode_the_system_turn_is_rendered_into_the_prompt_sent(relay):
    gen = served_smollm2(relay.url, api="completions", send_token_ids=False)  # llama-cpp-python takes text
    start = len(relay.posts)
    api = ApiDecoding(send_max_tokens=False, system=SYSTEM, source="test")
    [result] = gen.generate([GenerationRequest("api", f"Rendered. {QUESTION}", 8, api=api)])
    [body] = [b for path, b in relay.posts[start:] if path.endswith("/completions")]
    assert "max_tokens" not in body and body["temperature"] == 0.0
    assert body["prompt"] == gen.prompt_tokenizer.decode(gen.render(f"Rendered. {QUESTION}", SYSTEM))
    assert SYSTEM in body["prompt"] and body["prompt"].index(SYSTEM) < body["prompt"].index("Rendered.")
    assert result.output


def instances(rows: list[tuple[str, str, str, str]]) -> pl.DataFrame:
    """(instance_id, benchmark, task, protocol) rows; the prompt names the row."""
    return pl.DataFrame([{"instance_id": i, "benchmark": b, "task": t, "prompt": f"Row {i}. {QUESTION}",
                          "context": f"Row {i}.", "max_new_tokens": 8, "protocol": p} for i, b, t, p in rows])


def run(relay: RecordingRelay, rows: list[tuple[str, str, str, str]], store) -> tuple[dict, dict]:
    """The rows planned and generated through the relay: (instance id -> the body sent, instance id -> row)."""
    gen = served_smollm2(relay.url)
    start = len(relay.posts)
    plan = plan_partition(instances(rows), gen.spec, gen)
    outcome = generate_partition(plan, gen, GenerationCheckpoint(store), chunk=0)
    bodies = chat_bodies(relay, start)
    return ({iid: by_question(bodies, f"Row {iid}.") for iid, *_ in rows},
            {r["instance_id"]: r for r in outcome.rows.iter_rows(named=True)})


def test_loong_official_sends_no_max_tokens_at_temperature_0_and_ours_keeps_todays_body(relay, tmp_path):
    bodies, rows = run(relay, [("l1", "loong", "chain_of_reasoning", "official@e05a1fd"),
                               ("l2", "loong", "chain_of_reasoning", "ours")], tmp_path / "store")
    official, ours = bodies["l1"], bodies["l2"]
    assert "max_tokens" not in official and official["temperature"] == 0.0
    assert [m["role"] for m in official["messages"]] == ["user"]
    assert (ours["max_tokens"], ours["temperature"]) == (8, 0.0)
    assert {k: v for k, v in official.items() if k not in ("max_tokens", "messages")} == {
        k: v for k, v in ours.items() if k not in ("max_tokens", "messages")}
    params = json.loads(rows["l1"]["sampling_params"])
    assert params["max_tokens"] == SERVER_DEFAULT and "MozerWang/Loong" in params["api_decoding"]
    assert "api_decoding" not in json.loads(rows["l2"]["sampling_params"])
    assert rows["l1"]["cache_key"] != rows["l2"]["cache_key"]
    assert rows["l1"]["output"] and rows["l2"]["output"]


def test_lveval_official_sends_the_system_turn_of_the_authors_api_script(relay, tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(DEFAULT_LOCAL_CACHE))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    try:
        official_path(lveval_files.PREDICTION_GPT)
    except OfficialFileError as exc:
        pytest.skip(f"the authors' prediction_gpt.py is in neither ../shared/official nor the cache ({exc})")
    bodies, rows = run(relay, [("v1", "lveval", "factrecall_en", "official@63e7ae9"),
                               ("v2", "lveval", "factrecall_en", "ours")], tmp_path / "store")
    official, ours = bodies["v1"], bodies["v2"]
    system = lveval_files.api_system_turn()
    assert "max_tokens" not in official and "temperature" not in official
    assert official["messages"][0] == {"role": "system", "content": system}
    assert [m["role"] for m in official["messages"]] == ["system", "user"]
    assert (ours["max_tokens"], ours["temperature"], [m["role"] for m in ours["messages"]]) == (8, 0.0, ["user"])
    params = json.loads(rows["v1"]["sampling_params"])
    assert (params["system_prompt"], params["temperature"], params["max_tokens"]) == (
        system, SERVER_DEFAULT, SERVER_DEFAULT)
