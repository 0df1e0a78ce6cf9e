"""Policy ``prompt_middle:<budget>`` (issue 30, a benchmark's official truncation): the user prompt is cut in the
middle to the protocol's budget *before* the chat template, each half decoded on its own, and nothing is cut
further; the budget is the protocol's table for a listed model, else its rule (a fixed number or the window minus a
reserve). And the config's ``protocol`` field: what it accepts and where.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from lc_pipeline.config import ConfigError, has_official_protocol, load_config
from lc_pipeline.construct import truncation
from lc_pipeline.construct.truncation import (
    PromptBudget,
    PromptDoesNotFitError,
    cut_prompt_middle,
    fit_prompt,
    prompt_budget,
    validate_policy,
)
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.prompting import TiktokenTokenizer, fit_request
from lc_pipeline.generate.registry import ModelSpec

TOK = TiktokenTokenizer("cl100k_base")
# An API model fed token ids (completions, plain prompt), counted with tiktoken: every id is ours to check.
API = ModelSpec(slug="api", backend="openai", model_id="api-model", gguf_file=None, max_model_len=300,
                api="completions", chat_template=False, tokenizer="tiktoken:cl100k_base",
                base_url="http://127.0.0.1:9/v1")
WORDS = " ".join(f"word{i}" for i in range(400))  # ~800 tokens


@pytest.fixture
def budget(monkeypatch):
    """A budget ``test_rule`` registered for the test: 100 tokens for model ``listed``, else the window - 200."""
    rule = PromptBudget(by_model={"listed": 100}, window_reserve=200, source="test table")
    monkeypatch.setitem(truncation.PROMPT_BUDGETS, "test_rule", lambda: rule)
    return rule


def test_the_budget_is_the_models_row_when_listed_else_the_rule():
    table = PromptBudget(by_model={"llama2-7b-chat-4k": 3500}, window_reserve=500)
    assert table.tokens("llama2-7b-chat-4k", 4096) == 3500  # its row, whatever the window registered
    assert table.tokens("Llama2-7b-chat-4k", 32768) == 32268  # exact names only: window - 500
    assert PromptBudget(by_model={"claude": 200000}, fixed=120000).tokens("qwen", 131072) == 120000
    with pytest.raises(ValueError, match="give fixed or window_reserve"):
        PromptBudget(by_model={"a": 1})


@pytest.mark.parametrize("policy", ["prompt_middle:longbench", "prompt_middle:lveval", "middle", "skip"])
def test_prompt_middle_policies_name_a_budget(policy):
    assert validate_policy(policy) == policy


@pytest.mark.parametrize("policy", ["prompt_middle", "prompt_middle:", "prompt_middle:Long-Bench", "middle:x"])
def test_a_malformed_policy_is_refused_naming_it(policy):
    with pytest.raises(ValueError, match="unknown truncation policy"):
        validate_policy(policy)


def test_the_cut_keeps_half_the_budget_at_each_end_each_half_decoded_on_its_own():
    ids = TOK.encode(WORDS)
    text, cut = cut_prompt_middle(WORDS, 101, encode=TOK.encode, decode=TOK.decode)
    # pred.py: half = int(max_length/2) on each side (an odd budget keeps one token fewer)
    assert cut and text == TOK.decode(ids[:50]) + TOK.decode(ids[-50:])
    assert cut_prompt_middle(WORDS, len(ids), encode=TOK.encode, decode=TOK.decode) == (WORDS, False)
    with pytest.raises(PromptDoesNotFitError, match="cannot keep a head and a tail"):
        cut_prompt_middle(WORDS, 1, encode=TOK.encode, decode=TOK.decode)


def test_fit_request_cuts_the_prompt_to_the_budget_before_rendering_and_no_further(budget):
    spec = dataclasses.replace(API, max_model_len=600)
    request = GenerationRequest("k", WORDS, 64, "prompt_middle:test_rule")
    fitted = fit_request(spec, TOK, request)
    ids = TOK.encode(WORDS)
    head_tail = TOK.decode(ids[:200]) + TOK.decode(ids[-200:])  # window 600 - 200 = 400 tokens
    assert fitted.text == head_tail and fitted.ids == TOK.encode_plain_prompt(head_tail)
    assert fitted.truncated and fitted.original_tokens == len(ids) and fitted.policy == "prompt_middle:test_rule"
    # a model the table lists keeps its own row (100 tokens), whatever its window
    listed = fit_request(dataclasses.replace(API, slug="listed", max_model_len=600), TOK, request)
    assert listed.text == TOK.decode(ids[:50]) + TOK.decode(ids[-50:])
    short = GenerationRequest("s", "a short question", 64, "prompt_middle:test_rule")
    assert fit_request(spec, TOK, short).ids == TOK.encode("a short question") and not fit_request(
        spec, TOK, short).truncated


def test_a_budget_over_the_window_itself_is_an_error_naming_the_request(monkeypatch):
    monkeypatch.setitem(truncation.PROMPT_BUDGETS, "too_big", lambda: PromptBudget(fixed=500, source="big table"))
    with pytest.raises(PromptDoesNotFitError, match=r"request 'k'.*budget of 500 tokens \(big table\).*max_model_len 300"):
        fit_request(API, TOK, GenerationRequest("k", WORDS, 16, "prompt_middle:too_big"))


def test_an_unknown_budget_names_the_protocol_module_that_would_register_it():
    with pytest.raises(ValueError, match=r"no prompt budget 'nosuchbench'.*lc_pipeline/benchmarks/nosuchbench/protocol"):
        prompt_budget("prompt_middle:nosuchbench", "k")


def test_a_servers_chat_template_path_refuses_the_policy_rather_than_cut_otherwise(budget):
    # generate/openai_backend fits chat requests with fit_prompt (the server renders the template): the protocol's
    # budget needs the model, so that path fails loudly instead of applying another cut.
    with pytest.raises(ValueError, match="cuts the prompt before the chat template"):
        fit_prompt(WORDS, 200, render=TOK.encode, encode=TOK.encode, decode=TOK.decode,
                   policy="prompt_middle:test_rule", key="k")


def write(tmp_path, **body):
    path = tmp_path / f"{body['name']}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@pytest.mark.parametrize(("body", "message"), [
    ({"protocol": "theirs"}, r"field 'protocol': 'theirs': expected one of \['official', 'ours'\]"),
    ({"protocol": "official", "released": {"benchmark": "qa"}},
     r"benchmark 'qa' has no official protocol here \(no module lc_pipeline.benchmarks.qa.protocol\)"),
])
def test_the_protocol_field_is_checked_when_the_config_loads(tmp_path, body, message):
    base = {"name": "released-demo", "sources": [{"name": "demo", "kind": "demo_corpus"}],
            "released": {"benchmark": "longbench"}, "lengths": ["all"]}
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, **{**base, **body}))


def test_a_constructed_suite_takes_no_protocol():
    with pytest.raises(ConfigError, match="applies to a benchmark run as released"):
        load_config("demo").replace(protocol="ours")
    assert load_config("demo").protocol_label() == "ours"
    assert has_official_protocol("longbench") and not has_official_protocol("nosuchbench")
