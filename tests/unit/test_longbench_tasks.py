"""LongBench items through the QA suite are prompted and scored as their task file declares.

Real LongBench records (../shared/data/longbench) become instances at one level (the builders the
instances asset runs, construct/builders.level_batches): each row's prompt is its task's template
(our wording) around the assembled context and the record's input, with the task's max_new_tokens.
Scored on the records' real model outputs (``reference_prediction``), every metric_scores row equals,
record by record, what `lcp score --metric longbench:<task>` gives for the same output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from lc_pipeline import schemas
from lc_pipeline.cli import main
from lc_pipeline.config import load_config
from lc_pipeline.construct.builders import LevelInputs, level_batches
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.sources.loader import load_source
from lc_pipeline.tasks import catalog_for

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
ROOT = SHARED / "longbench"
pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=f"shared LongBench data not found at {ROOT} "
                                                          "(set LCP_SHARED_DATA to the shared/data directory)")
LEVEL = "24k"  # every shared record's context fits (the longest is ~19.7k tokens)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("lb")
    (root / "c.yaml").write_text(yaml.safe_dump({
        "name": "lb", "sources": [{"name": "lb", "kind": "longbench", "paths": str(ROOT)}],
        "lengths": [LEVEL], "base_lengths": [LEVEL], "long_lengths": [LEVEL], "depths": [0.5],
        "items_per_length": 1000, "hard_negatives_per_item": 0}))
    config = load_config(root / "c.yaml")
    loaded = load_source(config.sources[0])
    items = loaded.items.filter(pl.col("item_id").is_in(_fitting(loaded.items, loaded.documents)))
    config = config.replace(items_per_length=items.height)
    empty = {t: schemas.empty(t) for t in ("passages", "hard_negatives", "confusing_facts", "replacement_rules")}
    inputs = LevelInputs(items, loaded.documents, empty["passages"], empty["hard_negatives"],
                         empty["confusing_facts"], empty["replacement_rules"], LEVEL, config,
                         TokenCounter.load("cl100k_base"), catalog_for(config))
    return config, pl.concat(list(level_batches(inputs)))


def _fitting(items: pl.DataFrame, documents: pl.DataFrame) -> list[str]:
    """Items whose evidence (all of a record's passages) fits the level with room for fillers."""
    counter = TokenCounter.load("cl100k_base")
    size = {d: counter.count(t) for d, t in documents.select("doc_id", "text").iter_rows()}
    return [i for i, ev in items.select("item_id", "evidence_doc_ids").iter_rows() if sum(size[d] for d in ev) < 20_000]


def _records() -> dict[str, dict]:
    out = {}
    for path in sorted(ROOT.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                out[f"lb-{rec['dataset']}-{rec['_id']}"] = rec
    return out


def test_longbench_items_are_prompted_with_their_tasks_template_and_answer_length(built):
    config, rows = built
    catalog = catalog_for(config)
    assert set(rows["benchmark"]) == {"longbench"}
    assert rows.height == len(_records()) == 136 and rows["task"].n_unique() == 12  # every shared record
    for row in rows.iter_rows(named=True):
        spec = catalog.resolve("longbench", row["task"])
        assert row["prompt"] == QAPrompt(spec.prompt, spec.max_new_tokens).render(row["context"], row["question"])
        assert row["max_new_tokens"] == spec.max_new_tokens
        assert row["prompt"] != QAPrompt.default(config.max_new_tokens).render(row["context"], row["question"])
    trec = rows.filter(pl.col("task") == "trec")
    assert trec.height and all(len(c) > 1 for c in trec["all_classes"])  # the label set travels for its metric


def test_metric_scores_equal_lcp_score_longbench_record_by_record(built, tmp_path):
    config, rows = built
    records = _records()
    generations = pl.DataFrame({
        "generation_id": [f"g-{i}" for i in rows["instance_id"]],
        "instance_id": rows["instance_id"],
        "output": [records[i]["reference_prediction"] for i in rows["item_id"]],
    })
    scores = score_frame(generations, rows, catalog_for(config))
    assert set(scores["metric"]) == {"longbench"} and scores.height == rows.height
    ours = dict(zip(scores["item_id"], scores["score"], strict=True))
    runner = CliRunner()
    for task, group in rows.group_by("task"):
        path = tmp_path / f"{task[0]}.jsonl"
        path.write_text("".join(json.dumps({"_id": i, "prediction": records[i]["reference_prediction"],
                                            "answers": records[i]["answers"],
                                            "all_classes": records[i]["all_classes"]}) + "\n"
                                for i in group["item_id"]))
        result = runner.invoke(main, ["tools", "score", str(path), "--metric", f"longbench:{task[0]}"])
        assert result.exit_code == 0, result.output
        for line in result.stdout.splitlines():
            rec = json.loads(line)
            assert ours[rec["_id"]] == rec["score"], (task[0], rec["_id"])  # bit for bit
