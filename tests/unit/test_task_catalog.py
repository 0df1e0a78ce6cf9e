"""The task catalog: packaged task files plus a user's, overrides, `base:`, prompts read from another
project's prompt file, and errors that name the file, the task and the field."""

from __future__ import annotations

import json

import pytest

from lc_pipeline.tasks import TaskFileError, load_catalog


def write(path, text: str):
    path.write_text(text)
    return path


def test_a_user_file_overrides_only_the_fields_it_gives_and_salts_only_what_changed(tmp_path):
    packaged = load_catalog().get("helmet/json_kv")
    catalog = load_catalog([write(tmp_path / "o.yaml", "benchmark: helmet\ntasks:\n  - {name: json_kv, "
                                                         "max_new_tokens: 64}\n  - {name: rag}\n")])
    changed, same = catalog.get("helmet/json_kv"), catalog.get("helmet/rag")
    assert changed.max_new_tokens == 64 and changed.prompt == packaged.prompt
    assert changed.metrics == packaged.metrics and changed.truncation == packaged.truncation
    assert changed.instance_salt == changed.content_hash() != packaged.content_hash()
    # Naming a task without changing it changes nothing (only where it was declared).
    assert same.instance_salt == "" and same.content_hash() == load_catalog().get("helmet/rag").content_hash()
    assert packaged.instance_salt == ""


def test_a_prompt_is_read_from_the_users_copy_of_longbenchs_prompt_file(tmp_path):
    table = {"narrativeqa": "Story:\n\n{context}\n\nQ: {input}\n\nA:", "qasper": "Paper: {context}\nQ: {input}"}
    write(tmp_path / "dataset2prompt.json", json.dumps(table))
    catalog = load_catalog([write(tmp_path / "lb.yaml", "benchmark: longbench\ntasks:\n  - name: narrativeqa\n"
                                  "    prompt_file: {path: dataset2prompt.json, format: longbench}\n")])
    spec = catalog.get("longbench/narrativeqa")
    assert spec.prompt == "Story:\n\n{context}\n\nQ: {question}\n\nA:"  # {input} is our {question}
    assert spec.prompt_source == f"{tmp_path / 'dataset2prompt.json'}#narrativeqa"
    assert spec.max_new_tokens == 128 and spec.instance_salt  # the rest as packaged; new ids


def test_base_starts_a_new_task_from_another(tmp_path):
    catalog = load_catalog([write(tmp_path / "m.yaml", "benchmark: mine\ntasks:\n"
                                  "  - {name: quick_summ, base: helmet/summ, max_new_tokens: 100}\n")])
    spec, summ = catalog.get("mine/quick_summ"), catalog.get("helmet/summ")
    assert (spec.benchmark, spec.max_new_tokens, spec.rubric, spec.answer_prefix) == ("mine", 100, "helmet_summ",
                                                                                       "Summary:")
    assert spec.prompt == summ.prompt and "helmet/summ" in catalog


@pytest.mark.parametrize(("text", "message"), [
    ("benchmark: mine\ntasks:\n  - {name: t, category: QA}\n", r"task mine/t: field 'builder'"),
    ("benchmark: mine\ntasks:\n  - {name: t, base: helmet/rag, truncation: cut_all}\n", r"task mine/t: field 'truncation'"),
    ("benchmark: mine\ntasks:\n  - {name: t, base: helmet/rag, max_new_tokens: 0}\n", r"field 'max_new_tokens'"),
    ("benchmark: mine\ntasks:\n  - {name: t, base: helmet/rag, colour: red}\n", r"field 'colour'"),
    ("benchmark: mine\ntasks:\n  - {name: t, base: helmet/nothing}\n", r"field 'base': no task 'helmet/nothing'"),
    ("benchmark: mine\ntask: []\n", r"unknown keys \['task'\]"),
    ("benchmark: mine\ntasks:\n  - name: t\n    base: helmet/rag\n    prompt_file: {path: absent.json, format: json}\n",
     r"field 'prompt_file': cannot read .*absent.json"),
])
def test_a_bad_task_file_names_the_file_the_task_and_the_field(tmp_path, text, message):
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(TaskFileError, match=message) as err:
        load_catalog([path])
    assert str(path) in str(err.value)


def test_resolve_falls_back_to_a_benchmarks_catch_all_only_where_it_declares_one():
    catalog = load_catalog()
    assert catalog.resolve("qa", "musique").name == "*"  # a multi-hop corpus's item: our QA task
    assert catalog.resolve("longbench", "hotpotqa").name == "hotpotqa"
    with pytest.raises(ValueError, match="task 'hotpot' of benchmark 'longbench' is not declared"):
        catalog.resolve("longbench", "hotpot")


def test_an_edited_task_file_is_read_again(tmp_path):
    path = write(tmp_path / "m.yaml", "benchmark: mine\ntasks:\n  - {name: t, base: helmet/rag, max_new_tokens: 5}\n")
    assert load_catalog([path]).get("mine/t").max_new_tokens == 5
    write(path, "benchmark: mine\ntasks:\n  - {name: t, base: helmet/rag, max_new_tokens: 6}\n")
    assert load_catalog([path]).get("mine/t").max_new_tokens == 6
