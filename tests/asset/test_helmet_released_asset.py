"""The packaged `helmet-released` config builds all seven HELMET categories at two levels (issue 30, acceptance 5),
through the Dagster graph: $LCP_DATA/helmet/ holds tests/fixtures/helmet_released/data (HELMET's released
layout at 8k and 16k: kilt/, msmarco/, json_kv/, ruler/, alce/, our own text) and prompts/ (ALCE's prompt files, our
text); the categories HELMET builds at run time (LongQA, Summ, ICL) read the constructed config's fixtures (tests/fixtures/helmet). What small
fixtures force, stated here: lengths 8k and 16k; each released source reads those two levels; a test task file
scales the per-level counts of ALCE (6 / 12 passages) and ICL (40 / 80 demonstrations) down; the long-document
filters take documents of 16k tokens; two items per constructed dataset."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.runner import Runner
from lc_pipeline.tasks.catalog import load_catalog

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RELEASED = FIXTURES / "helmet_released" / "data"
SCALED = {**{t: {"8k": 6, "16k": 12} for t in ("asqa", "qampari")},
          **{t: {"8k": 40, "16k": 80} for t in ("trec_coarse", "trec_fine", "nlu", "banking77", "clinc150")}}
LONG_DOCUMENT_SOURCES = ("narrativeqa", "infbench_qa", "infbench_mc", "infbench_sum", "multi_lexsum")
CATEGORIES = {"Synthetic recall", "RAG", "Re-rank", "Cite", "LongQA", "Summ", "ICL"}


def data_folder(root: Path) -> Path:
    """$LCP_DATA: helmet/data/ as HELMET's download script leaves it, the datasets built at run time beside it."""
    helmet = root / "helmet"
    (helmet / "data").mkdir(parents=True)
    for sub in ("kilt", "msmarco", "json_kv", "ruler", "alce"):
        (helmet / "data" / sub).symlink_to(RELEASED / sub)
    (helmet / "prompts").symlink_to(RELEASED.parent / "prompts")
    (helmet / "data" / "infbench").symlink_to(FIXTURES / "helmet" / "infbench")  # ∞Bench Sum's key points
    for sub in ("narrativeqa", "infbench", "multi_lexsum", "icl"):
        (helmet / sub).symlink_to(FIXTURES / "helmet" / sub)
    return root


def scaled_task_file(tmp_path: Path) -> str:
    catalog = load_catalog()
    tasks = [{"name": name, "builder": {"name": "helmet", "options": {**catalog.get(f"helmet/{name}").builder.options,
                                                                      "per_level": per_level}}}
             for name, per_level in SCALED.items()]
    path = tmp_path / "scaled.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "helmet", "tasks": tasks}))
    return str(path)


def test_the_helmet_released_config_builds_all_seven_categories_at_8k_and_16k(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(data_folder(tmp_path / "lcp_data")))
    raw = yaml.safe_load((PACKAGED_CONFIGS / "helmet-released.yaml").read_text())
    for source in raw["sources"]:
        if source["kind"] == "helmet_released":
            source["levels"] = ["8k", "16k"]
        if source["name"] in LONG_DOCUMENT_SOURCES:
            source["min_document_tokens"] = 16_384
    raw.update(lengths=["8k", "16k"], task_files=[scaled_task_file(tmp_path)])
    raw["helmet"]["n_per_task"] = 2
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    with dg.instance_for_test() as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])

    for level in ("8k", "16k"):
        rows = pl.read_parquet(settings.lake_dir / "instances" / f"length={level}" / "data.parquet")
        assert sorted(rows["task"].unique()) == sorted(raw["released"]["tasks"])  # all 21 datasets
        assert set(rows["category"]) == CATEGORIES and set(rows["benchmark"]) == {"helmet"}
        by_task = {t: g for (t,), g in rows.group_by("task")}
        # The released datasets: every kept record of the level's file, its context as released, its level.
        for task, count in {"nq": 6, "triviaqa": 6, "hotpotqa": 6, "popqa": 4, "msmarco": 6, "json_kv": 3,
                            "ruler_mk_needle": 3, "ruler_mk_uuid": 3, "ruler_mv": 3, "asqa": 3, "qampari": 3}.items():
            got = by_task[task]
            assert got.height == count, (task, level)
            for fields, context, prompt in got.select("record_fields", "context", "prompt").iter_rows():
                fields = json.loads(fields)
                assert fields["level"] == level and context in prompt
        rag_file = RELEASED / "kilt" / f"nq-dev-multikilt_1000_k{ {'8k': 50, '16k': 105}[level] }_dep6.jsonl"
        records = [json.loads(line) for line in rag_file.read_text().splitlines()]
        expected = {"\n\n".join(f"Document (Title: {c['title']}): {c['text']}" for c in r["ctxs"]) for r in records}
        assert set(by_task["nq"]["context"]) == expected
        for task in ("asqa", "qampari"):  # ALCE's one file: the level's first n passages, IDs 1..n
            for fields, context in by_task[task].select("record_fields", "context").iter_rows():
                assert len(json.loads(fields)["passages"]) == SCALED[task][level]
                assert context.count("Document [") == SCALED[task][level]
        # The categories built at run time: the demonstrations, the cut documents.
        for task in ("trec_coarse", "trec_fine", "nlu", "banking77", "clinc150"):
            assert all(p.count("\nlabel: ") == SCALED[task][level] for p in by_task[task]["prompt"])
        for task in LONG_DOCUMENT_SOURCES:
            assert by_task[task].height >= 1
