"""Paths a record or a task file names are confined to their folder; credentials are not printed (issue 31;
probe 2026-11-27, D2, D3, D18).

* D2: a Loong paper item whose ``doc`` names ``../../…``, an absolute path, or a link in ``doc/paper/`` to a file
  outside: a rejected record naming the item, the field and the rule; the outside file's text is in no
  document, item or prompt.
* D3: a task file's ``prompt_file`` naming ``/proc/self/environ``, ``../outside/secret.txt``, ``/dev/zero``, a
  FIFO, a link out, a huge or a non-UTF-8 file: a TaskFileError naming the file, the task, the field and the
  rule, with no hang and no key printed; a file in the task file's folder or in ``$LCP_OFFICIAL`` is read.
* D18: ``lcp models`` (table and JSON) and a refused ``add-model`` show a ``base_url``'s credentials as ``***``.

Each test also checks that the files it started with are byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from lc_pipeline import schemas
from lc_pipeline.benchmarks.loong.sources import load_loong
from lc_pipeline.cli import main
from lc_pipeline.config import load_config
from lc_pipeline.construct.builders import LevelInputs, level_batches
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.loader import load_source
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks import catalog_for
from lc_pipeline.tasks.catalog import MAX_PROMPT_FILE_BYTES, TaskFileError, load_catalog

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DOCS = ROOT / "tests" / "fixtures" / "loong_docs"
CANARY = "TOPSECRET-outside-file-5d1c"
KEY = "sk-proj-PLANTED" + "Qw3r" * 10


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside every source and task folder, holding a canary file."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(CANARY + "\n")
    return folder


# ---------------------------------------------------------------------------------------------------- D2: Loong


def paper_item(item_id: str, docs: list[str]) -> dict:
    """A Loong paper item (our own wording), its documents named by ``docs``."""
    return {"id": item_id, "type": "paper", "level": 3, "set": 1, "length": 100, "language": "en",
            "question": "Which of these papers cite each other?", "instruction": "Read every paper, then answer.",
            "prompt_template": "Documents:\n{docs}\n\nTask: {instruction}\nQuestion: {question}",
            "doc": docs, "answer": "none", "shuffle_doc": False}


GOOD = ["2402.01739.md", "2401.02385.md"]


@pytest.fixture
def loong_release(tmp_path, outside) -> Path:
    """$LCP_DATA/loong as released (loong.jsonl and doc/), with the probe's items: one good, one reaching
    ``../../…`` out of doc/paper/, one naming an absolute path, one through a link in doc/paper/."""
    folder = tmp_path / "data" / "loong"
    folder.mkdir(parents=True)
    shutil.copytree(FIXTURE_DOCS, folder / "doc")
    (folder / "doc" / "paper" / "linked.md").symlink_to(outside / "secret.txt")
    items = [paper_item("good", GOOD),
             paper_item("dotdot", [*GOOD, "../../../../../../../../../.." + str(outside / "secret.txt")]),
             paper_item("absolute", [*GOOD, str(outside / "secret.txt")]),
             paper_item("link", [*GOOD, "linked.md"]),
             paper_item("parent", ["..", *GOOD])]
    (folder / "loong.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return folder


def test_d2_loong_doc_names_that_leave_doc_are_rejected_records_naming_the_rule(loong_release, outside):
    before, outside_before = digests(loong_release), digests(outside)
    documents, items, [report] = load_loong(loong_release, source="loong", on_error="reject")
    assert items["item_id"].to_list() == ["loong-good"]
    assert report.records == 5 and report.accepted == 1
    why = {r.record_id: (r.field, r.reason) for r in report.rejected}
    assert set(why) == {"dotdot", "absolute", "link", "parent"} and {f for f, _ in why.values()} == {"doc"}
    for item_id in ("dotdot", "absolute", "parent"):
        assert "is not a file name: a paper is named by its file in" in why[item_id][1]
        assert "(no '/', '\\', NUL, '.' or '..')" in why[item_id][1]
    assert "document 'linked.md' (paper)" in why["link"][1]
    assert f"leads to {outside / 'secret.txt'}, outside documents_dir" in why["link"][1]
    assert CANARY not in repr(documents.rows()) + repr(items.rows())
    assert sorted(documents["title"].to_list()) == sorted(
        (FIXTURE_DOCS / "paper" / n).read_text().splitlines()[0].lstrip("# ").strip() for n in GOOD)
    assert digests(loong_release) == before and digests(outside) == outside_before


def test_d2_with_on_error_fail_the_first_escape_stops_the_load_naming_item_and_field(loong_release):
    with pytest.raises(RecordError) as err:
        load_loong(loong_release, source="loong", on_error="fail")
    assert err.value.record_id == "dotdot" and err.value.field == "doc"
    assert "loong.jsonl record 1 (id 'dotdot'): field 'doc': document '../" in str(err.value)


def test_d2_the_prompts_sent_to_a_model_never_hold_the_outside_file(loong_release, tmp_path, monkeypatch):
    """The probe's run: the released loong config with one open set, through the instances builder."""
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    config = {"name": "loong-small", "sources": [{"name": "loong", "kind": "loong", "path": "$LCP_DATA/loong",
                                                  "on_error": "reject"}],
              "released": {"benchmark": "loong", "builder": "loong.released", "level_by": "prompt_tokens",
                           "bounds": {"set1": [0, None]}},
              "lengths": ["set1"], "tokenizer": "cl100k_base"}
    (tmp_path / "loong-small.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(tmp_path / "loong-small.yaml")
    loaded = load_source(cfg.sources[0])
    e = schemas.empty
    inputs = LevelInputs(loaded.items, loaded.documents, e("passages"), e("hard_negatives"), e("confusing_facts"),
                         e("replacement_rules"), "set1", cfg, TokenCounter.load("cl100k_base"), catalog_for(cfg))
    rows = pl.concat(list(level_batches(inputs)))
    assert rows["record_id"].to_list() == ["good"]
    assert not any(CANARY in p for p in rows["prompt"].to_list() + rows["context"].to_list())
    assert sorted(r.record_id for report in loaded.reports for r in report.rejected) == [
        "absolute", "dotdot", "link", "parent"]


# ------------------------------------------------------------------------------------------- D3: prompt_file


def task_file(folder: Path, prompt_path: str, fmt: str = "text") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tasks.yaml"
    path.write_text("benchmark: helmet\ntasks:\n  - name: json_kv\n"
                    f"    prompt_file: {{path: {json.dumps(prompt_path)}, format: {fmt}}}\n")
    return path


def refused(path: Path, match: str) -> str:
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    text = str(err.value)
    assert text.startswith(f"{path}: task helmet/json_kv: field 'prompt_file': "), text
    assert match in text, text
    return text


@pytest.mark.parametrize("target", ["/proc/self/environ", "../outside/secret.txt", "/dev/zero", "{outside}"])
def test_d3_a_prompt_file_outside_the_task_files_folder_is_refused(tmp_path, outside, monkeypatch, target):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("LCP_OFFICIAL", raising=False)
    path = task_file(tmp_path / "cfg", target.format(outside=outside / "secret.txt"))
    text = refused(path, "is outside the task file's folder")
    assert "a prompt file is read only from inside the folder of the task file that names it, or from " \
           "$LCP_OFFICIAL" in text
    assert KEY not in text and CANARY not in text


def test_d3_links_fifos_huge_and_binary_files_in_the_folder_are_refused_without_hanging(tmp_path, outside):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "out.txt").symlink_to(outside / "secret.txt")
    (folder / "zero.txt").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.txt")  # a reader would block until a writer comes
    (folder / "huge.txt").write_bytes(b"{context}" * (MAX_PROMPT_FILE_BYTES // 9 + 1))
    (folder / "latin1.txt").write_bytes("Caf\xe9 {context}".encode("latin-1"))
    before = digests(outside)
    refused(task_file(folder, "out.txt"), "is outside the task file's folder")
    refused(task_file(folder, "zero.txt"), "is outside the task file's folder")
    refused(task_file(folder, "fifo.txt"), "is not a regular file (a FIFO, device or folder)")
    refused(task_file(folder, "huge.txt"), f"is larger than {MAX_PROMPT_FILE_BYTES:,} bytes")
    refused(task_file(folder, "latin1.txt"), "is not UTF-8 text (byte 3)")
    assert digests(outside) == before


def test_d3_a_prompt_file_in_the_folder_or_in_lcp_official_is_read(tmp_path, monkeypatch):
    folder = tmp_path / "cfg"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "kv.txt").write_text("Ours: {context}\n{question}")
    assert load_catalog([task_file(folder, "prompts/kv.txt")]).get("helmet/json_kv").prompt == \
        "Ours: {context}\n{question}"
    official = tmp_path / "official" / "someone+bench"
    official.mkdir(parents=True)
    (official / "kv.txt").write_text("Theirs: {context}\n{question}")
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "official"))
    spec = load_catalog([task_file(tmp_path / "cfg2", str(official / "kv.txt"))]).get("helmet/json_kv")
    assert spec.prompt == "Theirs: {context}\n{question}" and spec.prompt_source == str(official / "kv.txt")
    monkeypatch.delenv("LCP_OFFICIAL")
    refused(task_file(tmp_path / "cfg3", str(official / "kv.txt")), "is outside the task file's folder")


def test_d3_lcp_tasks_show_prints_no_environment(tmp_path, tiny_config_file, monkeypatch):
    """The probe's command: `lcp tasks show helmet/json_kv --config cfg.yaml` with a prompt_file of
    /proc/self/environ and a key in the environment, in a child process (its own /proc/self)."""
    folder = tmp_path / "cfg"
    task_file(folder, "/proc/self/environ")
    config = yaml.safe_load(tiny_config_file.read_text())
    (folder / "cfg.yaml").write_text(yaml.safe_dump({**config, "task_files": [str(folder / "tasks.yaml")]}))
    before = digests(folder)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "LCP_PROJECT_DIR": str(tmp_path), "HOME": str(tmp_path)}
    env.pop("LCP_OFFICIAL", None)
    for args in (["tasks", "show", "helmet/json_kv"], ["tasks", "list", "--format", "json"]):
        done = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", *args, "--config", str(folder / "cfg.yaml")],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert "field 'prompt_file': /proc/self/environ is outside the task file's folder" in out
        assert KEY not in out and "Traceback" not in out
    assert digests(folder) == before


# ---------------------------------------------------------------------------------------------- D18: base_url


def test_d18_lcp_models_shows_no_credentials_in_base_url(tmp_path):
    env = {"LCP_MODELS": str(tmp_path / "models.yaml"), "DAGSTER_HOME": str(tmp_path / ".dagster"),
           "LCP_PROJECT_DIR": str(tmp_path)}
    (tmp_path / ".dagster").mkdir()
    secret_url = "http://user:SECRETKEY@127.0.0.1:18777/v1?api_key=QUERYKEY&v=1"
    runner = CliRunner()
    added = runner.invoke(main, ["models", "add", "api1", "--backend", "openai", "--model-id", "gpt2", "--base-url",
                                 secret_url, "--tokenizer", "tiktoken:cl100k_base", "--max-model-len", "4096"],
                          env=env)
    assert added.exit_code == 0, added.output
    registry = (tmp_path / "models.yaml").read_bytes()
    assert b"SECRETKEY" in registry  # the user's file keeps what the user wrote (the server needs it)

    table = runner.invoke(main, ["models", "list"], env=env)
    as_json = runner.invoke(main, ["models", "list", "--format", "json"], env=env)
    again = runner.invoke(main, ["models", "add", "api1", "--backend", "openai", "--model-id", "gpt2", "--base-url",
                                 secret_url.replace("18777", "18778"), "--tokenizer", "tiktoken:cl100k_base",
                                 "--max-model-len", "4096"], env=env)
    assert table.exit_code == 0 and as_json.exit_code == 0 and again.exit_code == 1
    assert "http://***@127.0.0.1:18777/v1?api_key=***&v=***" in table.output
    [entry] = [m for m in json.loads(as_json.output) if m["slug"] == "api1"]
    assert entry["base_url"] == "http://***@127.0.0.1:18777/v1?api_key=***&v=***"
    assert "already defined with different settings" in again.output and "127.0.0.1:18778" in again.output
    for out in (table.output, as_json.output, again.output):
        assert "SECRETKEY" not in out and "QUERYKEY" not in out and "user:" not in out
    assert (tmp_path / "models.yaml").read_bytes() == registry
