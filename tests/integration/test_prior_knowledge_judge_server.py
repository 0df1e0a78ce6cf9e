"""100-LongBench's prior-knowledge filter graded by a real judge (``prior_knowledge.scorer: judge``): the
no-context answers go to llama-cpp-python's OpenAI-compatible server (SmolLM2 on 127.0.0.1) with each QA
task's rubric, through the same function the prior_knowledge asset calls; every answer that is not
"unanswerable" gets a verdict row, and the filter's decision follows the verdict and the threshold."""

from __future__ import annotations

import polars as pl
import pytest
from servers import llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline.benchmarks.longbench100.config import PriorKnowledgeConfig
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score.per_model import judge_no_context, no_context_questions
from lc_pipeline.score.prior_knowledge import prior_knowledge_frame
from lc_pipeline.tasks.catalog import load_catalog

pytestmark = [*needs_llama_server, pytest.mark.slow]

QUESTIONS = {  # item -> (question, gold, the model's no-context answer)
    "single_doc_qa-a": ("What is the capital of France?", "Paris", "Paris"),
    "multi_doc_qa-b": ("Who signed the ledger of Vell in 1802?", "Ansel Brook", "unanswerable"),
}


def instances() -> pl.DataFrame:
    return pl.DataFrame([{"instance_id": f"{iid}@2k", "item_id": iid, "suite": "longbench100",
                          "benchmark": "longbench100", "task": iid.split("-")[0], "category": "QA", "depth": 0.5,
                          "question": q, "answers": [gold]} for iid, (q, gold, _) in QUESTIONS.items()])


def test_no_context_answers_are_graded_by_the_judge_server_and_filtered_by_its_verdict(tmp_path):
    pk = PriorKnowledgeConfig(scorer="judge")
    rows = instances()
    items = no_context_questions(rows, pk)
    outputs = [{"output": QUESTIONS[i][2], "completion_tokens": 1, "finish_reason": "stop"} for i in items["item_id"]]
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        judge = JudgeResource(base_url=url, model="smollm2", max_tokens=48, max_concurrency=1,
                              cache_path=str(tmp_path / "judge.sqlite"))
        judged, meta = judge_no_context(items, outputs, rows, judge.client(), {}, load_catalog())
    # the "unanswerable" answer is never asked (and never dropped); the other one gets the QA rubric's verdict
    assert list(judged) == ["single_doc_qa-a"] and meta["judged"] == 1 and meta["judge_model"] == "smollm2"
    label, score = judged["single_doc_qa-a"]
    assert label == "judge:lb100_qa" and (score is None or 0.0 <= score <= 1.0)
    assert meta["judge_unparsed"] == (score is None)
    frame = prior_knowledge_frame(items, outputs, metric=pk.metric, threshold=pk.threshold, judged=judged)
    by_item = {r["item_id"]: r for r in frame.iter_rows(named=True)}
    assert by_item["single_doc_qa-a"]["dropped"] == (score is not None and score >= pk.threshold)
    assert by_item["multi_doc_qa-b"]["said_unanswerable"] and not by_item["multi_doc_qa-b"]["dropped"]
