"""`lcp` in groups (issue 32): `lcp models add|list|remove|import`, `lcp results query|report|compare`,
`lcp tools score|longscore|minilongbench`; each earlier spelling prints what the new one prints on stdout and one
note on stderr; `--lake` and `--config` are taken by every command that reads them, and really used.

Each earlier spelling runs in a project of its own, built like the new spelling's (paths shown as <project>)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.cli import LAZY_COMMANDS, OLD_SPELLINGS, main
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

TASKS = ("single_hop_qa", "multi_hop_qa")  # the demo config's qa benchmark


def write_lake(root: Path, models=("model-a", "model-b")) -> Path:
    """Instances of the demo's two qa tasks at 1k and each model's metric_scores on them (the columns the report
    and compare read)."""
    ids = [f"{t}-{k}" for t in TASKS for k in range(6)]
    write_parquet_atomic(pl.DataFrame({"instance_id": ids, "benchmark": "qa", "task": [i.rsplit("-", 1)[0] for i in ids],
                                       "variant": "plain", "record_fields": "{}", "input_tokens": 900,
                                       "target_tokens": 1024}),
                         partition_path(root, "instances", {"length": "1k"}))
    for right, model in enumerate(models, start=2):
        write_parquet_atomic(pl.DataFrame({"instance_id": ids, "metric": "subem", "depth": 0.5,
                                           "score": [float(int(i.rsplit("-", 1)[1]) < right) for i in ids]}),
                             partition_path(root, "metric_scores", {"length": "1k", "model": model}))
    return root


def write_project(root: Path) -> dict[str, str]:
    """A project folder with a lake, a predictions file, a scores CSV and a released config over its one record;
    the environment of an `lcp` run in it."""
    root.mkdir(parents=True)
    write_lake(root / "lake")
    (root / "preds.jsonl").write_text(json.dumps({"_id": "q-1", "prediction": "Paris", "answers": ["Paris"]}) + "\n")
    (root / "scores.csv").write_text("task,model,length,score\nqa,m1,2k,50\nqa,m1,8k,40\nqa,m2,2k,60\nqa,m2,8k,30\n")
    data = root / "data"
    data.mkdir()
    (data / "qasper.jsonl").write_text("".join(json.dumps(
        {"dataset": "qasper", "_id": f"q-{k}", "language": "en", "context": "The paper studies parsing.",
         "input": "What is studied?", "answers": ["parsing"], "all_classes": None}) + "\n" for k in (1,)))
    (root / "lb.yaml").write_text(json.dumps(
        {"name": "lb", "sources": [{"name": "longbench", "kind": "longbench", "paths": str(data)}],
         "released": {"benchmark": "longbench"}, "lengths": ["all"]}))
    return {"LCP_PROJECT_DIR": str(root), "LCP_LAKE": str(root / "lake"), "LCP_MODELS": str(root / "models.yaml"),
            "DAGSTER_HOME": str(root / ".dagster"), "LCP_CONFIG": "demo", "LCP_TASKS": None, "LCP_LIMIT": None}


def lcp(project: dict[str, str], *args: str, monkeypatch) -> click.testing.Result:
    """``lcp ARGS`` in the project (its folder the working directory; the environment restored afterwards)."""
    monkeypatch.chdir(project["LCP_PROJECT_DIR"])
    return CliRunner().invoke(main, list(args), env=project)


def shown(text: str, project: dict[str, str]) -> str:
    return text.replace(project["LCP_PROJECT_DIR"], "<project>")


def note(old: str, new: str) -> str:
    return f"note: 'lcp {old}' is now 'lcp {new}'; the old name goes in the next release.\n"


# (the earlier spelling, the new one, the arguments after both); each ends as it did before, in success or error
RENAMED = [
    (["query"], ["results", "query"], ["select model, count(*) n from metric_scores group by all order by all",
                                       "--format", "json"]),
    (["compare"], ["results", "compare"], ["model-a", "model-b", "--draws", "50", "--format", "json"]),
    (["report"], ["results", "report"], ["--out", "report.html"]),
    (["score"], ["tools", "score"], ["preds.jsonl", "--metric", "longbench:hotpotqa"]),
    (["longscore"], ["tools", "longscore"], ["--scores", "scores.csv", "--base-lengths", "2k", "--long-lengths", "8k",
                                             "--format", "json"]),
    (["minilongbench", "estimate"], ["tools", "minilongbench", "estimate"], ["--model-dir", "lake",
                                                                             "--scores", "scores.csv"]),
    (["models"], ["models", "list"], []),
    (["models"], ["models", "list"], ["--format", "json"]),
    (["add-model"], ["models", "add"], ["smol-2k", "--max-model-len", "2048", "--config", "demo"]),
    (["remove-model"], ["models", "remove"], ["smollm2-135m"]),
    (["import-predictions"], ["models", "import"], ["preds.jsonl", "--model", "elsewhere", "--config", "lb.yaml"]),
    (["demo"], ["run"], ["--config", "no-such-config"]),
]


@pytest.mark.parametrize("old, new, args", RENAMED, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_an_earlier_spelling_prints_the_same_and_one_note_on_stderr(old, new, args, tmp_path, monkeypatch):
    if old == ["remove-model"]:  # a model to remove: the packaged registry's, written to models.yaml first
        args = ["smol-2k"]
    now_project, then_project = write_project(tmp_path / "now"), write_project(tmp_path / "then")
    runs = []
    for project, words in ((now_project, new), (then_project, old)):
        if old == ["remove-model"]:
            assert lcp(project, "models", "add", "smol-2k", monkeypatch=monkeypatch).exit_code == 0
        runs.append(lcp(project, *words, *args, monkeypatch=monkeypatch))
    now, then = runs
    assert "Traceback" not in then.output and then.exit_code == now.exit_code, then.output
    assert shown(then.stdout, then_project) == shown(now.stdout, now_project)
    old_name = old[0]
    assert shown(then.stderr, then_project) == note(old_name, " ".join(new[:2] if old_name != "models" else new)) + \
        shown(now.stderr, now_project)
    if "json" in args and now.exit_code == 0:
        assert json.loads(then.stdout)  # JSON output still parses from stdout


def test_the_successful_renamed_commands_print_something(tmp_path, monkeypatch):
    """The comparison above is not between two empty outputs where the command succeeds."""
    project = write_project(tmp_path / "p")
    for _, new, args in RENAMED:
        if new in (["run"], ["tools", "minilongbench", "estimate"], ["models", "remove"]):
            continue
        result = lcp(project, *new, *args, monkeypatch=monkeypatch)
        assert result.exit_code == 0 and result.stdout.strip(), (new, result.output)


def test_help_lists_the_groups_and_not_the_earlier_names():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:")[1].split("Groups:")[0].split()
    groups = result.stdout.split("Groups:")[1].split("Environment variables")[0]
    assert {"run", "judge", "backfill", "plan", "ui"} <= set(commands)
    assert [line.split()[0] for line in groups.splitlines() if line.strip()] == ["models", "results", "sources",
                                                                                 "tasks", "tools"]
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].split("Environment variables")[0]
              .splitlines() if line.strip() and not line.endswith(":")}
    assert listed.isdisjoint(set(OLD_SPELLINGS)), listed & set(OLD_SPELLINGS)


def test_every_earlier_spelling_resolves_to_its_command_hidden():
    ctx = click.Context(main)
    for old, new in OLD_SPELLINGS.items():
        renamed = main.get_command(ctx, old)
        command = main
        for word in new.split():
            command = command.get_command(ctx, word)
        assert renamed.hidden and renamed.name == old and not command.hidden
        assert [p.opts for p in renamed.params] == [p.opts for p in command.params] and renamed.help == command.help


def leaves(group: click.Group, ctx: click.Context, path: str = ""):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from leaves(command, ctx, f"{path}{name} ")
        else:
            yield f"{path}{name}", command


READS = {  # what each command reads: --lake for the lake, --config for a config or the project's models.yaml
    "run": {"--lake", "--config"}, "judge": {"--lake", "--config"}, "backfill": {"--lake", "--config"},
    "plan": {"--lake", "--config"}, "ui": {"--lake", "--config"},
    "models add": {"--config"}, "models list": {"--config"}, "models remove": {"--config"},
    "models import": {"--lake", "--config"}, "tasks list": {"--config"}, "tasks show": {"--config"},
    "results query": {"--lake"}, "results report": {"--lake"}, "results compare": {"--lake", "--config"},
    "tools score": set(), "tools longscore": set(), "tools minilongbench fit": set(),
    "tools minilongbench estimate": set(), "sources validate": set(),
}


def test_every_command_takes_lake_and_config_where_it_reads_them():
    commands = dict(leaves(main, click.Context(main)))
    assert set(commands) == set(READS)
    for path, command in commands.items():
        taken = {opt for p in command.params for opt in p.opts} & {"--lake", "--config"}
        assert taken == READS[path], path
    # one declaration each (commands/options.py): the same help everywhere
    for option in ("--lake", "--config"):
        helps = {p.help for c in commands.values() for p in c.params if option in p.opts}
        assert len(helps) == 1, (option, helps)


def test_results_query_reads_the_lake_given_after_the_command(tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    other = tmp_path / "other"
    write_parquet_atomic(pl.DataFrame({"x": [1]}), partition_path(other, "only_here", {}))
    result = lcp(project, "results", "query", "--lake", str(other), "show tables", "--format", "json",
                 monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert [row["name"] for row in json.loads(result.stdout)] == ["only_here"]
    both = lcp(project, "--lake", str(other), "results", "query", "--lake", str(other) + "/", "show tables",
               monkeypatch=monkeypatch)
    assert both.exit_code == 0 and "only_here" in both.stdout  # the same folder twice is one lake


def test_two_different_lakes_on_one_command_line_are_a_usage_error(tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    result = lcp(project, "--lake", str(tmp_path / "a"), "results", "query", "--lake", str(tmp_path / "b"),
                 "select 1", monkeypatch=monkeypatch)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"--lake given twice with two lakes, '{tmp_path / 'a'}' and '{tmp_path / 'b'}'" in result.stderr


def test_results_report_and_compare_read_the_lake_given_after_the_command(tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    other = write_lake(tmp_path / "other", models=("model-c", "model-d"))
    write_parquet_atomic(pl.DataFrame({"x": [1]}), partition_path(other, "only_here", {}))
    report = lcp(project, "results", "report", "--lake", str(other), "--out", "r.html", monkeypatch=monkeypatch)
    assert report.exit_code == 0, report.output
    assert "<td class=text>only_here</td>" in (Path(project["LCP_PROJECT_DIR"]) / "r.html").read_text()
    compared = lcp(project, "results", "compare", "model-c", "model-d", "--lake", str(other), "--format", "json",
                   monkeypatch=monkeypatch)
    assert compared.exit_code == 0, compared.output
    assert {r["n_common"] for r in json.loads(compared.stdout)} == {12}
    assert lcp(project, "results", "compare", "model-c", "model-d", monkeypatch=monkeypatch).exit_code == 1  # not here


def test_models_import_stores_in_the_lake_and_reads_the_config_given(tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    other = tmp_path / "other"
    result = lcp(project, "models", "import", "preds.jsonl", "--model", "elsewhere", "--lake", str(other),
                 "--config", "lb.yaml", monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert f"stored in {other / 'imports' / 'elsewhere'}" in result.stdout and "config 'lb'" in result.stdout


@pytest.mark.parametrize("words", [["run"], ["judge"], ["backfill", "--model", "smollm2-135m"], ["plan"],
                                   ["results", "compare", "a", "b"], ["models", "import", "preds.jsonl", "--model", "x"],
                                   ["tasks", "list"], ["tasks", "show", "qasper"]],
                         ids=lambda words: " ".join(words[:2]))
def test_the_config_given_is_the_one_read(words, tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    result = lcp(project, *words, "--lake", str(tmp_path / "lake"), "--config", "no-such-config",
                 monkeypatch=monkeypatch) if "tasks" not in words else \
        lcp(project, *words, "--config", "no-such-config", monkeypatch=monkeypatch)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "config 'no-such-config' not found" in result.stderr


def test_models_add_names_its_config_in_the_next_step(tmp_path, monkeypatch):
    project = write_project(tmp_path / "p")
    result = lcp(project, "models", "add", "smol-2k", "--config", "lb.yaml", monkeypatch=monkeypatch)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("next: lcp backfill --model smol-2k --config lb.yaml")


def test_each_group_imports_its_commands_only_when_used():
    ctx = click.Context(main)
    for name in ("models", "results", "tools"):
        group = main.get_command(ctx, name)
        assert set(group.lazy_commands) <= set(group.list_commands(ctx))
        for sub in group.lazy_commands:
            assert group.get_command(ctx, sub).name == sub
    assert set(LAZY_COMMANDS) == {"tasks", "plan"}
