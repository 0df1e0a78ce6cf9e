"""The judges under ``protocol: official`` against a real OpenAI-compatible server: what the server receives is the
authors' call (issue 30; fidelity audit HE4, LO2, LB100-3, X2), and unread verdicts are scored per protocol.

llama-cpp-python's server on 127.0.0.1 serves SmolLM2-135M-Instruct. In front of it, a recording relay on
127.0.0.1 (stopped inside the test) keeps every request body the judge client sends, as sent, then passes it
on with ``max_tokens`` lowered to :data:`RELAY_MAX_TOKENS` so that a 135M model on a shared CPU answers in
seconds (the authors' 2,048 and 4,096 would let it ramble for minutes); the replies are the model's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from servers import RecordingRelay, llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline.benchmarks.longbench100 import judging as lb100_judging
from lc_pipeline.resources.judge import JudgeClient
from lc_pipeline.score import judge

pytestmark = [*needs_llama_server, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHARED_OFFICIAL = REPO.parent / "shared" / "official"
needs_shared = pytest.mark.skipif(not SHARED_OFFICIAL.is_dir(),
                                  reason=f"the authors' files are not at {SHARED_OFFICIAL} (../shared/official)")
RELAY_MAX_TOKENS = 24


def judge_relay(upstream: str) -> RecordingRelay:
    """The SmolLM2 server behind a recorder; each call asks for at most RELAY_MAX_TOKENS so a 135M model answers
    quickly (the recorded body keeps the max_tokens the client sent)."""
    return RecordingRelay(upstream, rewrite=lambda body: {**body, "max_tokens": RELAY_MAX_TOKENS})


def received(relay: RecordingRelay, prompt: str) -> list[dict]:
    return [b for b in relay.bodies if b["messages"][-1]["content"] == prompt]


@pytest.fixture(scope="module")
def server_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=4096) as url:
        yield url


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(SHARED_OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")


def frames() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Instances of our own making: a HELMET NarrativeQA question, a Multi-LexSum summary, a Loong clustering item."""
    loong_fields = {"type": "financial", "level": 3, "set": 1, "language": "en", "question": "Who lost money?",
                    "instruction": "Group the companies.", "prompt_template": "{docs}\n{instruction}\n{question}",
                    "answer": str({"Loss": ["Orvel Ltd"], "Profit": ["Kestrel Inc"]})}
    summ_fields = {"key_points": ["The court approved a decree.", "A monitor was named."],
                   "reference_summary": "In 2011 the court approved a consent decree and named a monitor."}
    rows = [
        ("i1", "helmet", "narrativeqa", "LongQA", "Where are they headed?", ["the North Pole"], {}),
        ("i2", "helmet", "multi_lexsum", "Summ", "", ["A short summary."], summ_fields),
        ("i3", "loong", "clustering", "Loong", "Who lost money?", ['{"Loss": ["Orvel Ltd"]}'], loong_fields),
    ]
    instances = pl.DataFrame({
        "instance_id": [r[0] for r in rows], "item_id": [r[0] for r in rows], "suite": ["s"] * 3,
        "benchmark": [r[1] for r in rows], "task": [r[2] for r in rows], "category": [r[3] for r in rows],
        "depth": [0.5] * 3, "question": [r[4] for r in rows], "answers": [r[5] for r in rows],
        "record_fields": [json.dumps(r[6]) for r in rows]})
    generations = pl.DataFrame({"generation_id": ["g1", "g2", "g3"], "instance_id": ["i1", "i2", "i3"],
                                "output": ["Answer: To the North Pole.",
                                           "The court approved a decree. A monitor was named.",
                                           "Loss: Orvel Ltd. Profit: Kestrel Inc."]})
    return generations, instances


@needs_shared
def test_the_server_receives_the_authors_calls_and_unread_verdicts_count_per_protocol(server_url, shared_env):
    generations, instances = frames()
    with judge_relay(server_url) as relay:
        client = JudgeClient("smollm2", relay.url, max_concurrency=2, max_retries=0, timeout_s=300)
        plan = judge.plan_judgments(generations, instances, client.model, client.decoding, protocol="official")
        # 100-LongBench's rules and settings on prompts of our own (its authors' file is not in ../shared).
        lb_qa = lb100_judging.qa_rubric("Grade the answer. Question: {question} Gold: {correct_answers} "
                                        "Answer: {parsed_output} Reply with JSON fluency and correctness.")
        lb_summ = lb100_judging.summ_rubric({"fluency_prompt": "Is this fluent? Text: \"{text}\" Reply JSON.",
                                             "precision_prompt": "Expert: \"{expert_summary}\" Summary: "
                                                                 "\"{summary}\" Count supported sentences."})
        inst = {"instance_id": "i9", "item_id": "i9", "suite": "s", "task": "single_doc_qa", "category": "QA",
                "depth": 0.5}
        for rubric, out in ((lb_qa, "Ada Brenn."), (lb_summ, "The court approved a decree.")):
            inp = judge.JudgeInput("Who founded it?", ["Ada Brenn"], out, {}, inst["task"])
            calls = {a: judge.JudgeCall(judge.call_key(client.model, rubric, a, p, {}), p, settings=rubric.settings)
                     for a, p in rubric.prompts(inp).items()}
            plan.append(judge.Judgment(f"g-{rubric.name}", inst, rubric, inp, calls))
        first_keys = {(j.generation_id, a): c.key for j in plan for a, c in j.calls.items()}
        replies = judge.ask_judgments(plan, client.ask)
        rows = judge.judge_frame(plan, replies, client.model)

    by_rubric = {j.rubric.name: j for j in plan}
    assert set(by_rubric) == {"helmet_longqa", "helmet_summ", "loong", "lb100_qa", "lb100_summ"}
    for name, max_tokens in (("helmet_longqa", 2048), ("helmet_summ", 4096)):
        for call in by_rubric[name].calls.values():
            for body in received(relay, call.prompt):
                assert body["messages"] == [{"role": "user", "content": call.prompt}]  # no system turn
                assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == \
                    (0.1, 0.9, max_tokens, 42)
                assert "response_format" not in body
    loong_call = by_rubric["loong"].calls["score"]
    (loong_body, *_) = received(relay, loong_call.prompt)
    assert loong_body["messages"] == [{"role": "user", "content": loong_call.prompt}]
    assert loong_body["temperature"] == 0.0 and not {"max_tokens", "top_p", "seed"} & set(loong_body)
    assert "{'Loss': ['Orvel Ltd'], 'Profit': ['Kestrel Inc']}" in loong_call.prompt
    for name in ("lb100_qa", "lb100_summ"):
        for call in by_rubric[name].calls.values():
            for body in received(relay, call.prompt):
                assert body["messages"] == [{"role": "system", "content": "You are a helpful assistant"},
                                            {"role": "user", "content": call.prompt}]
                assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.1, 0.9, 1024)
                assert "seed" not in body
    # 100-LongBench Sum: a question whose first reply had no verdict was asked a second time (get_score's 2 tries).
    summ = by_rubric["lb100_summ"]
    for aspect, call in summ.calls.items():
        first = replies[first_keys[(summ.generation_id, aspect)]]
        sent = len(received(relay, call.prompt))
        assert sent == (1 if lb100_judging.summ_verdict(first) is not None else 2), (aspect, first)
    # Unread verdicts: 100-LongBench scores them 0; HELMET and Loong leave them out (null score).
    for row in rows.iter_rows(named=True):
        if row["parse_status"] != judge.OK:
            assert row["score"] == (0.0 if row["rubric"].startswith("lb100") else None), row
        assert row["rubric_version"].startswith("official@")
    print({r["rubric"]: (r["parse_status"], r["score"]) for r in rows.iter_rows(named=True)})
