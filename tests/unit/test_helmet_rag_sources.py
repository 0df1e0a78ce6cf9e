"""HELMET's per-dataset inputs (spec helmet.md §2.2-§2.3): the msmarco source's two layouts, its errors, PopQA's
popularity filter, label-balanced sampling and the per_level table's errors. Fixtures: tests/fixtures/helmet."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lc_pipeline.benchmarks.helmet.construction.pools import Passage, per_level_count
from lc_pipeline.benchmarks.helmet.construction.rerank import balanced_sample
from lc_pipeline.sources.kilt import load_kilt
from lc_pipeline.sources.msmarco import load_msmarco_jsonl, load_msmarco_trec
from lc_pipeline.sources.validation import RecordError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "helmet"


def trec(**kw):
    return load_msmarco_trec(FIX / "msmarco/queries.tsv", FIX / "msmarco/qrels.txt", FIX / "msmarco/top1000.tsv",
                             source="msmarco", **kw)


def test_trec_files_and_helmets_jsonl_give_the_same_queries_and_grades():
    docs, items, reports = trec()
    jdocs, jitems, _ = load_msmarco_jsonl(FIX / "msmarco/test_reranking_data.jsonl", source="msmarco")
    assert items.height == 4 and docs.height == 120  # the unjudged 5th query is not an item
    assert items["answers"].to_list() == jitems["answers"].to_list()
    assert items["record_fields"].to_list() == jitems["record_fields"].to_list()
    notes = " ".join(reports[-1].notes)
    assert "candidates of unjudged queries (not read): 30" in notes and "unjudged candidates (read as grade 0)" in notes


def test_a_bad_qrels_line_names_file_line_and_field(tmp_path):
    bad = tmp_path / "qrels.txt"
    bad.write_text("1100 0 7000001 2\n1100 0 7000002 7\n")
    with pytest.raises(RecordError, match=r"qrels.txt record 2 \(id '1100'\): field 'grade': expected a grade 0-3"):
        load_msmarco_trec(FIX / "msmarco/queries.tsv", bad, FIX / "msmarco/top1000.tsv", source="m")


def test_popqa_records_at_or_above_the_popularity_limit_are_counted_not_kept():
    _, items, reports = load_kilt(FIX / "kilt/passages.jsonl", FIX / "popqa/test.jsonl", source="popqa",
                                  max_popularity=1000)
    assert items.height == 5 and reports[-1].records == 7
    assert any("popularity filter: s_pop >= 1000, left out 2" in n for n in reports[-1].notes)


def test_balanced_sample_gives_equal_shares_and_passes_a_short_grades_rest_on():
    cands = [(Passage(str(i), str(i), "", "t"), g) for i, g in enumerate([3] * 2 + [2] * 3 + [1] * 4 + [0] * 21)]
    grades = [g for _, g in balanced_sample(cands, 10, random.Random(1))]
    assert [grades.count(g) for g in (3, 2, 1, 0)] == [2, 3, 3, 2]
    with pytest.raises(ValueError, match="30 candidates, 31 needed"):
        balanced_sample(cands, 31, random.Random(1))


def test_a_level_missing_from_per_level_is_an_error_naming_task_and_level():
    assert per_level_count({"per_level": {"8k": 50}}, "nq", "8k") == 50
    assert per_level_count({}, "rag", "8k") is None
    with pytest.raises(ValueError, match=r"task 'nq'.*no count for level '16k'"):
        per_level_count({"per_level": {"8k": 50}}, "nq", "16k")
