"""Issue 31 (probe 2026-11-27) D13, D17, D27: what used to fail only halfway through a build or after generation, or was
silently ignored, is refused when the task files, the config or the source records are read, naming the file, the
task or record and the field.

* D13: a prompt template's fields are plain names. Attribute access, indexing, a positional field, a conversion or a
  format spec is refused when the catalog loads (task file, task, field ``prompt``), and templates are filled
  literally (text.fill_template), so an unchecked template reaches nothing but the values given; for plain fields
  the text is ``str.format``'s (every packaged prompt checked).
* D17: unknown metric, builder and rubric names are refused when the catalog loads; LongBench's classification
  tasks (trec, lsht) need their label set (``all_classes``) when the records are read.
* D27: a task file that changes the builder of a task its config runs as released (where ``released.builder``
  builds every task) is refused, not ignored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lc_pipeline.benchmarks.longbench.sources import load_longbench
from lc_pipeline.config import ConfigError, format_prompt, load_config
from lc_pipeline.construct.spec_checks import check_prompt
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks.catalog import TaskFileError, load_catalog
from lc_pipeline.tasks.registry import NAMED_FIELD_BUILDERS
from lc_pipeline.text import TemplateError, fill_template, template_parts

# The probe's templates (D13), each with what the message says of it.
PROBE_TEMPLATES = [
    ("{context.__class__.__mro__}{question.__class__.__init__.__doc__}",
     "field {context.__class__.__mro__} reaches into its value (attribute access or indexing)"),
    ("{context[0]}{question}", "field {context[0]} reaches into its value (attribute access or indexing)"),
    ("{context}{question.__class__.__init__.__globals__}",
     "field {question.__class__.__init__.__globals__} reaches into its value (attribute access or indexing)"),
    ("{context!x}{question}", "field {context!x} has a conversion (!x)"),
    ("{context!r}{question}", "field {context!r} has a conversion (!r)"),
    ("{context:d}{question}", "field {context:d} has a format spec (:d)"),
    ("{context}{question:>1500000000}", "field {question:>1500000000} has a format spec (:>1500000000)"),
    ("{context}{}", "field {} is positional (a field is named)"),
]
RULE = ": a field is a plain name such as {context}, filled with its text as it is; write literal braces as {{ and }}"


def task_file(path: Path, benchmark: str, task: dict) -> Path:
    path.write_text(yaml.safe_dump({"benchmark": benchmark, "tasks": [task]}, allow_unicode=True))
    return path


def digest(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------------------- D13


@pytest.mark.parametrize(("template", "says"), PROBE_TEMPLATES)
@pytest.mark.parametrize("task", ["helmet/json_kv", "longbench100/kv_retrieval"])
def test_d13_a_field_that_is_not_a_plain_name_is_refused_when_the_task_file_loads(tmp_path, task, template, says):
    benchmark, name = task.split("/")
    path = task_file(tmp_path / "mine.yaml", benchmark, {"name": name, "prompt": template})
    before = digest(tmp_path)
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    assert str(err.value) == f"{path}: task {task}: field 'prompt': {says}{RULE}"
    assert digest(tmp_path) == before


def test_d13_the_config_that_names_such_a_task_file_fails_to_load(tmp_path):
    task_file(tmp_path / "mine.yaml", "helmet", {"name": "json_kv", "prompt": "{context[0]}{question}"})
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump({"name": "cfg", "sources": [{"name": "demo"}], "lengths": ["1k", "2k"],
                                      "base_lengths": ["1k"], "long_lengths": ["2k"], "task_files": ["mine.yaml"],
                                      "helmet": {"tasks": ["json_kv"]}}))
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == (f"{config}: config 'cfg': task_files: {tmp_path / 'mine.yaml'}: task helmet/json_kv: "
                              f"field 'prompt': field {{context[0]}} reaches into its value (attribute access or "
                              f"indexing){RULE}")


def test_d13_a_prompt_read_from_a_prompt_file_is_named_with_that_file(tmp_path):
    (tmp_path / "prompt.txt").write_text("Data: {context}\nQ: {question:>9}")
    path = task_file(tmp_path / "mine.yaml", "helmet", {"name": "json_kv", "prompt_file": {"path": "prompt.txt"}})
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    assert str(err.value) == (f"{path}: task helmet/json_kv: field 'prompt' (read from {tmp_path / 'prompt.txt'}): "
                              f"field {{question:>9}} has a format spec (:>9){RULE}")


def test_d13_the_qa_suites_literal_templates_keep_their_other_braces(tmp_path):
    # QAPrompt puts {context} and {question} in literally and leaves every other brace as written: not refused.
    template = 'Reply as {"answer": ...}.\n\n{context}\n\nQuestion: {question}'
    path = task_file(tmp_path / "mine.yaml", "longbench", {"name": "hotpotqa", "prompt": template})
    spec = load_catalog([path]).get("longbench/hotpotqa")
    assert spec.builder.name not in NAMED_FIELD_BUILDERS and spec.prompt == template


@pytest.mark.parametrize(("template", "says"), PROBE_TEMPLATES)
def test_d13_an_unchecked_template_is_never_filled_past_its_plain_fields(template, says):
    # A spec that skipped the catalog (model_copy) still reaches no attribute: fill_template refuses the field.
    spec = load_catalog().get("helmet/json_kv")
    unchecked = spec.model_copy(update={"prompt": template})
    with pytest.raises(TemplateError) as err:
        fill_template(unchecked.prompt, {"context": "ctx", "question": "q", "demos": ""})
    assert str(err.value) == f"{says}{RULE}"
    with pytest.raises(ValueError) as err:  # the builders' own check (helmet suite, longbench100) says the same
        check_prompt(unchecked, {"context", "question", "demos"})
    assert str(err.value) == f"task 'helmet/json_kv' (declared in {spec.declared_in}): field 'prompt': {says}{RULE}"


def test_d13_filling_is_str_format_for_every_packaged_prompt():
    values = {"context": "C {x} {{y}} \u2028 文", "question": "Q}{", "demos": "D", "options": "O", "instruction": "I",
              "kind": "K", "answer": "A"}
    checked = 0
    for spec in load_catalog():
        if spec.prompt is None:
            continue
        fields = {name for _, name in template_parts(spec.prompt) if name is not None}
        given = {k: values.get(k, f"<{k}>") for k in fields}
        assert fill_template(spec.prompt, given) == spec.prompt.format(**given), spec.qualified_name
        checked += 1
    assert checked > 40
    # Values that are not strings get str.format's text; {{ and }} are single braces; a missing field a KeyError.
    assert fill_template("{{{n}}}: {x} {y}", {"n": 3, "x": 0.5, "y": None}) == "{3}: 0.5 None"
    with pytest.raises(KeyError):
        fill_template("{context} {question}", {"context": "c"})


def test_d13_an_authors_template_is_filled_as_str_format_and_refused_past_plain_fields():
    record = {"context": "The {brace} text.", "input": "Why?", "_id": 7, "answers": ["x"]}
    templates = {"qa": "Read: {context}\n\nAnswer: {input}", "bad": "{context.__class__}"}
    assert format_prompt(templates, "qa", record, "pred.py") == templates["qa"].format(**record)
    with pytest.raises(ValueError) as err:
        format_prompt(templates, "bad", record, "pred.py")
    assert str(err.value) == ("pred.py: the bad prompt: field {context.__class__} reaches into its value (attribute "
                              f"access or indexing){RULE}")


# ---------------------------------------------------------------------------------------------------------- D17


def test_d17_an_unknown_metric_is_refused_when_the_task_file_loads(tmp_path):
    path = task_file(tmp_path / "mine.yaml", "helmet", {"name": "json_kv", "metrics": ["helmet.nosuch"]})
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    message = str(err.value)
    assert message.startswith(f"{path}: task helmet/json_kv: field 'metrics': unknown metric 'helmet.nosuch'; known: ")
    assert "helmet.subem" in message and "longbench.classification" in message


@pytest.mark.parametrize(("field", "value", "says"), [
    ("builder", {"name": "nosuch", "options": {}}, "field 'builder.name': unknown builder 'nosuch'; known: "),
    ("rubric", "nosuch", "field 'rubric': unknown rubric 'nosuch'; known: "),
])
def test_d17_unknown_builder_and_rubric_names_are_refused_when_the_task_file_loads(tmp_path, field, value, says):
    path = task_file(tmp_path / "mine.yaml", "helmet", {"name": "json_kv", field: value})
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    assert str(err.value).startswith(f"{path}: task helmet/json_kv: {says}")


def longbench_record(dataset: str, _id: str, **fields) -> dict:
    return {"dataset": dataset, "_id": _id, "language": "en", "context": "Question: Who?\nType: Individual",
            "input": "Question: Where?\nType:", "answers": ["Location"], **fields}


@pytest.mark.parametrize(("classes", "reason"), [
    ("missing", "missing"),
    (None, "expected a list of strings, got null"),
    ([], "expected at least one non-blank string, got an empty list"),
])
@pytest.mark.parametrize("dataset", ["trec", "lsht", "trec_e"])
def test_d17_a_classification_record_without_its_label_set_is_rejected_when_read(tmp_path, dataset, classes, reason):
    fields = {} if classes == "missing" else {"all_classes": classes}
    good = longbench_record(dataset, "ok", all_classes=["Location", "Individual"])
    path = tmp_path / f"{dataset}.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(longbench_record(dataset, "bad", **fields)) + "\n")
    before = digest(tmp_path)
    task = dataset.removesuffix("_e")
    why = (f"{reason}: {task} is a classification task, scored against its label set (a non-empty list of the class "
           "names)")
    with pytest.raises(RecordError) as err:
        load_longbench(path, source="lb")
    assert (err.value.index, err.value.record_id, err.value.field, err.value.reason) == (1, "bad", "all_classes", why)
    assert str(err.value).startswith(f"{path.parent.name}/{path.name} record 1 (id 'bad'): field 'all_classes': ")
    _documents, items, [report] = load_longbench(path, source="lb", on_error="reject")  # counted, the rest kept
    assert (report.records, report.accepted, [r.field for r in report.rejected]) == (2, 1, ["all_classes"])
    assert items["all_classes"].to_list() == [["Location", "Individual"]]
    assert digest(tmp_path) == before


def test_d17_other_longbench_tasks_keep_an_optional_label_set(tmp_path):
    path = tmp_path / "triviaqa.jsonl"
    path.write_text(json.dumps(longbench_record("triviaqa", "t1", all_classes=None)) + "\n")
    assert load_longbench(path, source="lb")[1]["all_classes"].to_list() == [[]]


# ---------------------------------------------------------------------------------------------------------- D27


def released_config(tmp_path: Path, task: dict) -> Path:
    task_file(tmp_path / "mine.yaml", "longbench", task)
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump({"name": "lb-mine", "sources": [{"name": "longbench", "kind": "longbench",
                                                                      "paths": str(tmp_path / "data")}],
                                      "released": {"benchmark": "longbench"}, "lengths": ["all"], "protocol": "ours",
                                      "task_files": ["mine.yaml"]}))
    return config


def test_d27_changing_the_builder_of_a_task_run_as_released_is_refused(tmp_path):
    builder = {"name": "helmet", "options": {"kind": "json_kv"}}
    config = released_config(tmp_path, {"name": "hotpotqa", "builder": builder, "truncation": "end_of_context"})
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == (
        f"{config}: config 'lb-mine': task file {tmp_path / 'mine.yaml'}: task longbench/hotpotqa: field "
        "'builder.name': 'helmet' is not used here: this config runs longbench as released, and builds every task with "
        "released.builder ('released.records'); remove the builder from the task file (it declares 'qa.assemble'), or "
        "run the task in a config that constructs it")


def test_d27_the_other_fields_of_a_released_task_may_change(tmp_path):
    config = released_config(tmp_path, {"name": "hotpotqa", "truncation": "end_of_context", "max_new_tokens": 8})
    spec = load_catalog(load_config(config).task_files).get("longbench/hotpotqa")
    assert (spec.builder.name, spec.truncation, spec.max_new_tokens) == ("qa.assemble", "end_of_context", 8)
