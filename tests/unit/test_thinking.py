"""A reasoning model's reply split into thoughts and answer (generate/thinking.py): blocks, a block the chat
template opened, several blocks, an answer cut after its thoughts closed, thinking that ran out (invalid), the
server's separate reasoning field; the partition plan asks for the answer tokens plus the thinking budget, and the
rows keep the thoughts apart from the output the metrics score."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest
import yaml

from lc_pipeline.generate.base import GenerationRequest, GenerationResult
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelSpecError
from lc_pipeline.generate.thinking import (
    ThinkingGenerator,
    split_field,
    split_reply,
    split_result,
    with_budget,
)
from lc_pipeline.tasks.catalog import load_catalog

TEXT = {"budget_tokens": 64, "location": "text", "open": "<think>", "close": "</think>"}
FIELD = {**TEXT, "location": "field"}


def result(output: str, finish: str = "stop", **changes) -> GenerationResult:
    return GenerationResult(key="k", output=output, prompt_tokens=10, original_prompt_tokens=10, truncated=False,
                            completion_tokens=5, finish_reason=finish, latency_s=0.1, **changes)


def test_the_thoughts_between_the_tags_are_not_the_answer_and_whitespace_after_the_close_tag_goes():
    reply = split_reply("<think>Paris is the capital.\n</think>\n\n  Paris", "stop")
    assert (reply.thoughts, reply.answer, reply.invalid) == ("Paris is the capital.", "Paris", False)


def test_a_reply_that_starts_inside_the_thoughts_opened_by_the_template_has_them_before_the_close_tag():
    reply = split_reply("France's capital... Paris.</think>Paris", "stop")
    assert (reply.thoughts, reply.answer, reply.invalid) == ("France's capital... Paris.", "Paris", False)


def test_several_blocks_are_all_thoughts_and_the_text_between_them_is_answer():
    reply = split_reply("<think>one</think>A first part <think>two</think> and the rest", "stop")
    assert reply.thoughts == "one\n\ntwo"
    assert reply.answer == "A first part\nand the rest"


def test_custom_tags_are_honoured():
    reply = split_reply("[[reason]]hmm[[/reason]] B", "stop", "[[reason]]", "[[/reason]]")
    assert (reply.thoughts, reply.answer) == ("hmm", "B")


def test_thinking_that_ran_out_at_max_new_tokens_is_invalid_and_keeps_its_thoughts():
    reply = split_reply("<think>Let me consider every option in turn, first", "length")
    assert reply.invalid and reply.answer == ""
    assert reply.thoughts == "Let me consider every option in turn, first"


def test_thoughts_that_closed_with_the_last_token_left_no_answer_and_are_invalid():
    assert split_reply("<think>long thoughts</think>", "length").invalid


def test_a_model_that_stopped_inside_its_thoughts_gave_no_answer_and_is_invalid():
    assert split_reply("<think>I am not sure, maybe B", "stop").invalid
    # The template opened the block and the model never closed it: all of it is thought, none of it scored.
    reply = split_reply("Maybe B. Or C.", "stop")
    assert (reply.thoughts, reply.answer, reply.invalid) == ("Maybe B. Or C.", "", True)


def test_an_answer_cut_after_the_thoughts_closed_is_an_answer_not_invalid():
    row = split_result(result("<think>easy</think> The answer is a long", "length"), TEXT)
    assert (row.output, row.thinking, row.status) == ("The answer is a long", "easy", "")  # row_status: cut


def test_closed_thoughts_followed_by_nothing_when_the_model_stopped_is_an_empty_answer():
    reply = split_reply("<think>nothing to say</think>  ", "stop")
    assert (reply.answer, reply.invalid) == ("", False)  # row_status: empty (scored as the model's answer)


def test_an_empty_reply_without_thoughts_is_empty_not_invalid():
    assert not split_reply("", "stop").invalid
    assert not split_reply("", "length").invalid


def test_the_server_s_reasoning_field_holds_the_thoughts_and_an_empty_answer_at_length_is_invalid():
    assert split_field("Paris", "the capital of France", "stop") == split_reply(
        "<think>the capital of France</think>Paris", "stop")
    assert split_field("", "still thinking", "length").invalid
    assert not split_field("", "", "length").invalid  # no thoughts: an empty cut reply, as for any model
    assert not split_field("", "done thinking", "stop").invalid  # the server closed them: an empty answer


def test_a_split_result_moves_the_thoughts_out_of_the_output_and_marks_exhausted_thinking_invalid():
    answered = split_result(result("<think>B fits</think>B"), TEXT)
    assert (answered.output, answered.thinking, answered.status) == ("B", "B fits", "")
    exhausted = split_result(result("<think>B or C, let me", "length"), TEXT)
    assert (exhausted.output, exhausted.thinking, exhausted.status) == ("", "B or C, let me", "invalid")
    field = split_result(result("", "length", thinking="B or C, let me"), FIELD)
    assert (field.output, field.thinking, field.status) == ("", "B or C, let me", "invalid")


def test_a_result_the_backend_already_gave_a_status_is_left_as_it_is():
    skipped = result("", "stop", status="skipped")
    assert split_result(skipped, TEXT) is skipped


def test_the_budget_is_added_to_the_task_s_answer_tokens():
    assert with_budget(32, TEXT) == 96
    assert with_budget(32, None) == 32


def test_a_thinking_setting_without_a_budget_names_the_model_and_the_field():
    with pytest.raises(ModelSpecError, match=r"model 'r1', field 'thinking': budget_tokens"):
        dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug="r1", thinking={"location": "text"})


def test_thoughts_in_a_server_field_need_a_chat_server_and_the_error_names_model_and_field():
    # Refused when the model is registered (ModelSpec), so `lcp add-model` says it, not the first run.
    with pytest.raises(ValueError, match=r"model 'reasoner', field 'thinking': location 'field'.*backend 'openai'"):
        dataclasses.replace(REASONER, thinking={"budget_tokens": 8, "location": "field"})


class Scripted:
    """A generator that replies from a script (what a reasoning model said): the partition code runs for real."""

    backend, model_id = "scripted", "scripted-reasoner"

    def __init__(self, replies: dict[str, tuple[str, str]]) -> None:
        self.replies, self.seen = replies, []

    def sampling_params(self) -> dict:
        return {"decoding": "greedy"}

    def generate(self, requests, progress=None):
        self.seen.extend(requests)
        # A followup's answer call (its prompt is not in the script) answers the letter it was given.
        return [dataclasses.replace(result(*self.replies.get(r.prompt, ("<think>so</think>The answer is (B)", "stop"))),
                                    key=r.key) for r in requests]


def instances(prompts: list[str], task: str = "longbench_v2") -> pl.DataFrame:
    n = len(prompts)
    return pl.DataFrame({"instance_id": [f"i{k}" for k in range(n)], "benchmark": ["longbench_v2"] * n,
                         "task": [task] * n, "prompt": prompts, "context": prompts,
                         "max_new_tokens": [32] * n})


def stopping_at_newline(tmp_path):
    """LongBench v2's task as a user's task file overrides it: its answer ends at the first newline."""
    path = tmp_path / "stop.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "longbench_v2", "tasks": [{"name": "longbench_v2", "stop": ["\n"]}]}))
    return load_catalog([path])


REASONER = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], slug="reasoner", thinking={"budget_tokens": 64})


def test_a_reasoning_model_asks_for_the_answer_tokens_plus_its_budget_under_a_key_of_its_own():
    gen = Scripted({})
    plain = plan_partition(instances(["Q?"]), BUILTIN_MODELS["smollm2-135m"], gen)
    thinking = plan_partition(instances(["Q?"]), REASONER, gen)
    assert plain.items[0].request.max_new_tokens == 32
    assert thinking.items[0].request.max_new_tokens == 32 + 64
    assert thinking.items[0].request.key != plain.items[0].request.key
    assert thinking.thinking == REASONER.thinking_settings and plain.thinking is None


def test_a_partition_of_a_reasoning_model_stores_thoughts_apart_and_cuts_at_stop_only_the_answer(tmp_path):
    # The task's stop sequence (a newline) appears inside the thoughts: it must not end the reply there.
    gen = Scripted({"A?": ("<think>first\nsecond</think>Paris\nextra", "stop"),
                    "B?": ("<think>still going\nand going", "length"),
                    "C?": ("<think>ok</think>Rome is the answer and", "length")})
    plan = plan_partition(instances(["A?", "B?", "C?"]), REASONER, gen, catalog=stopping_at_newline(tmp_path))
    rows = generate_partition(plan, gen, GenerationCheckpoint(tmp_path / "store"), chunk=0).rows
    got = rows.select("instance_id", "output", "thinking", "status").rows()
    assert got[0][1:] == ("Paris", "first\nsecond", "answered")
    assert got[1][1:] == ("", "still going\nand going", "invalid")
    assert got[2][1:] == ("Rome is the answer and", "ok", "cut")


def test_a_chain_of_thought_answer_call_is_given_the_first_call_s_answer_not_its_thoughts(tmp_path):
    gen = Scripted({"Q1?": ("<think>private musing</think>Step 1: B fits.", "stop"),
                    "Q2?": ("<think>musing that never ends", "length")})
    plan = plan_partition(instances(["Q1?", "Q2?"], task="cot"), REASONER, gen)
    chain = next(iter(plan.chains.values()))
    assert chain.followup.max_new_tokens == load_catalog().get("longbench_v2/cot").followup.max_new_tokens + 64
    rows = generate_partition(plan, gen, GenerationCheckpoint(tmp_path / "store"), chunk=0).rows
    second_calls = [r.prompt for r in gen.seen if r.prompt not in ("Q1?", "Q2?")]
    assert len(second_calls) == 1 and "Step 1: B fits." in second_calls[0]
    assert "private musing" not in second_calls[0]
    assert rows.select("output", "thinking", "status").rows() == [
        ("The answer is (B)", "so", "answered"),
        ("", "musing that never ends", "invalid"),  # no answer call after thinking that ran out
    ]


def test_the_wrapper_splits_every_result_and_passes_on_what_the_partition_asks_of_a_generator():
    gen = ThinkingGenerator(Scripted({"Q?": ("<think>t</think>a", "stop")}), TEXT)
    assert (gen.backend, gen.model_id, gen.sampling_params()) == ("scripted", "scripted-reasoner", {"decoding": "greedy"})
    [res] = gen.generate([GenerationRequest("k1", "Q?", 8)])
    assert (res.key, res.output, res.thinking) == ("k1", "a", "t")
