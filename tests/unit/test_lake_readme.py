"""The example queries of docs/results.md (the Query section, moved there from the README: issue 32) run as written,
on a lake with every table they read, and give the answers the lake holds."""

from __future__ import annotations

import re

import polars as pl
import pytest

from conftest import REPO
from lc_pipeline.lake import query
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

TARGET = {"1k": 1024, "2k": 2048, "16k": 16384}  # "16k" sorts before "2k" as text: the queries order by tokens
MODEL = "smollm2-135m"


QUERY_GUIDE = REPO / "docs" / "results.md"


def readme_queries() -> list[str]:
    """Every `lcp query "..."` of the guide's Query section (up to the next section heading)."""
    text = QUERY_GUIDE.read_text(encoding="utf-8")
    start = text.index("## Query\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else len(text)]
    return re.findall(r'lcp results query "(.*?)"', section, flags=re.DOTALL)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Two items at three lengths, each item plain + CFI at two depths; the model gets worse with length."""
    lake = tmp_path_factory.mktemp("readme") / "data_lake"
    for li, length in enumerate(TARGET):
        rows = [(f"{length}-{item}-{variant}-{depth}", item, variant, depth)
                for item in ("a", "b") for variant in ("plain", "cfi") for depth in (0.0, 1.0)]
        ids = [r[0] for r in rows]
        write_parquet_atomic(pl.DataFrame({
            "instance_id": ids, "item_id": [r[1] for r in rows], "variant": [r[2] for r in rows],
            "depth": [r[3] for r in rows], "target_tokens": [TARGET[length]] * len(rows),
        }), partition_path(lake, "instances", {"length": length}))
        # plain rows score 1 at 1k, then lose 0.5 per step; CFI rows score 0.
        score = [max(0.0, 1.0 - 0.5 * li) if r[2] == "plain" else 0.0 for r in rows]
        write_parquet_atomic(pl.DataFrame({
            "score_id": ids, "generation_id": [f"g-{i}" for i in ids], "instance_id": ids,
            "item_id": [r[1] for r in rows], "depth": [r[3] for r in rows], "metric": ["subem"] * len(rows),
            "score": score,
        }), partition_path(lake, "metric_scores", {"length": length, "model": MODEL}))
        write_parquet_atomic(pl.DataFrame({
            "generation_id": [f"g-{i}" for i in ids], "rubric": ["helmet_longqa"] * len(rows),
            "parse_status": ["ok"] * (len(rows) - 1) + ["no_score"],
            "score": score[:-1] + [None],
        }), partition_path(lake, "judge_scores", {"length": length, "model": MODEL}))
        cut = length == "16k"  # a 16k prompt in an 8k window: every prompt truncated by 8k tokens
        write_parquet_atomic(pl.DataFrame({
            "generation_id": [f"g-{i}" for i in ids], "instance_id": ids, "truncated": [cut] * len(rows),
            "truncation_policy": ["middle"] * len(rows), "prompt_tokens": [min(TARGET[length], 8192)] * len(rows),
            "original_prompt_tokens": [TARGET[length]] * len(rows),
            # the last prompt of each length was not sent (policy skip); the others answered
            "status": ["answered"] * (len(rows) - 1) + ["skipped"],
        }), partition_path(lake, "generations", {"length": length, "model": MODEL}))
    write_parquet_atomic(pl.DataFrame({"model": [MODEL], "metric": ["subem"], "long_score": [-50.0]}),
                         partition_path(lake, "leaderboard", {}))
    return lake


def front_door_queries() -> list[str]:
    """The README's own short query block (the first queries of the guide, repeated there)."""
    return re.findall(r'lcp results query "(.*?)"', (REPO / "README.md").read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_readme_queries_are_the_guides_and_run(lake):
    front = front_door_queries()
    assert front and set(front) <= set(readme_queries())
    for sql in front:
        cols, rows = query(lake, sql)
        assert cols and rows, sql


def test_the_readme_has_its_queries():
    assert len(readme_queries()) == 9  # two basics, the EXPLAIN, six questions


@pytest.mark.parametrize("index", range(9))
def test_each_readme_query_runs_and_returns_rows(lake, index):
    cols, rows = query(lake, readme_queries()[index])
    assert cols and rows


def test_readme_questions_give_the_expected_answers(lake):
    _, _, explain, degradation, depth, cfi, judge, truncation, statuses = readme_queries()
    plan = "\n".join(r[1] for r in query(lake, explain)[1])
    assert "Scanning Files: 1/3" in plan
    # Plain and CFI rows pooled: 50 at 1k, 25 at 2k, 0 at 16k, in token order.
    assert [r[2:] for r in query(lake, degradation)[1]] == [("1k", 50.0, 0.0), ("2k", 25.0, -25.0),
                                                            ("16k", 0.0, -50.0)]
    assert [r[2] for r in query(lake, depth)[1]][:3] == ["1k", "2k", "16k"]
    assert [(r[2], r[3]) for r in query(lake, cfi)[1]] == [("cfi", 0.0), ("plain", 50.0)]
    ((model, rubric, metric, n, pearson, agreement),) = query(lake, judge)[1]
    assert (rubric, metric, n, agreement) == ("helmet_longqa", "subem", 3 * 8 - 3, 1.0)
    assert {r[1]: (r[3], r[4], r[5]) for r in query(lake, truncation)[1]} == {
        "1k": (0, 8, None), "2k": (0, 8, None), "16k": (8, 8, 8192.0)}
    assert {(r[1], r[2]): (r[3], r[4]) for r in query(lake, statuses)[1]} == {
        (length, status): (n, TARGET[length]) for length in ("1k", "2k", "16k")
        for status, n in (("answered", 7), ("skipped", 1))}
