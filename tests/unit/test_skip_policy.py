"""Truncation policy ``skip`` (issue 21): a prompt that does not fit the window is not sent; which policy a
request gets (run override > model > task file); what a skipped request's result says; a chain whose first call
was skipped makes no second call. No model is loaded (cl100k from the offline copy, an OpenAI-backend spec
pointing nowhere: planning never calls it)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest
import yaml
from pydantic import ValidationError

from lc_pipeline.construct.truncation import MIDDLE, POLICIES, SKIP, fit_prompt
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, GenerationResult
from lc_pipeline.generate.followup import Chain, FollowupGenerator
from lc_pipeline.generate.partition import plan_partition
from lc_pipeline.generate.prompting import TiktokenTokenizer, skipped_result, to_send
from lc_pipeline.generate.registry import ModelSpec, ModelSpecError
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.spec import Followup

TOK = TiktokenTokenizer("cl100k_base")
HEADER, FOOTER = "<|user|>\n", "\n<|assistant|>\n"  # stands for a chat template's fixed tokens
SHORT = "Question: what is the capital of France?\nAnswer:"
LONG = "Read the report. " + "The river floods every spring and the farmers move uphill. " * 60 + SHORT

SERVED = ModelSpec(slug="served", backend="openai", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                   max_model_len=32768, api_model="qwen", base_url="http://127.0.0.1:9/v1")


def render(text: str) -> list[int]:
    return TOK.encode(HEADER + text + FOOTER)


def fit(prompt: str, budget: int, policy: str = SKIP):
    return fit_prompt(prompt, budget, render=render, encode=TOK.encode, decode=TOK.decode, policy=policy,
                      context=None, key="inst-1")


def test_skip_is_a_policy_and_a_prompt_that_fits_is_sent_whole():
    assert SKIP == "skip" and SKIP in POLICIES
    f = fit(SHORT, 1000)
    assert not f.skipped and not f.truncated and f.policy == SKIP
    assert f.ids == render(SHORT) and f.text == SHORT and f.original_tokens == len(f.ids)


def test_a_prompt_over_the_window_is_skipped_with_its_exact_length_and_nothing_to_send():
    exact = len(render(LONG))
    f = fit(LONG, exact - 1)
    assert f.skipped and f.ids == [] and f.text == "" and not f.truncated and f.policy == SKIP
    assert f.original_tokens == exact
    assert not fit(LONG, exact).skipped  # exactly the budget fits
    # The same prompt under middle is cut instead (the policy the task files default to).
    cut = fit(LONG, exact - 1, MIDDLE)
    assert cut.truncated and not cut.skipped and cut.original_tokens == exact


def test_a_task_file_may_declare_skip_and_an_unknown_policy_is_refused(tmp_path):
    path = tmp_path / "skip.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "qa", "tasks": [{"name": "single_hop_qa", "truncation": "skip"}]}))
    assert load_catalog([path]).get("qa/single_hop_qa").truncation == SKIP
    path.write_text(yaml.safe_dump({"benchmark": "qa", "tasks": [{"name": "single_hop_qa", "truncation": "drop"}]}))
    with pytest.raises((ValueError, ValidationError), match="truncation"):
        load_catalog([path])


def test_a_model_with_an_unknown_policy_is_refused_naming_model_and_field():
    with pytest.raises(ModelSpecError, match="'served'.*'truncation'"):
        dataclasses.replace(SERVED, truncation="sometimes")


def instances() -> pl.DataFrame:
    return pl.DataFrame({
        "instance_id": ["a", "b", "c"],
        "benchmark": ["lveval", "loong", "helmet"],
        "task": ["hotpotwikiqa_mixup", "comparison", "longqa"],
        "prompt": ["Q mixup", "Q about docs", "Q about docs"],
        "context": ["mixup", "docs", "docs"],
        "max_new_tokens": [64, 64, 64],
    })


def policies(spec: ModelSpec, overrides=None) -> list[str]:
    plan = plan_partition(instances(), spec, make_generator(spec), overrides)
    return [p.request.truncation for p in plan.items]


def test_the_policy_is_the_runs_override_then_the_models_then_the_task_files():
    assert policies(SERVED) == ["middle", "drop_documents", "end_of_context"]  # each task file's
    skipping = dataclasses.replace(SERVED, truncation=SKIP)
    assert policies(skipping) == [SKIP, SKIP, SKIP]  # the model's, for every task
    assert policies(skipping, {"comparison": MIDDLE}) == [SKIP, MIDDLE, SKIP]  # a run override wins
    assert policies(SERVED, {"*": SKIP}) == [SKIP, SKIP, SKIP]
    # The policy is part of the request's cache key: skipped rows are never reused as cut ones, or back.
    keys = {p.request.key for p in plan_partition(instances(), SERVED, make_generator(SERVED)).items}
    skip_keys = {p.request.key for p in plan_partition(instances(), SERVED, make_generator(SERVED), {"*": SKIP}).items}
    assert not keys & skip_keys


def test_a_skipped_result_says_nothing_was_fed_and_the_others_are_sent():
    request = GenerationRequest("k-long", LONG, 16, SKIP)
    fitted = [fit(SHORT, 100), fit(LONG, 100), fit(SHORT + " Paris?", 100)]
    assert to_send(fitted) == [0, 2]  # what a batching backend (vllm, transformers) hands the engine
    r = skipped_result(request, fitted[1], "model")
    assert (r.key, r.output, r.prompt_tokens, r.completion_tokens, r.latency_s) == ("k-long", "", 0, 0, 0.0)
    assert r.original_prompt_tokens == len(render(LONG)) and r.truncated is False
    assert (r.truncation_policy, r.finish_reason, r.status) == (SKIP, "stop", "skipped")
    assert (r.prompt_ids_hash, r.bos_tokens, r.chat_template_source) == ("", None, "model")


class EchoGenerator:
    """A real, model-free generator: the output is the prompt's last word; it records every request it gets."""

    backend, model_id = "echo", "echo"

    def __init__(self, window_words: int) -> None:
        self.window_words, self.asked = window_words, []

    def sampling_params(self) -> dict:
        return {}

    def generate(self, requests, progress=None):
        out = []
        for r in requests:
            n = len(r.prompt.split())
            if r.truncation == SKIP and n > self.window_words:
                fitted = fit_prompt(r.prompt, self.window_words, render=str.split, encode=str.split,
                                    decode=" ".join, policy=SKIP)
                out.append(skipped_result(r, fitted, "none"))
                continue
            self.asked.append(r.key)
            out.append(GenerationResult(r.key, r.prompt.split()[-1], n, n, False, 1, "stop", 0.01, r.truncation))
        if progress is not None:
            progress(len(out))
        return out


def test_a_chain_whose_first_call_is_skipped_makes_no_second_call_and_its_row_says_skipped():
    followup = Followup(prompt="{prompt}\nReasoning: {reasoning}\nSo the answer is", max_new_tokens=4)
    short = Chain(GenerationRequest("short", "Is water wet", 8, SKIP), followup)
    long = Chain(GenerationRequest("long", "word " * 50 + "why", 8, SKIP), followup)
    saved: list[GenerationResult] = []
    inner = EchoGenerator(window_words=30)
    gen = FollowupGenerator(inner, {c.final.key: c for c in (short, long)}, {}, saved.extend)
    done: list[int] = []
    short_row, long_row = gen.generate([short.final, long.final], progress=done.append)
    assert inner.asked == ["short", short.final.key]  # the long chain's second call was never made
    assert long_row.key == long.final.key and long_row.status == "skipped" and long_row.output == ""
    assert long_row.original_prompt_tokens == 51 and long_row.prompt_tokens == 0
    assert short_row.status == "" and short_row.output == "is"
    assert sorted(r.key for r in saved) == ["long", "short"]  # both first calls stored, the skip too
    assert sum(done) == 2  # progress counts both rows once


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_openai_backend_makes_no_call_for_a_skipped_request(api):
    # Port 9 on 127.0.0.1 answers nothing: any call would fail after its retries; none is made.
    spec = dataclasses.replace(SERVED, api=api, tokenizer="tiktoken:cl100k_base", max_model_len=200, max_retries=0,
                               request_timeout_s=2.0, chat_template=api == "chat")
    gen = make_generator(spec)
    done: list[int] = []
    [r] = gen.generate([GenerationRequest("k", LONG, 16, SKIP)], progress=done.append)
    assert r.status == "skipped" and (r.output, r.prompt_tokens, r.completion_tokens) == ("", 0, 0)
    assert r.original_prompt_tokens == len(gen.render(LONG)) > 200
    assert r.chat_template_source == ("server" if api == "chat" else "none") and done == [1]


def test_lcp_add_model_registers_a_models_truncation_policy(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from lc_pipeline.cli import main
    from lc_pipeline.generate.registry import ModelRegistry

    (tmp_path / "dagster").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("LCP_MODELS", str(tmp_path / "models.yaml"))
    monkeypatch.setenv("LCP_LAKE", str(tmp_path / "lake"))
    result = CliRunner().invoke(main, ["models", "add", "smollm2-skip", "--truncation", "skip"])
    assert result.exit_code == 0, result.output
    assert ModelRegistry(tmp_path / "models.yaml").get("smollm2-skip").truncation == SKIP
    refused = CliRunner().invoke(main, ["models", "add", "smollm2-cut", "--truncation", "sometimes"])
    assert refused.exit_code != 0 and "sometimes" in refused.output
