"""`lcp plan`'s counting and estimates (generate/planning.py), with a real tokenizer (tiktoken, offline)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.partition import plan_partition
from lc_pipeline.generate.planning import (
    count_requests,
    given_throughput,
    measure_throughput,
    plan_json,
    request_fitter,
    summarize,
)
from lc_pipeline.generate.prompting import TiktokenTokenizer
from lc_pipeline.generate.registry import ModelSpec

# An API model counted with tiktoken; completions with the plain prompt, so every id is ours to count.
API = ModelSpec(slug="api", backend="openai", model_id="api-model", gguf_file=None, max_model_len=300,
                api="completions", chat_template=False, tokenizer="tiktoken:cl100k_base",
                base_url="http://127.0.0.1:9/v1", price_per_million_input_tokens=2.0,
                price_per_million_output_tokens=10.0)
WORDS = " ".join(f"word{i}" for i in range(400))  # ~800 tokens: over the 300-token window


def instances(prompts: list[str], level_target: int = 1024) -> pl.DataFrame:
    n = len(prompts)
    return pl.DataFrame({
        "instance_id": [f"i{k}" for k in range(n)], "benchmark": ["qa"] * n, "task": ["single_hop_qa"] * n,
        "prompt": prompts, "context": prompts, "max_new_tokens": [10] * n, "target_tokens": [level_target] * n,
    })


def counted(spec: ModelSpec, prompts: list[str], stored=()) -> pl.DataFrame:
    gen = make_generator(spec)
    fit, _ = request_fitter(spec, gen)
    df = instances(prompts)
    return count_requests(plan_partition(df, spec, gen), df, "1k", spec, fit, stored)


def test_prompt_tokens_are_the_models_count_after_fitting_to_the_window():
    rows = counted(API, ["What is the capital of France?", WORDS])
    tok = TiktokenTokenizer("cl100k_base")
    short, long = rows.row(0, named=True), rows.row(1, named=True)
    assert short["prompt_tokens"] == short["original_prompt_tokens"] == len(tok.encode("What is the capital of France?"))
    assert not short["truncated"] and short["status"] == ""
    assert long["original_prompt_tokens"] == len(tok.encode(WORDS))
    assert long["truncated"] and long["prompt_tokens"] <= 300 - 10  # the window less max_new_tokens
    assert rows["target_tokens"].to_list() == [1024, 1024] and rows["truncation_policy"].to_list() == ["middle"] * 2


def test_a_skip_model_sends_nothing_that_does_not_fit_and_the_row_says_so():
    rows = counted(dataclasses.replace(API, truncation="skip"), ["short prompt", WORDS])
    assert rows["status"].to_list() == ["", "skipped"]
    skipped = rows.row(1, named=True)
    assert skipped["prompt_tokens"] == 0 and skipped["original_prompt_tokens"] > 300 and not skipped["truncated"]


def test_stored_keys_are_reused_and_identical_prompts_run_once():
    first = counted(API, ["same prompt", "same prompt", "another prompt"])
    assert first["first_of_key"].to_list() == [True, False, True]
    again = counted(API, ["same prompt", "same prompt", "another prompt"], stored={first["cache_key"][0]})
    assert again["reused"].to_list() == [True, True, False]
    cell = summarize(API, again, request_fitter(API, make_generator(API))[1], None, ["1k"]).cells[0]
    assert (cell["instances"], cell["requests"], cell["reused"], cell["to_generate"]) == (3, 2, 2, 1)


def test_a_measured_rate_separates_prefill_from_decode_when_the_rows_support_it():
    prompt = [1000, 2000, 4000, 500, 3000, 1500, 2500, 800, 3500, 1200]
    completion = [10, 24, 5, 20, 12, 24, 3, 18, 9, 15]
    rows = pl.DataFrame({"instance_id": [f"i{k}" for k in range(10)], "cache_key": [f"k{k}" for k in range(10)],
                         "prompt_tokens": prompt, "completion_tokens": completion,
                         "latency_s": [p / 1000 + c / 20 for p, c in zip(prompt, completion)],
                         "status": ["answered"] * 10})
    rate = measure_throughput(rows)
    assert rate.basis == "lake" and rate.rows == 10
    assert rate.prefill_tokens_per_second == pytest.approx(1000) and rate.decode_tokens_per_second == pytest.approx(20)
    assert rate.seconds(2000, 40) == pytest.approx(4.0)

    budgets = pl.DataFrame({"instance_id": [f"i{k}" for k in range(10)], "max_new_tokens": [24] * 10})
    assert measure_throughput(rows, budgets).completion_share == pytest.approx(sum(completion) / 240)

    few = measure_throughput(rows.head(3))  # too few rows for two rates: one overall
    assert few.prefill_tokens_per_second is None
    assert few.tokens_per_second == pytest.approx((7000 + 39) / sum(rows.head(3)["latency_s"]))
    skipped = pl.DataFrame({"prompt_tokens": [0], "completion_tokens": [0], "latency_s": [0.0], "status": ["skipped"]})
    assert measure_throughput(skipped) is None


def test_cells_estimate_time_and_cost_of_what_is_left_to_generate():
    rows = counted(API, ["one prompt", "two prompt", WORDS])
    stored = {rows["cache_key"][0]}
    rows = counted(API, ["one prompt", "two prompt", WORDS], stored)
    info = request_fitter(API, make_generator(API))[1]
    plan = summarize(API, rows, info, given_throughput(100.0), ["1k"])
    cell = plan.cells[0]
    todo = rows.filter(~pl.col("reused"))
    assert cell["prompt_tokens_to_generate"] == todo["prompt_tokens"].sum()
    # No measured completion share: the whole max_new_tokens is counted (an upper bound).
    assert cell["estimated_seconds"] == pytest.approx(round((todo["prompt_tokens"].sum() + 20) / 100, 1))
    assert cell["estimated_cost"] == pytest.approx(2.0 * todo["prompt_tokens"].sum() / 1e6 + 10.0 * 20 / 1e6)
    assert cell["estimated_cost_all"] > cell["estimated_cost"]
    assert plan.totals["truncated"] == 1 and plan.totals["instances"] == 3
    assert not info.exact and "tiktoken" in info.note
    assert any("upper bound" in n for n in plan.notes)

    doc = plan_json([plan], {"config": "t"}, with_requests=True)
    assert doc["format"] == 1 and doc["models"][0]["requests"][0]["instance_id"] == "i0"
    assert doc["models"][0]["throughput"]["basis"] == "given"
    with pytest.raises(ValueError, match="tokens-per-second"):
        given_throughput(0)


def test_no_prices_and_no_rate_say_what_is_missing():
    spec = dataclasses.replace(API, price_per_million_input_tokens=None, price_per_million_output_tokens=None)
    rows = counted(spec, ["a prompt"])
    plan = summarize(spec, rows, request_fitter(spec, make_generator(spec))[1], None, ["1k"])
    assert plan.cells[0]["estimated_seconds"] is None and plan.cells[0]["estimated_cost"] is None
    assert any("--tokens-per-second" in n for n in plan.notes) and any("price_per_million" in n for n in plan.notes)


def test_a_served_models_overlapping_requests_and_other_models_rows_are_accounted_for():
    rows = pl.DataFrame({"prompt_tokens": [900, 100], "completion_tokens": [100, 0], "latency_s": [10.0, 1.0],
                         "backend": ["openai", "transformers"], "model_id": ["api-model", "other"]})
    rate = measure_throughput(rows, spec=dataclasses.replace(API, max_concurrency=4), model_id="api-model")
    assert rate.rows == 1 and rate.tokens_per_second == pytest.approx(100.0)  # the other model's row is left out
    assert rate.parallel == 4 and rate.seconds(400, 0) == pytest.approx(1.0)  # 4 s of requests, 4 at once


def test_a_reasoning_models_thinking_budget_is_reserved_and_counted_as_output():
    spec = dataclasses.replace(API, thinking={"budget_tokens": 50})
    rows = counted(spec, ["a prompt"])
    assert rows["max_new_tokens"].to_list() == [60] and rows["output_tokens_max"].to_list() == [60]
    plan = summarize(spec, rows, request_fitter(spec, make_generator(spec))[1], None, ["1k"])
    assert any("thinking budget of 50" in n for n in plan.notes)


def test_a_new_slug_is_timed_by_the_models_with_the_same_backend_and_weights(tmp_path):
    from lc_pipeline.commands.plan import _same_weights_rate
    from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

    def generations(backend: str, model_id: str, seconds: float) -> pl.DataFrame:
        return pl.DataFrame({"cache_key": [f"{backend}{k}" for k in range(3)], "instance_id": ["a", "b", "c"],
                             "prompt_tokens": [900, 900, 900], "completion_tokens": [100, 100, 100],
                             "latency_s": [seconds] * 3, "status": ["answered"] * 3, "backend": [backend] * 3,
                             "model_id": [model_id] * 3})

    # The lake holds an earlier registration of the same API model (1,000 tokens in 2 s) and another model.
    write_parquet_atomic(generations("openai", "api-model", 2.0),
                         partition_path(tmp_path, "generations", {"length": "1k", "model": "api-old"}))
    write_parquet_atomic(generations("transformers", "other", 20.0),
                         partition_path(tmp_path, "generations", {"length": "1k", "model": "other"}))
    rate = _same_weights_rate(tmp_path, API, "api-model", None)
    assert rate.rows == 3 and rate.tokens_per_second == pytest.approx(500.0)
    assert "other models with the same backend and weights (api-model)" in rate.describe()
    assert _same_weights_rate(tmp_path, API, "never-run", None) is None
