"""The record-validation framework every source adapter uses.

Each malformed input is checked in both policies: "fail" raises the first RecordError,
"reject" lists it and keeps the good records; the message always names the file, the
record (index, and id when it has one) and the field.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lc_pipeline.sources.validation import (
    FILE,
    RECORD,
    Record,
    RecordError,
    read_records,
    validate_file,
)


def parse(rec: Record) -> dict:
    """A minimal adapter: what a LongBench-like record must carry."""
    return {
        "id": rec.required_str("_id"),
        "context": rec.required_str("context"),
        "question": rec.required_str("input", non_empty=False),
        "answers": rec.str_list("answers"),
        "classes": rec.optional_str_list("all_classes"),
        "length": rec.optional("length", int),
    }


def good(i: str) -> dict:
    return {"_id": i, "context": f"context {i}", "input": "q?", "answers": ["x"], "all_classes": None}


def jsonl(tmp_path, lines: list, name: str = "data.jsonl"):
    """Write lines (dicts become JSON, bytes/str are written as they are) to a JSONL file."""
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    out = b""
    for line in lines:
        if isinstance(line, dict | list):
            line = json.dumps(line, ensure_ascii=False)
        out += (line.encode() if isinstance(line, str) else line) + b"\n"
    path.write_bytes(out)
    return path


# (case, bad middle record, expected record id in the message, field, words of the reason)
CASES = [
    ("missing field", {"_id": "b", "input": "q", "answers": ["x"]}, "b", "context", "missing"),
    ("answers as a string", {**good("b"), "answers": "x"}, "b", "answers", "expected a list of strings, got str"),
    ("answers with a non-string", {**good("b"), "answers": ["x", 3]}, "b", "answers", "element 1 is int"),
    ("empty answers list", {**good("b"), "answers": []}, "b", "answers", "empty list"),
    ("blank context", {**good("b"), "context": "  \n"}, "b", "context", "empty"),
    ("context is null", {**good("b"), "context": None}, "b", "context", "got null"),
    ("all_classes not a list", {**good("b"), "all_classes": "A,B"}, "b", "all_classes", "got str"),
    ("length as bool", {**good("b"), "length": True}, "b", "length", "got bool"),
    ("missing id", {k: v for k, v in good("b").items() if k != "_id"}, None, "_id", "missing"),
    ("duplicate id", good("a"), "a", "_id", "duplicate id, first seen at record 0"),
    ("undecodable UTF-8", b'{"_id": "b", "context": "caf\xe9"}', None, RECORD, "undecodable bytes"),
    ("invalid JSON line", '{"_id": "b", "context": ', None, RECORD, "invalid JSON"),
    ("record not an object", ["b", "ctx"], None, RECORD, "expected an object"),
]


@pytest.mark.parametrize(("case", "bad", "rid", "field", "reason"), CASES, ids=[c[0] for c in CASES])
def test_fail_mode_raises_a_located_error(tmp_path, case, bad, rid, field, reason):
    path = jsonl(tmp_path, [good("a"), bad, good("c")])
    with pytest.raises(RecordError) as info:
        validate_file(path, parse, id_field="_id", on_error="fail")
    err = info.value
    assert (err.file, err.index, err.record_id, err.field) == ("src/data.jsonl", 1, rid, field)
    assert reason in err.reason
    msg = str(err)
    assert msg.startswith("src/data.jsonl record 1") and f"field {field!r}" in msg and reason in msg
    if rid is not None:
        assert f"(id {rid!r})" in msg


@pytest.mark.parametrize(("case", "bad", "rid", "field", "reason"), CASES, ids=[c[0] for c in CASES])
def test_reject_mode_keeps_the_good_records_and_accounts_for_every_one(tmp_path, case, bad, rid, field, reason):
    path = jsonl(tmp_path, [good("a"), bad, good("c")])
    parsed, report = validate_file(path, parse, id_field="_id", on_error="reject")
    assert [p["id"] for p in parsed] == ["a", "c"]
    assert (report.records, report.accepted, len(report.rejected)) == (3, 2, 1)
    assert report.records == report.accepted + len(report.rejected)
    (rej,) = report.rejected
    assert (rej.file, rej.index, rej.record_id, rej.field) == ("src/data.jsonl", 1, rid, field)
    assert reason in rej.reason and reason in str(rej)
    assert "1 rejected" in report.summary()


def test_reject_mode_counts_add_up_with_many_bad_records(tmp_path):
    lines = [good("a"), {**good("b"), "answers": "x"}, "not json", good("a"), b"\xff\xfe", good("d"), ""]
    parsed, report = validate_file(jsonl(tmp_path, lines), parse, id_field="_id", on_error="reject")
    # The blank last line is no record; the other 6 lines are each accepted or rejected.
    assert report.records == 6 == report.accepted + len(report.rejected)
    assert [p["id"] for p in parsed] == ["a", "d"]
    assert [(r.index, r.field) for r in report.rejected] == [(1, "answers"), (2, RECORD), (3, "_id"), (4, RECORD)]


@pytest.mark.parametrize("on_error", ["fail", "reject"])
@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.jsonl", b"", "no records"),
        ("blank.jsonl", b"\n  \n", "no records"),
        ("empty.json", b"[]", "no records"),
        ("data.txt", b'{"_id": "a"}\n', "unknown extension '.txt'"),
        ("data.json", b'"just a string"', "expected a JSON list of records"),
        ("broken.json", b'[{"_id": "a"', "invalid JSON"),
        ("latin1.csv", b"_id,context\na,caf\xe9\n", "undecodable bytes (not UTF-8) on line 2"),
    ],
)
def test_file_level_problems_raise_in_both_modes(tmp_path, on_error, name, content, reason):
    # There is no record to reject, and an empty or unreadable file must not pass as a valid one.
    path = tmp_path / "src" / name
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(RecordError) as info:
        validate_file(path, parse, id_field="_id", on_error=on_error)
    assert info.value.file == f"src/{name}" and info.value.field == FILE and info.value.index is None
    assert reason in str(info.value) and str(info.value).startswith(f"src/{name}:")


def test_missing_file_and_bad_policy(tmp_path):
    with pytest.raises(RecordError, match="no such file"):
        validate_file(tmp_path / "nope.jsonl", parse)
    with pytest.raises(ValueError, match="on_error"):
        validate_file(jsonl(tmp_path, [good("a")]), parse, on_error="skip")


def test_formats_are_detected_by_extension_and_content(tmp_path):
    records = [good("a"), good("b")]
    (tmp_path / "list.json").write_text(json.dumps(records))
    (tmp_path / "lines.json").write_text("\n".join(json.dumps(r) for r in records))  # JSONL named .json
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "t.parquet")
    expected = {"list.json": "json", "lines.json": "jsonl", "t.parquet": "parquet"}
    for name, fmt in expected.items():
        got_fmt, rows = read_records(tmp_path / name)
        assert got_fmt == fmt
        assert [r["_id"] for _, r in rows] == ["a", "b"]
        parsed, report = validate_file(tmp_path / name, parse, id_field="_id")
        assert report.format == fmt and report.accepted == 2 and parsed[1]["answers"] == ["x"]


def test_csv_json_encoded_lists_only_when_the_adapter_allows_them(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('_id,context,input,answers\na,ctx,q,"[""x"", ""y""]"\n')
    # A JSON string is not silently taken as a list (nor as one answer)...
    with pytest.raises(RecordError, match="field 'answers': expected a list of strings, got str"):
        validate_file(path, parse, id_field="_id")

    # ...an adapter that knows its CSV export encodes lists as JSON says so.
    def parse_csv(rec: Record) -> list[str]:
        return rec.str_list("answers", allow_json_string=True)

    parsed, report = validate_file(path, parse_csv, id_field="_id")
    assert parsed == [["x", "y"]] and report.format == "csv"
    path.write_text("_id,answers\na,not json\n")
    with pytest.raises(RecordError, match="not JSON"):
        validate_file(path, parse_csv, id_field="_id")
