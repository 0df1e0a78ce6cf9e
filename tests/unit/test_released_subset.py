"""released.subset: MiniLongBench's samples found among the released LongBench records
(benchmarks/minilongbench/subset.py; spec shared/specs/minilongbench.md §3.1 and Appendix A)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from lc_pipeline.benchmarks.longbench.sources import load_longbench
from lc_pipeline.benchmarks.minilongbench import subset as rs

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
MLB = SHARED / "minilongbench"
needs_shared = pytest.mark.skipif(not (MLB / "released_subset_237.json").exists(), reason="shared data absent")


def write_task(folder: Path, task: str, n: int, name: str | None = None) -> Path:
    """A LongBench-format file of ``n`` small records of ``task`` (trec-like single-document records; trec's carry
    the label set the adapter requires of a classification task)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or task}.jsonl"
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"dataset": task, "_id": f"{task}-{i}", "language": "en",
                                 "context": f"Record {i} of {task}.", "input": f"question {i}",
                                 "answers": [f"answer {i}"],
                                 "all_classes": [f"answer {i}"] if task.removesuffix("_e") == "trec" else None}) + "\n")
    return path


def items_of(folder: Path, source: str = "longbench") -> pl.DataFrame:
    return load_longbench(folder, source=source)[1]


def test_the_released_subset_is_the_237_samples_of_the_papers_table():
    ids = rs.released_sample_ids()
    assert len(ids) == 237 and len(set(ids)) == 237 and rs.N_SAMPLES == 4750
    counts = {t: len(p) for t, p in rs.RELEASED_SUBSET.items()}
    assert counts["lcc"] == 26 and counts["passage_count"] == 4 and counts["repobench-p"] == 23
    assert list(rs.TASK_SIZES) == list(rs.RELEASED_SUBSET)  # the matrix's task order


@needs_shared
def test_the_released_ids_and_the_sample_index_agree_with_the_shared_files():
    assert rs.released_sample_ids() == tuple(sorted(json.loads((MLB / "released_subset_237.json").read_text())))
    matrix = pl.read_parquet(MLB / "scores_train_models.parquet").select("task", "task_sample", "global_sample").unique()
    assert matrix.height == 4750
    assert all(rs.global_sample(t, p) == g for t, p, g in matrix.iter_rows())
    assert all(rs.task_of_sample(g) == (t, p) for t, p, g in matrix.iter_rows())


def test_a_whole_released_task_file_gives_the_subsets_positions(tmp_path):
    write_task(tmp_path / "lb", "trec", 200)
    items = items_of(tmp_path / "lb")
    index = rs.sample_index(items)
    assert index.layouts == {"longbench/trec": "full file"}
    by_id = dict(items.select("item_id", "record_id").iter_rows())
    assert {by_id[i] for i in index.samples} == {f"trec-{p}" for p in rs.RELEASED_SUBSET["trec"]}
    assert sorted(index.samples.values()) == [4150 + p for p in rs.RELEASED_SUBSET["trec"]]  # trec is 4150..4349
    assert rs.subset_item_ids(items, "minilongbench") == set(index.samples)


def test_a_file_of_exactly_the_subsets_records_is_read_in_ascending_sample_order(tmp_path):
    write_task(tmp_path / "lb", "passage_retrieval_en", 15, name="passage_retrieval_en")
    # passage_retrieval_en needs "Paragraph N:" blocks: rewrite the contexts in that layout
    path = tmp_path / "lb" / "passage_retrieval_en.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for r in recs:
        r["context"], r["answers"] = "Paragraph 1: one.\nParagraph 2: two.", ["Paragraph 2"]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    items = items_of(tmp_path / "lb")
    index = rs.sample_index(items)
    assert index.layouts == {"longbench/passage_retrieval_en": "subset records"}
    by_record = {items.filter(pl.col("item_id") == i)["record_id"][0]: s for i, s in index.samples.items()}
    assert by_record["passage_retrieval_en-0"] == 2650 + 13 and by_record["passage_retrieval_en-14"] == 2650 + 187


def test_missing_tasks_are_reported_not_refused(tmp_path, caplog):
    write_task(tmp_path / "lb", "trec", 200)
    items = items_of(tmp_path / "lb")
    index = rs.sample_index(items)
    assert len(index.samples) == 8 and len(index.missing) == 229
    assert index.missing_tasks["lcc"] == 26 and "trec" not in index.missing_tasks
    with caplog.at_level("WARNING"):
        assert len(rs.subset_item_ids(items, "minilongbench")) == 8
    assert "8 of the subset's 237 samples present; missing: 2wikimqa (13)" in caplog.text


@needs_shared
def test_the_shared_longbench_files_hold_136_of_the_subsets_records():
    items = items_of(SHARED / "longbench")
    index = rs.sample_index(items)
    assert len(index.samples) == 136 and set(index.layouts.values()) == {"subset records"}
    assert index.missing_tasks == {"lsht": 8, "multifieldqa_zh": 15, "musique": 7, "narrativeqa": 6,
                                   "passage_retrieval_zh": 15, "qmsum": 6, "repobench-p": 23, "samsum": 15, "vcsum": 6}


@needs_shared
def test_the_shared_files_are_the_subsets_records_not_the_first_records_of_each_task():
    """Evidence for the 'subset records' reading: the shared reference predictions' per-record scores
    follow the training models' mean score on the subset's samples, not on each task's first records."""
    from lc_pipeline.benchmarks.longbench import metrics as lb

    matrix = pl.read_parquet(MLB / "scores_train_models.parquet")
    mean = dict(matrix.group_by("global_sample").agg(pl.col("score").mean()).iter_rows())
    metric = {"2wikimqa": lb.qa_f1_score, "hotpotqa": lb.qa_f1_score, "qasper": lb.qa_f1_score,
              "lcc": lb.code_sim_score, "passage_retrieval_en": lb.retrieval_score}
    ref, as_subset, as_prefix = [], [], []
    for task, fn in metric.items():
        recs = [json.loads(line) for line in (SHARED / "longbench" / f"{task}.jsonl").read_text().splitlines()]
        r = np.array([max(fn(x["reference_prediction"], a) for a in x["answers"]) for x in recs])
        s = np.array([mean[rs.global_sample(task, p)] for p in rs.RELEASED_SUBSET[task]])
        f = np.array([mean[rs.global_sample(task, p)] for p in range(len(recs))])
        ref += list(r - r.mean())
        as_subset += list(s - s.mean())
        as_prefix += list(f - f.mean())
    assert np.corrcoef(ref, as_subset)[0, 1] > 0.5 > np.corrcoef(ref, as_prefix)[0, 1] + 0.3


def test_a_partial_task_file_names_no_sample_and_is_refused(tmp_path):
    write_task(tmp_path / "lb", "lcc", 40)
    with pytest.raises(rs.ReleasedSubsetError, match=r"source 'longbench', task lcc: 40 records at positions 0\.\.39.*"
                                                     r"500 records.*exactly the subset's 26 records"):
        rs.sample_index(items_of(tmp_path / "lb"))


def test_longbench_e_records_are_left_out_and_counted(tmp_path):
    write_task(tmp_path / "lb", "trec", 200)
    write_task(tmp_path / "lb", "trec_e", 3)
    index = rs.sample_index(items_of(tmp_path / "lb"))
    assert index.skipped_longbench_e == 3 and len(index.samples) == 8


def test_a_sample_held_by_two_sources_is_refused(tmp_path):
    write_task(tmp_path / "a", "trec", 200)
    items = pl.concat([items_of(tmp_path / "a", "one"), items_of(tmp_path / "a", "two")])
    with pytest.raises(rs.ReleasedSubsetError, match=r"sample 4151 \(trec\) is held by two records"):
        rs.sample_index(items)


def test_no_record_of_the_subset_is_an_error(tmp_path):
    write_task(tmp_path / "lb", "trec", 200)
    items = items_of(tmp_path / "lb")
    lone = tmp_path / "ids.json"
    lone.write_text(json.dumps([0, 1]))  # two 2wikimqa samples; only trec is present
    with pytest.raises(rs.ReleasedSubsetError, match=r"none of its 2 samples is among the 200 records"):
        rs.subset_item_ids(items, str(lone))


def test_items_without_longbench_fields_are_refused_naming_the_item():
    items = pl.DataFrame({"item_id": ["loong-1"], "source": ["loong"], "record_fields": ['{"set": 1}']})
    with pytest.raises(rs.ReleasedSubsetError, match=r"item 'loong-1'.*lacks the LongBench 'dataset' and 'index'"):
        rs.sample_index(items)


def test_a_subset_may_be_a_json_list_or_a_fitted_minilongbench(tmp_path, monkeypatch):
    (tmp_path / "ids.json").write_text(json.dumps([4151, 4150, 0]))
    monkeypatch.setenv("LCP_DATA", str(tmp_path))
    assert rs.subset_sample_ids("$LCP_DATA/ids.json") == (0, 4150, 4151)

    from lc_pipeline.benchmarks.minilongbench import MiniLongBench

    n = 4750
    fitted = MiniLongBench(samples=np.arange(n), tasks=np.array(["t"] * n), categories=np.array(["c"] * n),
                           alpha=np.zeros((n, 2)), beta=np.zeros(n), subset=np.array([3, 4200]), threshold=0.5)
    fitted.save(tmp_path / "fitted")
    assert rs.subset_sample_ids(str(tmp_path / "fitted")) == (3, 4200)

    by_instance = MiniLongBench(samples=np.array(["a", "b"], dtype=object), tasks=np.array(["t", "t"]),
                                categories=np.array(["c", "c"]), alpha=np.zeros((2, 2)), beta=np.zeros(2),
                                subset=np.array([1]), threshold=0.5)
    by_instance.save(tmp_path / "own")
    with pytest.raises(rs.ReleasedSubsetError, match="names its samples by instance id"):
        rs.subset_sample_ids(str(tmp_path / "own"))


@pytest.mark.parametrize(("content", "problem"), [
    ("[1, 1]", "listed twice"),
    ("[4750]", r"not a LongBench sample index \(0\.\.4749\)"),
    ('{"a": 1}', "must hold a JSON list"),
])
def test_bad_subset_files_are_refused(tmp_path, content, problem):
    (tmp_path / "s.json").write_text(content)
    with pytest.raises(rs.ReleasedSubsetError, match=problem):
        rs.subset_sample_ids(str(tmp_path / "s.json"))


def test_an_unknown_subset_name_says_what_is_expected():
    with pytest.raises(rs.ReleasedSubsetError, match=r"expected 'minilongbench', a folder written by "
                                                     r"`lcp tools minilongbench fit` or a JSON list"):
        rs.subset_sample_ids("tinybench")
