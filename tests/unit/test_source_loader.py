"""The loader: config source kinds, and format detection for `lcp sources validate`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.loader import detect_kind, load_source, validate_path
from lc_pipeline.tasks.registry import SOURCE_KINDS

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")


def jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def test_every_paper_format_is_a_source_kind():
    assert {"demo_corpus", "longbench", "lveval", "loong", "generic"} <= set(SOURCE_KINDS)


def test_unknown_kind_names_the_source_and_the_known_kinds():
    with pytest.raises(ValueError, match=r"source 'x': unknown kind 'nope'.*longbench"):
        load_source(SourceConfig(name="x", kind="nope"))


def test_formats_are_detected_from_their_fields(tmp_path):
    lb = jsonl(tmp_path / "a.jsonl", {"dataset": "qasper", "_id": "1", "language": "en", "context": "c",
                                      "input": "q", "answers": ["a"], "all_classes": None})
    lv = jsonl(tmp_path / "b.jsonl", {"input": "q", "context": "c", "answers": ["a"], "answer_keywords": "a",
                                      "confusing_facts": [], "length": 10, "language": "en"})
    other = jsonl(tmp_path / "c.jsonl", {"text": "no benchmark format"})
    assert (detect_kind(lb), detect_kind(lv), detect_kind(other)) == ("longbench", "lveval", None)
    with pytest.raises(ValueError, match="no known source format"):
        validate_path(other)


@pytest.mark.skipif(not (SHARED / "loong").exists(), reason="../shared/data/loong is not beside the checkout")
def test_loong_items_load_without_their_documents():
    loaded = load_source(SourceConfig(name="loong", kind="loong", options={"path": str(SHARED / "loong" / "loong.jsonl")}))
    assert loaded.items.height == 1600 and loaded.documents.height == 0
    assert any("not loaded" in note or "documents" in note for r in loaded.reports for note in r.notes)
    assert validate_path(SHARED / "loong" / "loong.jsonl")[0] == "loong"
