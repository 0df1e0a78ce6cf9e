"""The one INSTANCES row constructor (construct/rows.py): every column by name, defaults filled, nothing else."""

from __future__ import annotations

import pytest

from lc_pipeline.construct.rows import instance_row, instances_frame
from lc_pipeline.schemas import INSTANCES


def measured(**overrides) -> dict:
    """The columns a token-level builder measures and names itself."""
    columns = dict(
        instance_id="i-1", item_id="item-1", source="demo", suite="qa", task="single_hop_qa", category="single-doc QA",
        language="en", depth=0.5, evidence_depths=[0.48], question="Where?", answers=["Here"], answer_keywords=["Here"],
        evidence_doc_ids=["d1"], context_doc_ids=["d0", "d1"], n_hard_negatives=0, n_filler_documents=1,
        context="Document [1] ...", prompt="Read ... Answer:", tokenizer="cl100k_base", target_tokens=1024,
        input_tokens=1020, context_tokens=990, max_new_tokens=32,
    )
    columns.update(overrides)
    return columns


def test_a_token_row_gets_the_plain_defaults_and_its_units_from_the_token_columns():
    row = instance_row(**measured())
    assert list(row) == INSTANCES.names()
    assert (row["variant"], row["insertions"], row["replacement_rule_ids"]) == ("plain", [], [])
    assert (row["length_unit"], row["target_units"], row["context_units"]) == ("tokens", 1024, 990)


def test_defaults_are_not_shared_between_rows():
    a, b = instance_row(**measured()), instance_row(**measured())
    a["insertions"].append("x")
    assert b["insertions"] == []


def test_a_word_row_names_its_units_and_may_leave_target_tokens_null():
    row = instance_row(**measured(target_tokens=None), length_unit="words", target_units=1000, context_units=1012)
    assert (row["target_tokens"], row["target_units"], row["context_units"]) == (None, 1000, 1012)
    with pytest.raises(ValueError, match=r"item 'item-1': missing columns 'target_units', 'context_units'"):
        instance_row(**measured(), length_unit="words")


def test_an_unknown_column_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"'input_token' is not an INSTANCES column"):
        instance_row(**measured(), input_token=3)


def test_a_missing_column_is_an_error_naming_it():
    columns = measured()
    del columns["prompt"]
    with pytest.raises(ValueError, match=r"missing column 'prompt'"):
        instance_row(**columns)


def test_rows_make_a_frame_of_the_instances_schema():
    frame = instances_frame([instance_row(**measured()), instance_row(**measured(instance_id="i-2", depth=1.0))])
    assert frame.schema == INSTANCES and frame.height == 2
    assert frame["insertions"].to_list() == [[], []] and frame["length_unit"].to_list() == ["tokens"] * 2
    assert instances_frame([]).schema == INSTANCES
