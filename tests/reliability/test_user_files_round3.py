"""User files, round three (issue 31: D10, D11, D12, D20, D25, D26, D32 of ../shared/reviews/2026-11-27-probe.md).

The probe's inputs rebuilt against the one JSON reading path (lc_pipeline/json_files.py) that
`lcp import-predictions`, the source readers and Loong's documents use: lines split on ``\\n`` only,
nesting bounded before parsing, keys given twice and lone surrogates refused per line / record naming
the field, a regular file read once and bounded, strict UTF-8 named by byte offset, bounded rejections and
re-imports that replace the model's earlier copy. Each failed import leaves the lake and the registry
byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import released_longbench_project

from lc_pipeline.benchmarks.loong.sources import load_loong
from lc_pipeline.cli import main
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.registry import ModelRegistry
from lc_pipeline.sources.validation import read_records

IDS = ["q-1", "q-2", "q-3"]
SEP_ID = "q-\u2028sep"  # a record id holding U+2028, as a LongBench _id may
DEEP = "[" * 200_000  # the probe's 200,000 nested '['


def record(rid: str) -> dict:
    return {"dataset": "qasper", "_id": rid, "language": "en", "context": "The paper studies parsing.",
            "input": "What is studied?", "answers": ["parsing"], "all_classes": None}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    return released_longbench_project(tmp_path, monkeypatch, [record(r) for r in [*IDS, SEP_ID]])


def lcp(*args: str):
    return CliRunner().invoke(main, list(args))


def do_import(project: Path, path: Path, model: str = "elsewhere", *more: str):
    return lcp("models", "import", str(path), "--model", model, "--config", str(project / "lb.yaml"), *more)


def good_lines(prefix: str = "answer") -> str:
    return "".join(json.dumps({"_id": r, "prediction": f"{prefix} {r}"}) + "\n" for r in [*IDS, SEP_ID])


def written(project: Path) -> dict[str, bytes]:
    """Every file of the lake and the registry, by path: what a failed import must leave as it was."""
    files = {p: p.read_bytes() for p in (project / "lake").rglob("*") if p.is_file()}
    if (project / "models.yaml").exists():
        files[project / "models.yaml"] = (project / "models.yaml").read_bytes()
    return files


@pytest.fixture
def imported(project) -> dict[str, bytes]:
    """One good import already written; returns the lake and registry as they are after it."""
    first = project / "first.jsonl"
    first.write_text(good_lines())
    assert do_import(project, first).exit_code == 0
    return written(project)


def refused(project: Path, before: dict[str, bytes], text: str | bytes, *more: str) -> str:
    """Import ``text`` as model ``elsewhere``: it must fail and leave every file as it was; returns the output."""
    path = project / "bad.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    result = do_import(project, path, "elsewhere", *more)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert written(project) == before
    return result.output


def stored_predictions(project: Path, model: str = "elsewhere") -> dict[str, str]:
    spec = ModelRegistry(project / "models.yaml").get(model)
    generator = make_generator(spec)
    rids = [*IDS, SEP_ID]
    requests = [GenerationRequest(f"k{i}", "Question: what?\nAnswer:", 8, record_id=rid) for i, rid in enumerate(rids)]
    return {rid: r.output for rid, r in zip(rids, generator.generate(requests), strict=True)}


# ----------------------------------------------------------------------------- D10: line separators are data


@pytest.mark.parametrize("ensure_ascii", [False, True], ids=["raw", "escaped"])
def test_d10_line_separators_inside_strings_import_and_are_read_back(project, ensure_ascii):
    preds = [{"_id": r, "prediction": f"Paris\u2028London\u2029Rome\x85{r}"} for r in IDS]
    preds.append({"_id": SEP_ID, "prediction": "in an id"})
    path = project / "preds.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=ensure_ascii) + "\r\n" for p in preds), encoding="utf-8")
    result = do_import(project, path)
    assert result.exit_code == 0, result.output
    assert "4 predictions imported" in result.output
    got = stored_predictions(project)  # what every backfill reads: the stored copy, split on \n only
    assert got == {p["_id"]: p["prediction"] for p in preds}


# ----------------------------------------------------------------------------- D11: deep nesting


def test_d11_a_deeply_nested_line_is_refused_naming_file_line_and_field(project, imported):
    text = good_lines().replace('"prediction": "answer q-2"}', '"prediction": "x", "extra": ' + DEEP + "}")
    out = refused(project, imported, text)
    assert f"{project / 'bad.jsonl'}, line 2, field 'extra': nested more than 100 arrays/objects deep" in out
    assert "RecursionError" not in out


def test_d11_in_reject_mode_the_deep_line_is_counted_and_the_others_imported(project):
    path = project / "preds.jsonl"
    path.write_text(good_lines().replace('"prediction": "answer q-2"}', '"prediction": "x", "extra": ' + DEEP + "}"))
    result = do_import(project, path, "elsewhere", "--on-error", "reject")
    assert result.exit_code == 0, result.output
    assert "1 line(s) rejected" in result.output and "line 2, field 'extra'" in result.output
    assert "3 predictions imported" in result.output


@pytest.mark.parametrize("container", ["jsonl", "json"])
def test_d11_a_deeply_nested_source_record_is_an_error_not_a_recursion(tmp_path, container):
    good, deep = json.dumps(record("a")), json.dumps(record("b"))[:-1] + ', "extra": ' + DEEP + "}"
    path = tmp_path / f"qasper.{container}"
    path.write_text(f"{good}\n{deep}\n" if container == "jsonl" else f"[{good},\n{deep}]")
    if container == "jsonl":  # one record rejected, the other read
        _, records = read_records(path)
        got = list(records)
        assert got[0][1]["_id"] == "a"
        error = got[1][1]
        assert (error.file, error.index, error.field) == (f"{tmp_path.name}/qasper.jsonl", 1, "extra")
        assert "nested more than 100 arrays/objects deep" in error.reason
    else:  # one JSON document: the file is refused, naming the line
        _, records = read_records(path)
        with pytest.raises(ValueError, match=r"qasper.json: field '<file>': nested more than 100 arrays/objects deep "
                                             r"\(line 2"):
            list(records)


# ----------------------------------------------------------------------------- D12: what is read, and how often


def test_d12_a_fifo_is_refused_at_once_without_waiting_for_a_writer(project, imported):
    fifo = project / "preds.fifo"
    os.mkfifo(fifo)
    def hung(signum, frame):
        raise TimeoutError("the import waited for a writer on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # the probe's import hung here forever
    try:
        result = do_import(project, fifo)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert result.exit_code == 1
    assert f"predictions file {fifo}: is a named pipe (FIFO) or a pipe such as <(…), not a regular file" in result.output
    assert written(project) == imported


def test_d12_a_device_is_refused_before_a_byte_is_read(project, imported):
    # /dev/null, not the probe's /dev/zero: were the check lost, this test fails instead of filling the memory.
    result = do_import(project, Path("/dev/null"))
    assert result.exit_code == 1 and "predictions file /dev/null: is a device, not a regular file" in result.output
    assert written(project) == imported


def test_d12_a_file_over_the_bound_is_refused_naming_the_option_that_raises_it(project, imported):
    text = good_lines()
    out = refused(project, imported, text, "--max-bytes", str(len(text.encode()) - 1))
    assert f"{len(text.encode()):,} bytes, more than the {len(text.encode()) - 1:,} allowed (--max-bytes raises" in out
    (project / "bad.jsonl").write_text(text)
    assert do_import(project, project / "bad.jsonl", "elsewhere", "--max-bytes", str(len(text.encode()))).exit_code == 0


def test_d12_the_manifest_hashes_the_bytes_that_were_parsed(project):
    path = project / "preds.jsonl"
    path.write_text(good_lines())
    assert do_import(project, path).exit_code == 0
    folder = Path(ModelRegistry(project / "models.yaml").get("elsewhere").model_id).parent
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert manifest["source_file"] == str(path.resolve())


# ----------------------------------------------------------------------------- D20: a lone surrogate


def test_d20_a_lone_surrogate_names_the_line_and_field(project, imported):
    text = good_lines().replace('"answer q-3"', '"a\\ud800b"')
    out = refused(project, imported, text)
    assert f"{project / 'bad.jsonl'}, line 3, field 'prediction': lone surrogate U+D800 at character 1" in out


def test_d20_in_reject_mode_only_the_line_with_a_lone_surrogate_is_rejected(project):
    path = project / "preds.jsonl"
    path.write_text(good_lines().replace('"answer q-3"', '"a\\ud800b"'))
    result = do_import(project, path, "elsewhere", "--on-error", "reject")
    assert result.exit_code == 0, result.output
    assert "3 predictions imported" in result.output and "1 line(s) rejected" in result.output
    assert "1 record(s) of the config have no prediction" in result.output
    folder = Path(ModelRegistry(project / "models.yaml").get("elsewhere").model_id).parent
    [rejected] = [json.loads(x) for x in (folder / "rejected.jsonl").read_text().split("\n") if x]
    assert (rejected["line"], rejected["field"]) == (3, "prediction")


# ----------------------------------------------------------------------------- D25: a key given twice


@pytest.mark.parametrize(("line", "field"), [
    ('{"_id": "nope", "_id": "q-1", "prediction": "a"}', "_id"),
    ('{"_id": "q-1", "prediction": "a", "prediction": "b"}', "prediction"),
    ('{"_id": "q-1", "prediction": "a", "meta": {"k": 1, "k": 2}}', "meta"),
])
def test_d25_a_key_given_twice_is_refused_naming_it(project, imported, line, field):
    text = line + "\n" + good_lines().split("\n", 1)[1]
    out = refused(project, imported, text)
    assert f"{project / 'bad.jsonl'}, line 1, field {field!r}: " in out and "given twice in one object" in out


def test_d25_a_source_record_with_a_key_given_twice_is_rejected_alone(tmp_path):
    path = tmp_path / "qasper.jsonl"
    path.write_text(json.dumps(record("a")) + "\n" + '{"_id": "b", "_id": "c", "input": "x"}\n')
    _, records = read_records(path, id_field="_id")
    got = [value for _, value in records]
    assert got[0]["_id"] == "a"
    assert (got[1].index, got[1].field) == (1, "_id") and "key '_id' given twice in one object" in got[1].reason


# ----------------------------------------------------------------------------- D26: Loong documents not UTF-8


def test_d26_a_loong_document_that_is_not_utf8_rejects_its_item_naming_the_file_and_byte(tmp_path):
    docs = tmp_path / "doc"
    (docs / "paper").mkdir(parents=True)
    (docs / "paper" / "good.md").write_text("# Good\nA paper.", encoding="utf-8")
    (docs / "paper" / "latin.md").write_bytes("# Latin\nCafé".encode("latin-1"))
    items = [{"id": i, "type": "paper", "level": 1, "set": 1, "length": 100, "language": "en", "question": "Q?",
              "instruction": "Read.", "prompt_template": "{docs}\n\n{instruction}\n\n{question}", "doc": [d],
              "answer": "A", "shuffle_doc": False} for i, d in (("ok", "good.md"), ("bad", "latin.md"))]
    path = tmp_path / "loong.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    documents, loaded, [report] = load_loong(path, docs, source="t", on_error="reject")
    assert loaded["item_id"].to_list() == ["t-ok"]
    [rejected] = report.rejected
    assert rejected.field == "doc" and rejected.record_id == "bad"
    assert f"document file {docs / 'paper' / 'latin.md'}: not UTF-8 text at byte offset 11 (line 2)" in rejected.reason
    assert "\ufffd" not in "".join(documents["text"].to_list())


def test_d26_strict_decoding_keeps_text_modes_line_ends_a_crlf_document_reads_as_before(tmp_path):
    docs = tmp_path / "doc"
    (docs / "paper").mkdir(parents=True)
    (docs / "paper" / "crlf.md").write_bytes("# CRLF\r\nCafé line one.\r\nline two\rend".encode("utf-8"))
    item = {"id": "crlf", "type": "paper", "level": 1, "set": 1, "length": 100, "language": "en", "question": "Q?",
            "instruction": "Read.", "prompt_template": "{docs}\n\n{instruction}\n\n{question}", "doc": ["crlf.md"],
            "answer": "A", "shuffle_doc": False}
    path = tmp_path / "loong.jsonl"
    path.write_text(json.dumps(item) + "\n")
    documents, loaded, _ = load_loong(path, docs, source="t", on_error="fail")
    text = "".join(documents["text"].to_list())
    assert "\r" not in text and "Café line one.\nline two\nend" in text  # as open(...).read() gives it


# ----------------------------------------------------------------------------- D32: bounded, not piling up


def test_d32_more_rejected_lines_than_the_bound_stop_the_import_and_write_nothing(project, imported):
    unknown = "".join(json.dumps({"_id": f"nope-{i}", "prediction": "x"}) + "\n" for i in range(30))
    out = refused(project, imported, good_lines() + unknown, "--on-error", "reject", "--max-rejected", "20")
    assert "more than 20 lines rejected (line 25 is the 21th" in out and "--max-rejected raises the bound" in out
    assert "bad.jsonl, line 5, field '_id': unknown id 'nope-0'" in out


def test_d32_a_reimport_replaces_the_models_earlier_copy(project, imported):
    folders = sorted((project / "lake" / "imports" / "elsewhere").iterdir())
    assert len(folders) == 1
    second = project / "second.jsonl"
    second.write_text(good_lines("better"))
    result = do_import(project, second)
    assert result.exit_code == 0, result.output
    now = sorted((project / "lake" / "imports" / "elsewhere").iterdir())
    assert len(now) == 1 and now != folders
    assert f"replaced elsewhere's earlier import(s), removed: {folders[0].name}" in result.output
    assert stored_predictions(project)["q-1"] == "better q-1"


# ----------------------------------------------------------------------------- lcp score reads through the same rules


@pytest.mark.parametrize("line, message", [
    ('{"_id": "a", "prediction": "x", "answers": ["x"], "extra": ' + "[" * 5000 + "]" * 5000 + "}",
     "line 1: field 'extra': nested more than 100 arrays/objects deep"),
    ('{"_id": "b", "prediction": "x", "prediction": "y", "answers": ["x"]}',
     "line 1 (_id 'b'): field 'prediction': key 'prediction' given twice in one object"),
])
def test_lcp_score_refuses_deep_nesting_and_repeated_keys_naming_line_and_field(tmp_path, line, message):
    path = tmp_path / "preds.jsonl"
    path.write_text(line + "\n")
    before = path.read_bytes()
    result = CliRunner().invoke(main, ["tools", "score", str(path), "--metric", "longbench:qasper"])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    assert path.read_bytes() == before
