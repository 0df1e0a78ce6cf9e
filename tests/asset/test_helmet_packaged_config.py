"""The packaged `helmet` config builds all 21 HELMET datasets from files in their released layouts (issue 19,
acceptance 1, end to end): $LCP_DATA points at tests/fixtures, whose helmet/ folder mirrors the layout the config
documents (our own text, a few records per dataset). The config runs as packaged except for what small fixtures
force, stated here: lengths 8k and 16k only; a test task file scales the per-level counts down (RAG 12 / 24
passages, MS MARCO 10 / 20, ALCE 6 / 12, ICL 40 / 80 demonstrations: the spec's table asks 50 / 105, 50 / 130,
30 / 75 and 360-510 / 720-1020, more than the fixtures hold); the long-document filters take documents of 16k
tokens (the fixtures' books are ~17k tokens, HELMET keeps > 64k / 128k); two items per dataset."""

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
SCALED = {  # task -> per_level at 8k and 16k (the fixtures are small)
    **{t: {"8k": 12, "16k": 24} for t in ("nq", "triviaqa", "popqa", "hotpotqa")},
    "msmarco": {"8k": 10, "16k": 20},
    **{t: {"8k": 6, "16k": 12} for t in ("asqa", "qampari")},
    **{t: {"8k": 40, "16k": 80} for t in ("trec_coarse", "trec_fine", "nlu", "banking77", "clinc150")},
}
LONG_DOCUMENT_SOURCES = ("narrativeqa", "infbench_qa", "infbench_mc", "infbench_sum", "multi_lexsum")


def scaled_task_file(tmp_path) -> str:
    catalog = load_catalog()
    tasks = []
    for name, per_level in SCALED.items():
        options = {**catalog.get(f"helmet/{name}").builder.options, "per_level": per_level}
        tasks.append({"name": name, "builder": {"name": "helmet", "options": options}})
    path = tmp_path / "scaled.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "helmet", "tasks": tasks}))
    return str(path)


def test_the_packaged_helmet_config_builds_every_dataset_at_8k_and_16k_from_the_released_layouts(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(FIXTURES))
    raw = yaml.safe_load((PACKAGED_CONFIGS / "helmet.yaml").read_text())
    for source in raw["sources"]:
        if source["name"] in LONG_DOCUMENT_SOURCES:
            source["min_document_tokens"] = 16_384
    raw.update(lengths=["8k", "16k"], base_lengths=["8k"], long_lengths=["16k"], task_files=[scaled_task_file(tmp_path)],
               retrieval_top_k=400, hard_negatives_per_item=200)
    raw["helmet"]["n_per_task"] = 2
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    with dg.instance_for_test() as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])

    # Sources with their own contexts (ALCE, MS MARCO, books, labelled texts) stay out of the retrieval corpus.
    passages = pl.read_parquet(settings.lake_dir / "passages" / "data.parquet")
    assert set(passages["doc_id"].str.split("-").list.first()) == {"nq", "triviaqa", "hotpotqa", "popqa"}

    for level, target in (("8k", 8192), ("16k", 16384)):
        rows = pl.read_parquet(settings.lake_dir / "instances" / f"length={level}" / "data.parquet")
        assert sorted(rows["task"].unique()) == sorted(raw["helmet"]["tasks"])  # all 21 datasets
        assert set(rows["benchmark"]) == {"helmet"} and (rows["input_tokens"] <= target).all()
        assert set(rows["category"]) == {"Synthetic recall", "RAG", "Re-rank", "Cite", "LongQA", "Summ", "ICL"}
        by_task = {t: g for (t,), g in rows.group_by("task")}
        for task in ("nq", "triviaqa", "popqa"):  # one gold at 6 depths among k - 1 distractors
            assert (by_task[task]["n_hard_negatives"] == SCALED[task][level] - 1).all()
            assert by_task[task]["depth"].n_unique() == 6
        assert (by_task["hotpotqa"]["n_hard_negatives"] == SCALED["hotpotqa"][level] - 2).all()
        for task in ("asqa", "qampari"):  # the question's top-k passages, cited by their IDs 1..k
            for fields in by_task[task]["record_fields"]:
                assert len(json.loads(fields)["passages"]) == SCALED[task][level]
        for task in ("trec_coarse", "trec_fine", "nlu", "banking77", "clinc150"):
            for prompt in by_task[task]["prompt"]:
                assert prompt.count("\nlabel: ") == SCALED[task][level]  # the demonstrations, then the test text
        catalog = load_catalog()
        for task in LONG_DOCUMENT_SOURCES:  # the document cut to the level less the buffer and the answer (§2)
            spec = catalog.get(f"helmet/{task}")
            budget = target - spec.max_new_tokens
            tokens = by_task[task]["input_tokens"]
            assert ((tokens > budget - spec.builder.options["buffer"]) & (tokens <= budget)).all(), (task, tokens)
