"""Bad and unusual source files (issue 22, items 2, 3, 5 and 8): every file of a source folder is read (compressed
ones too) or counted as skipped with its name; `lcp sources validate` checks what a run loads, by the run's own
listing and loaders; a lone surrogate costs its record, not the file; file-level messages say what was found.
Records read = accepted + rejected throughout, and nothing already in the lake is lost."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner
from conftest import settings_for

from lc_pipeline.cli import main
from lc_pipeline.config import SourceConfig
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.sources.loader import check_paths, load_source
from lc_pipeline.sources.validation import RecordError

CONTEXT = "Passage 1:\nRiver Ada\nThe Ada flows north past Bel.\nPassage 2:\nBel\nBel is a town on the Ada."


def hotpot(rid: str, **changes) -> dict:
    """A LongBench hotpotqa record with ``changes`` applied."""
    return {"dataset": "hotpotqa", "_id": rid, "language": "en", "context": CONTEXT,
            "input": "Which river flows past Bel?", "answers": ["Ada"], "all_classes": None, **changes}


def jsonl(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def longbench(paths, on_error: str = "reject"):
    return load_source(SourceConfig(name="lb", kind="longbench", options={"paths": paths, "on_error": on_error}))


def validate(*args: str):
    return CliRunner().invoke(main, ["sources", "validate", *args])


def mixed_folder(root: Path) -> Path:
    """Plain, gzip and bzip2 records beside a subfolder, a note, an archive and a broken link."""
    folder = root / "longbench"
    write(folder / "a.jsonl", jsonl(hotpot("a")))
    write(folder / "b.jsonl.gz", gzip.compress(jsonl(hotpot("b"))))
    write(folder / "c.json.bz2", bz2.compress(json.dumps([hotpot("c")]).encode()))
    write(folder / "README.md", b"# notes\n")
    write(folder / "old.zip", b"PK\x03\x04")
    write(folder / "extra" / "d.jsonl", jsonl(hotpot("d")))
    os.symlink("gone.jsonl", folder / "e.jsonl")
    return folder


SKIPPED = [
    "longbench/README.md: skipped (unknown extension '.md')",
    "longbench/e.jsonl: skipped (a broken symlink (target 'gone.jsonl' missing))",
    "longbench/extra: skipped (a folder: only the files directly in a source folder are read)",
    "longbench/old.zip: skipped (an archive: unpack it into the folder)",
]


# ----------------------------------------------------------------------------- item 2: every file read or counted


def test_a_source_folder_reads_compressed_files_and_names_each_skipped_one_in_the_asset_metadata(tmp_path):
    folder = mixed_folder(tmp_path)
    config = {"name": "folder", "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"],
              "sources": [{"name": "lb", "kind": "longbench", "paths": str(folder), "on_error": "reject"}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    pipeline = build_pipeline(settings_for(tmp_path, tmp_path / "c.yaml"))

    def materialize(instance):
        return dg.materialize(pipeline.assets, selection=["source_documents", "source_items", "rejected_records"],
                              partition_key="lb", resources=pipeline.resources, instance=instance, raise_on_error=False)

    items_file = tmp_path / "lake" / "source_items" / "source=lb" / "data.parquet"
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("source", ["lb"])
        result = materialize(instance)
        assert result.success
        meta = {k: v.value for k, v in result.asset_materializations_for_node("sources")[1].metadata.items()}
        assert (meta["files_read"], meta["records_read"], meta["records_accepted"], meta["records_rejected"]) == (3, 3, 3, 0)
        assert meta["files_skipped"] == SKIPPED
        written = items_file.read_bytes()

        # A UTF-16 file added to the folder fails the next run naming it; the items already written are kept.
        write(folder / "f.jsonl", jsonl(hotpot("f")).decode().encode("utf-16"))
        again = materialize(instance)
    assert not again.success
    error = again.get_step_failure_events()[0].step_failure_data.error
    messages = [error.message, error.cause.message if error.cause else ""]
    assert any("longbench/f.jsonl: field '<file>': file is UTF-16 encoded (BOM FF FE, little-endian); save it as UTF-8"
               in m for m in messages), messages
    assert items_file.read_bytes() == written


def test_a_compressed_file_loads_exactly_as_the_plain_one_its_name_still_giving_the_variant(tmp_path):
    record = hotpot("e1", dataset="hotpotqa_e", length=120)
    plain = longbench(str(write(tmp_path / "plain" / "hotpotqa_e.jsonl", jsonl(record))))
    packed = longbench(str(write(tmp_path / "packed" / "hotpotqa_e.jsonl.gz", gzip.compress(jsonl(record)))))
    assert packed.items.rows() == plain.items.rows() and packed.documents.rows() == plain.documents.rows()
    assert packed.items["item_id"].to_list() == ["lb-hotpotqa_e-e1"]
    assert [r.file for r in packed.reports] == ["packed/hotpotqa_e.jsonl.gz"] and packed.skipped == []


# ----------------------------------------------------------------------------- item 3: validate checks what a run loads


def test_validate_lists_a_folder_as_the_run_does_and_reads_its_compressed_files(tmp_path):
    folder = mixed_folder(tmp_path)
    run = longbench(str(folder))
    checks = check_paths([folder])
    read = [c for c in checks if c.status == "read"]
    assert [Path(c.file).name for c in read] == ["a.jsonl", "b.jsonl.gz", "c.json.bz2"] == [
        r.file.split("/")[-1] for r in run.reports]
    assert [f"longbench/{Path(c.file).name}: skipped ({c.reasons[0]})" for c in checks if c.status == "skipped"] == [
        str(s) for s in run.skipped] == SKIPPED
    # extra/d.jsonl, in a subfolder no run reads, is not validated either
    assert not any("d.jsonl" in c.file for c in checks)
    result = validate(str(folder))
    assert result.exit_code == 0, result.output
    assert "longbench/extra: skipped (a folder" in result.output


def test_validate_catches_an_id_repeated_across_files_as_the_run_does(tmp_path):
    folder = tmp_path / "lb"
    write(folder / "part1.jsonl", jsonl(hotpot("a"), hotpot("b")))
    write(folder / "part2.jsonl", jsonl(hotpot("c"), hotpot("a")))
    run = longbench(str(folder))
    [rejected] = [r for report in run.reports for r in report.rejected]
    assert (rejected.file, rejected.index, rejected.field) == ("lb/part2.jsonl", 1, "_id")
    result = validate(str(folder), "--format", "json")
    assert result.exit_code == 1
    rows = json.loads(result.stdout)
    assert [(Path(r["file"]).name, r["records"], r["accepted"], r["rejected"]) for r in rows] == [
        ("part1.jsonl", 2, 2, 0), ("part2.jsonl", 2, 1, 1)]
    assert rows[1]["reasons"] == ["lb/part2.jsonl record 1 (id 'a'): field '_id': item 'validate-hotpotqa-a' "
                                  "already loaded from lb/part1.jsonl"]


@pytest.mark.parametrize("holds", ["nothing", "a symlink loop"])
def test_validate_of_a_folder_with_nothing_to_read_exits_non_zero_saying_why(tmp_path, holds):
    folder = tmp_path / "data"
    folder.mkdir()
    if holds == "a symlink loop":
        os.symlink("loop", folder / "loop")
    result = validate(str(folder))
    assert result.exit_code == 1
    expected = "the folder is empty" if holds == "nothing" else "all 1 entries skipped"
    assert f"{folder}: no source files to read: {expected}" in result.output
    if holds == "a symlink loop":
        assert f"{folder}/loop: skipped (a symlink loop)" in result.output


def test_validate_prints_the_loaders_notes_so_a_misspelled_field_shows(tmp_path):
    record = hotpot("a")
    record["all_clases"] = record.pop("all_classes")
    path = write(tmp_path / "lb" / "hotpotqa.jsonl", jsonl(record))
    result = validate(str(path))
    assert result.exit_code == 0
    assert "note: " in result.output and "hotpotqa: fields ignored: all_clases" in result.output


# ----------------------------------------------------------------------------- item 5: a lone surrogate


@pytest.mark.parametrize("container", ["jsonl", "json"])
def test_a_lone_surrogate_rejects_its_record_and_keeps_the_others(tmp_path, container):
    records = [hotpot("good-1"), hotpot("bad", input="Which river\ud800?"), hotpot("good-2"),
               hotpot("bad-answer", answers=["Ada", "\udfff"])]
    data = jsonl(*records) if container == "jsonl" else json.dumps(records).encode()
    assert b"\\ud800" in data  # escaped in the file, as json.dumps writes it
    loaded = longbench(str(write(tmp_path / "lb" / f"hotpotqa.{container}", data)))
    [report] = loaded.reports
    assert report.records == 4 == report.accepted + len(report.rejected)
    assert loaded.items["item_id"].to_list() == ["lb-hotpotqa-good-1", "lb-hotpotqa-good-2"]
    assert [str(r) for r in report.rejected] == [
        f"lb/hotpotqa.{container} record 1 (id 'bad'): field 'input': lone surrogate U+D800 at character 11 "
        "(half of a UTF-16 pair, escaped in the JSON; not valid Unicode text)",
        f"lb/hotpotqa.{container} record 3 (id 'bad-answer'): field 'answers': answers[1]: lone surrogate U+DFFF "
        "at character 0 (half of a UTF-16 pair, escaped in the JSON; not valid Unicode text)"]
    loaded.rejected("lb").write_parquet(tmp_path / "rejected.parquet")  # the rows are valid UTF-8: they can be stored


def test_a_lone_surrogate_fails_a_strict_source_naming_file_record_and_field(tmp_path):
    path = write(tmp_path / "lb" / "hotpotqa.jsonl", jsonl(hotpot("good"), hotpot("bad", context=CONTEXT + "\ud800")))
    with pytest.raises(RecordError) as info:
        longbench(str(path), on_error="fail")
    assert (info.value.file, info.value.index, info.value.record_id, info.value.field) == (
        "lb/hotpotqa.jsonl", 1, "bad", "context")
    assert "lone surrogate U+D800" in str(info.value)


# ----------------------------------------------------------------------------- item 8: say what was found

ONE = json.dumps(hotpot("a"))
FOUND = {
    "empty": ("x.jsonl", b"", "no records: file is empty (0 bytes)"),
    "empty gzip": ("x.jsonl.gz", gzip.compress(b""), "no records: file is empty (0 bytes after gzip decompression)"),
    "UTF-16 with a BOM": ("x.jsonl", (ONE + "\n").encode("utf-16"),
                          "file is UTF-16 encoded (BOM FF FE, little-endian); save it as UTF-8"),
    "UTF-16 without a BOM": ("x.jsonl", (ONE + "\n").encode("utf-16-be"),
                             "file is UTF-16 encoded (big-endian, no BOM); save it as UTF-8"),
    "CR-only line endings": ("x.jsonl", f"{ONE}\r{json.dumps(hotpot('b'))}\r".encode(),
                             "lines end with CR only (classic Mac line endings), so the file reads as one line; "
                             "convert the line endings to LF (or CRLF)"),
    "a JSON array in .jsonl": ("x.jsonl", json.dumps([hotpot("a"), hotpot("b")], indent=1).encode(),
                               "a JSON array in a .jsonl file (one document, 2 elements): rename it .json or write "
                               "one object per line"),
    "Latin-1 in a JSON list": ("x.json", b'[\n{"_id": "caf\xe9"}]', "undecodable bytes (not UTF-8) on line 2 (byte 14)"),
    "a broken gzip": ("x.jsonl.gz", b"not gzip", "not readable as gzip: Not a gzipped file (b'no')"),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_a_file_that_cannot_be_read_is_named_with_what_was_found_in_the_run_and_in_validate(tmp_path, case):
    name, data, found = FOUND[case]
    path = write(tmp_path / "src" / name, data)
    expected = f"src/{name}: field '<file>': {found}"
    with pytest.raises(RecordError) as info:
        longbench(str(path), on_error="reject")  # a file-level problem, whatever the policy
    assert str(info.value) == expected
    result = validate(str(path))
    assert result.exit_code == 1 and expected in result.output
    assert "no known source format" not in result.output


def test_a_file_of_no_known_format_says_which_fields_it_has(tmp_path):
    path = write(tmp_path / "notes.jsonl", jsonl({"title": "x", "body": "y"}))
    result = validate(str(path))
    assert result.exit_code == 1
    assert "no known source format matches its records: its first record has the fields ['body', 'title']" in result.output


SHARED_LOONG = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "loong" / "loong.jsonl"


@pytest.mark.skipif(not SHARED_LOONG.exists(), reason="../shared/data/loong is not beside the checkout")
def test_a_loong_release_folder_names_what_it_does_not_read(tmp_path):
    write(tmp_path / "loong" / "loong.jsonl", SHARED_LOONG.read_bytes().split(b"\n", 1)[0] + b"\n")
    write(tmp_path / "loong" / "loong_v2.jsonl", b"")
    loaded = load_source(SourceConfig(name="loong", kind="loong", options={"path": str(tmp_path / "loong")}))
    assert loaded.items.height == 1
    assert [str(s) for s in loaded.skipped] == [
        "loong/loong_v2.jsonl: skipped (not read: a Loong folder gives loong.jsonl and its doc/ folder)"]
