"""A followup filled as an authors' harness fills its template (tasks/spec.py ``Followup.fill``, generate/followup.py):
placeholders replaced in the declared order with the first call's reply and the released record's fields (each
stripped when ``strip``), the document left out when the template omits it; declarations that cannot work are
refused when the task file loads, and a record lacking a named field is an error naming the instance. LongBench
v2's merged question gives back the released question and choices (benchmarks/longbench_v2/sources.py)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from pydantic import ValidationError

from lc_pipeline.benchmarks.longbench_v2.sources import question_with_choices, released_question, split_question
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.followup import Chain, fill_in_order, followup_key, record_values
from lc_pipeline.generate.partition import plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.tasks.catalog import load_catalog
from lc_pipeline.tasks.spec import Followup

TEMPLATE = "Q: #Q#\nA) #A#\nB) #B#\nThinking: #R#\nSo?"
FILL = (("#DOC#", "record.context"), ("#Q#", "record.question"), ("#A#", "record.choice_A"),
        ("#B#", "record.choice_B"), ("#R#", "reasoning"))


def test_the_placeholders_are_filled_in_order_stripped_and_the_document_left_out():
    followup = Followup(prompt=TEMPLATE, max_new_tokens=8, fill=FILL, strip=True)
    record = {"context": "A long text about lamps.", "question": " Which lamp? ", "choice_A": "red\n", "choice_B": "#R#"}
    chain = Chain(GenerationRequest("k", "first prompt", 16), followup, record_values(followup, record, "i1"))
    second = chain.second("  Red, says line 3. \n")
    # in order, as str.replace chains do: choice B's "#R#" is replaced by the reasoning when #R# comes
    assert second.prompt == "Q: Which lamp?\nA) red\nB) Red, says line 3.\nThinking: Red, says line 3.\nSo?"
    assert "lamps" not in second.prompt and second.max_new_tokens == 8 and second.key == chain.final.key
    assert fill_in_order("$X$ $Y$", [("$X$", " a "), ("$Y$", "b")]) == " a  b"


def test_fill_and_strip_enter_the_key_and_a_plain_followup_keeps_its_old_dump():
    plain = Followup(prompt="{prompt} {reasoning}", max_new_tokens=8)
    assert plain.model_dump() == {"prompt": "{prompt} {reasoning}", "max_new_tokens": 8}
    filled = Followup(prompt="{prompt} {reasoning}", max_new_tokens=8, fill=(("{reasoning}", "reasoning"),))
    assert followup_key("k", plain) != followup_key("k", filled)


@pytest.mark.parametrize(("fill", "message"), [
    ((("#Q#", "record.question"),), "must give the reasoning"),
    ((("#R#", "reasoning"), ("#Q#", "question")), "is not reasoning, prompt or record"),
    ((("", "reasoning"),), "must not be empty"),
])
def test_a_fill_that_cannot_work_is_refused(fill, message):
    with pytest.raises(ValidationError, match=message):
        Followup(prompt=TEMPLATE, max_new_tokens=8, fill=fill)


def test_a_record_without_a_named_field_is_an_error_naming_the_instance(tmp_path):
    path = tmp_path / "tasks.yaml"
    path.write_text(json.dumps({"benchmark": "longbench_v2", "tasks": [{"name": "cot", "followup": {
        "prompt": "#Q# #Z# #R#", "max_new_tokens": 4,
        "fill": [["#Q#", "record.question"], ["#Z#", "record.nosuchfield"], ["#R#", "reasoning"]]}}]}))
    question = question_with_choices("Why?", ["a", "b", "c", "d"])
    rows = pl.DataFrame({"instance_id": ["i1"], "benchmark": ["longbench_v2"], "task": ["cot"], "prompt": ["P"],
                         "context": ["C"], "max_new_tokens": [4], "question": [question], "record_fields": ["{}"]})
    spec = BUILTIN_MODELS["smollm2-135m"]
    with pytest.raises(ValueError, match=r"instance 'i1'.*'nosuchfield'"):
        plan_partition(rows, spec, make_generator(spec), catalog=load_catalog([path]))


def test_the_merged_question_gives_the_released_parts_back_or_record_fields_keeps_them():
    merged = question_with_choices("  Why?\n", [" a", "b ", "c", "d"])
    assert split_question(merged) == {"question": "Why?", "choice_A": "a", "choice_B": "b", "choice_C": "c",
                                      "choice_D": "d"}
    nested = question_with_choices("Pick:\n\n(A) x", ["y", "z", "w", "v"])
    assert split_question(nested) != {"question": "Pick:\n\n(A) x", "choice_A": "y", "choice_B": "z",
                                      "choice_C": "w", "choice_D": "v"}
    kept = {"question": "Pick:\n\n(A) x", "choice_A": "y", "choice_B": "z", "choice_C": "w", "choice_D": "v"}
    assert released_question(nested, json.dumps({"difficulty": "easy", **kept})) == kept
    with pytest.raises(ValueError, match="field 'question'"):
        released_question("no choices here", "{}")
