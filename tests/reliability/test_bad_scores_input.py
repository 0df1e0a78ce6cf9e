"""Scores that cannot be compared (issue 22, items 1 and 10): each probe's input rebuilt here.

``lcp longscore`` ranks only models it can compare: a model with 4 of 8 tasks, an ``inf``, a negative score (a
base of -5), a model on 0-1 beside one on 0-100 and a duplicated row with two values are refused, naming the
model and the missing tasks, or the CSV line, model, task and column; ``--common-tasks`` ranks on the tasks every
model has and says so; the JSON is strict. ``lcp minilongbench estimate`` on the released 237-sample subset
refuses a model with 20 of its samples in one category (each category's covered/total named), conflicting
duplicate rows and an empty file; ``--allow-partial`` estimates only the categories covered. Neither command
writes: every input file is byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.benchmarks.minilongbench import MiniLongBench
from lc_pipeline.benchmarks.minilongbench.subset import (
    N_SAMPLES,
    TASK_ORDER,
    released_sample_ids,
    task_of_sample,
)
from lc_pipeline.cli import main

LONG = ("8k", "16k", "32k", "64k", "128k")
TASKS = tuple(f"task{i}" for i in range(8))


def digest(*paths: Path) -> dict[str, str]:
    files = [f for p in paths for f in (sorted(p.rglob("*")) if p.is_dir() else [p]) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def curve(model: str, tasks=TASKS, base: float = 50.0, long: float = 40.0) -> list[tuple]:
    """One row per task at the base and at each long length: ``task, model, length, score``."""
    return [(t, model, lv, base if lv == "base" else long) for t in tasks for lv in ("base", *LONG)]


def longscore(tmp_path: Path, rows: list[tuple], *args: str, raw: str | None = None):
    path = tmp_path / "scores.csv"
    if raw is None:
        pl.DataFrame(rows, schema=["task", "model", "length", "score"], orient="row").write_csv(path)
    else:
        path.write_text(raw)
    before = digest(path)
    res = CliRunner().invoke(main, ["tools", "longscore", "--scores", str(path), *args])
    assert digest(path) == before  # read, never rewritten
    return res


# --------------------------------------------------------------------------- lcp longscore


def test_a_model_scored_on_4_of_8_tasks_is_refused_naming_it_and_its_missing_tasks(tmp_path):
    # The probe: 'b' scored on 4 of the 8 tasks, better on them, was ranked first.
    res = longscore(tmp_path, curve("a") + curve("b", TASKS[:4], long=49.0))
    assert res.exit_code == 1 and res.stdout == ""
    assert "model 'b' has scores for 4 of 8 tasks; missing: task4, task5, task6, task7" in res.stderr
    assert "--common-tasks" in res.stderr


def test_common_tasks_ranks_on_the_tasks_every_model_has_and_says_so(tmp_path):
    res = longscore(tmp_path, curve("a") + curve("b", TASKS[:4], long=49.0), "--common-tasks", "--format", "json")
    assert res.exit_code == 0, res.output
    note = ("--common-tasks: ranked on the 4 task(s) every model has: task0, task1, task2, task3; "
            "dropped: model 'a': task4, task5, task6, task7")
    assert res.stderr.strip() == note
    out = json.loads(res.stdout)
    assert out["common_tasks"] == {"tasks": list(TASKS[:4]), "dropped": {"a": list(TASKS[4:])}}
    assert {r["model"]: r["tasks"] for r in out["models"]} == {"a": list(TASKS[:4]), "b": list(TASKS[:4])}
    # The table says it too, under the ranks.
    table = longscore(tmp_path, curve("a") + curve("b", TASKS[:4], long=49.0), "--common-tasks")
    assert table.exit_code == 0 and table.stdout.strip().splitlines()[-1] == note


def test_an_infinite_score_is_refused_naming_its_line_model_task_and_column(tmp_path):
    rows = curve("a") + [(t, "b", lv, math.inf if (t, lv) == ("task3", "16k") else 40.0)
                         for t, _, lv, _ in curve("b")]
    res = longscore(tmp_path, rows)
    assert res.exit_code == 1 and res.stdout == ""
    # 'a' fills lines 2-49; 'b' task3 at 16k is its 21st row: line 70.
    assert "scores.csv line 70: model 'b', task 'task3', length '16k', column 'score' = inf is not finite" in res.stderr


def test_negative_scores_and_a_base_of_minus_5_are_refused(tmp_path):
    # The probe: an all-negative model ranked first; a base of -5 gave LC -832.
    res = longscore(tmp_path, curve("a") + curve("b", base=-5.0, long=-10.0))
    assert res.exit_code == 1
    assert "line 50: model 'b', task 'task0', length 'base', column 'score' = -5.0 is negative" in res.stderr
    assert "(48 rows like it)" in res.stderr


def test_a_0_to_1_model_beside_a_0_to_100_model_is_refused_naming_both_scales(tmp_path):
    res = longscore(tmp_path, curve("a") + curve("b", base=0.5, long=0.4) + curve("c", base=60.0))
    assert res.exit_code == 1
    assert "different scales: 0-1 (no score above 1): 'b'; 0-100 (scores above 1): 'a' (up to 50), 'c' (up to 60)" \
        in res.stderr
    # A model truly below 1 point of 100 is declared, not guessed.
    ok = longscore(tmp_path, curve("a") + curve("b", base=0.5, long=0.4), "--scale", "100", "--format", "json")
    assert ok.exit_code == 0, ok.output
    assert sorted(r["model"] for r in json.loads(ok.stdout)["models"]) == ["a", "b"]


def test_a_score_above_100_is_refused(tmp_path):
    res = longscore(tmp_path, curve("a", base=150.0))
    assert res.exit_code == 1 and "column 'score' = 150.0 is above 100" in res.stderr


def test_a_duplicated_row_with_another_value_is_refused_naming_both(tmp_path):
    res = longscore(tmp_path, curve("a") + [("task2", "a", "8k", 41.0)])
    assert res.exit_code == 1
    assert ("more than one score for model 'a', task 'task2', length '8k': different scores: 40.0 on line 15, "
            "41.0 on line 50") in res.stderr


def test_empty_input_is_refused(tmp_path):
    assert "the file is empty" in longscore(tmp_path, [], raw="").stderr
    res = longscore(tmp_path, [], raw="task,model,length,score\n")
    assert res.exit_code == 1 and "no score rows below the header" in res.stderr


def test_a_base_of_0_gives_a_null_longscore_and_json_stays_strict(tmp_path):
    res = longscore(tmp_path, curve("zero", base=0.0, long=0.0) + curve("a"), "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    zero = next(r for r in out["models"] if r["model"] == "zero")
    assert zero["avg_long_score"] is None and zero["rank_long_score"] is None
    assert "NaN" not in res.stdout and "Infinity" not in res.stdout
    # A base so close to 0 that LongScore overflows is an error, never Infinity in the JSON.
    tiny = longscore(tmp_path, curve("a", tasks=("t",), base=5e-324, long=100.0), "--format", "json")
    assert tiny.exit_code == 1 and "LongScore is not a finite number" in tiny.stderr and "Infinity" not in tiny.output


# --------------------------------------------------------------------------- lcp minilongbench estimate

# LongBench's official grouping (spec minilongbench.md §5.1): SQA 4, MQA 4, SUM 4, FSL 4, SYN 3, CODE 2.
CATEGORY = {
    **dict.fromkeys(("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh"), "single_doc_qa"),
    **dict.fromkeys(("hotpotqa", "2wikimqa", "musique", "dureader"), "multi_doc_qa"),
    **dict.fromkeys(("gov_report", "qmsum", "multi_news", "vcsum"), "summarization"),
    **dict.fromkeys(("trec", "triviaqa", "samsum", "lsht"), "few_shot"),
    **dict.fromkeys(("passage_count", "passage_retrieval_en", "passage_retrieval_zh"), "synthetic"),
    **dict.fromkeys(("lcc", "repobench-p"), "code"),
}
SUBSET = released_sample_ids()  # the released MiniLongBench's 237 samples


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A MiniLongBench over LongBench's 4,750 samples with the released 237-sample subset (item parameters drawn
    at random: what is checked here is the input, not the fit)."""
    assert set(CATEGORY) == set(TASK_ORDER)
    tasks = np.array([task_of_sample(s)[0] for s in range(N_SAMPLES)])
    rng = np.random.default_rng(0)
    mlb = MiniLongBench(samples=np.arange(N_SAMPLES), tasks=tasks, categories=np.array([CATEGORY[t] for t in tasks]),
                        alpha=rng.normal(size=(N_SAMPLES, 2)), beta=rng.normal(size=N_SAMPLES) * 0.3,
                        subset=np.array(SUBSET), threshold=0.5)
    return mlb.save(tmp_path_factory.mktemp("mlb") / "model")


def estimate(model_dir: Path, tmp_path: Path, rows: list[tuple] | None, *args: str, raw: str | None = None):
    path = tmp_path / "new.csv"
    if raw is None:
        pl.DataFrame(rows, schema=["model", "global_sample", "score"], orient="row").write_csv(path)
    else:
        path.write_text(raw)
    before = digest(path, model_dir)
    res = CliRunner().invoke(main, ["tools", "minilongbench", "estimate", "--model-dir", str(model_dir),
                                    "--scores", str(path), "--mode", "direct", *args])
    assert digest(path, model_dir) == before
    return res


def single_doc_qa_20() -> list[tuple]:
    """The probe: 20 of the 237 subset samples, all of them single-doc QA."""
    sqa = [s for s in SUBSET if CATEGORY[task_of_sample(s)[0]] == "single_doc_qa"]
    return [("new", s, 0.5) for s in sqa[:20]]


def test_an_estimate_from_20_of_237_subset_samples_in_one_category_is_refused(model_dir, tmp_path):
    res = estimate(model_dir, tmp_path, single_doc_qa_20())
    assert res.exit_code == 1 and res.stdout == ""
    assert ("model 'new' covers 20 of 237 subset samples (code 0/49, few_shot 0/43, multi_doc_qa 0/39, "
            "single_doc_qa 20/37, summarization 0/35, synthetic 0/34)") in res.stderr
    assert "needs a score on every subset sample" in res.stderr and "--allow-partial" in res.stderr


def test_allow_partial_estimates_only_the_covered_category_and_prints_the_coverage(model_dir, tmp_path):
    res = estimate(model_dir, tmp_path, single_doc_qa_20(), "--allow-partial")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["new"]
    assert list(out["categories"]) == ["single_doc_qa"] and out["overall"] is None
    assert out["categories"]["single_doc_qa"] == pytest.approx(0.5)
    assert set(out["tasks"]) <= {"narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh"}
    assert out["not_estimated"] == ["code", "few_shot", "multi_doc_qa", "summarization", "synthetic"]
    assert out["coverage"]["covered"] == 20 and out["coverage"]["categories"]["code"] == {"covered": 0, "total": 49}
    assert "--allow-partial: model 'new' covers 20 of 237" in res.stderr and "not estimated: code, few_shot" in res.stderr
    # Below --min-coverage, not even that category: nothing to estimate.
    res = estimate(model_dir, tmp_path, single_doc_qa_20(), "--allow-partial", "--min-coverage", "0.9")
    assert res.exit_code == 1 and "at least 90% of its subset samples" in res.stderr


def test_the_whole_subset_is_estimated_in_every_category(model_dir, tmp_path):
    res = estimate(model_dir, tmp_path, [("new", s, 0.5) for s in SUBSET])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["new"]
    assert len(out["categories"]) == 6 and out["overall"] == pytest.approx(0.5) and res.stderr == ""


def test_conflicting_duplicate_rows_are_refused_naming_the_sample_and_both_values(model_dir, tmp_path):
    rows = [("new", s, 0.5) for s in SUBSET] + [("new", SUBSET[3], 0.9)]
    res = estimate(model_dir, tmp_path, rows)
    assert res.exit_code == 1
    assert f"model 'new', sample {SUBSET[3]} has conflicting scores 0.5 (line 5), 0.9 (line 239)" in res.stderr
    # The same score twice is collapsed, and said.
    same = estimate(model_dir, tmp_path, [("new", s, 0.5) for s in SUBSET] + [("new", SUBSET[3], 0.5)])
    assert same.exit_code == 0, same.output
    assert "1 duplicate row(s) with the same score collapsed" in same.stderr


def test_empty_estimate_input_is_refused(model_dir, tmp_path):
    res = estimate(model_dir, tmp_path, None, raw="model,global_sample,score\n")
    assert res.exit_code == 1 and "no score rows" in res.stderr and res.stdout == ""
    res = estimate(model_dir, tmp_path, None, raw="")
    assert res.exit_code == 1 and "the file is empty" in res.stderr


def test_a_score_outside_0_1_is_refused_naming_its_line(model_dir, tmp_path):
    rows = [("new", s, 0.5) for s in SUBSET]
    rows[7] = ("new", SUBSET[7], math.inf)
    res = estimate(model_dir, tmp_path, rows)
    assert res.exit_code == 1
    assert f"new.csv line 9: model 'new', sample {SUBSET[7]}, score inf: column 'score' is missing or not a finite" \
        in res.stderr
