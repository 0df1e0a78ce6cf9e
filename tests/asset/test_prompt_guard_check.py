"""The prompt-format guard as a blocking asset check on generations (assets/prompt_guard.py), with SmolLM2 really
generating: the built-in model passes and its partition is scored; a registered model on the same GGUF weights
whose chat template file writes the BOS twice fails, naming the model and a row, and its run never scores it.

Kept small: one short QA instance (two demo documents, ~200 tokens) written where the pipeline reads instances,
max_new_tokens 4, so each run is a model load from the conversion cache and one short prompt.
"""

from __future__ import annotations

import hashlib

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline import schemas
from lc_pipeline.construct.prompts import build_prompt, format_context
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.definitions import MODEL_JOB, build_pipeline
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.parquet_io import partition_path
from lc_pipeline.sources.demo_corpus import build_demo_corpus

pytestmark = pytest.mark.slow  # loads the real model

LEVEL = "1k"
DOUBLED_BOS = ("{{ bos_token }}{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + "
               "'\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def one_instance(level: str) -> pl.DataFrame:
    docs, items = build_demo_corpus(source="demo", n_entities=20, seed=3)
    item = items.row(0, named=True)
    text = {d["doc_id"]: (d["title"], d["text"]) for d in docs.iter_rows(named=True)}
    order = item["evidence_doc_ids"][:2]
    context = format_context(text[d] for d in order)
    prompt = build_prompt(context, item["question"])
    counter = TokenCounter.load("cl100k_base")
    row = {
        "instance_id": hashlib.sha256(f"{level}/{item['item_id']}".encode()).hexdigest()[:16],
        "item_id": item["item_id"], "source": "demo", "suite": "qa", "benchmark": "qa", "task": item["task"],
        "category": item["category"], "language": "en", "variant": "plain", "insertions": [],
        "replacement_rule_ids": [], "depth": 0.0, "evidence_depths": [0.0], "question": item["question"],
        "answers": item["answers"], "answer_keywords": item["answer_keywords"],
        "evidence_doc_ids": item["evidence_doc_ids"], "context_doc_ids": order, "n_hard_negatives": 0,
        "n_filler_documents": 0, "context": context, "prompt": prompt, "tokenizer": counter.name,
        "target_tokens": 1024, "input_tokens": counter.count(prompt), "context_tokens": counter.count(context),
        "max_new_tokens": 4,
    }
    return schemas.conform(pl.DataFrame([row], schema=schemas.INSTANCES), "instances")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    config = {"name": "guard", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 20, "seed": 3}],
              "lengths": [LEVEL], "base_lengths": [LEVEL], "long_lengths": [LEVEL], "depths": [0.0],
              "items_per_length": 1, "max_new_tokens": 4, "models": ["smollm2-135m"]}
    (root / "c.yaml").write_text(yaml.safe_dump(config))
    (root / "double_bos.jinja").write_text(DOUBLED_BOS)
    builtin = BUILTIN_MODELS["smollm2-135m"]
    (root / "models.yaml").write_text(yaml.safe_dump({"smollm2-double-bos": {
        "backend": builtin.backend, "model_id": builtin.model_id, "gguf_file": builtin.gguf_file,
        "max_model_len": builtin.max_model_len, "dtype": builtin.dtype, "batch_size": 1,
        "chat_template_file": "double_bos.jinja"}}))
    settings = settings_for(root, root / "c.yaml")
    path = partition_path(settings.lake_dir, "instances", {"length": LEVEL})
    path.parent.mkdir(parents=True)
    one_instance(LEVEL).write_parquet(path)
    return build_pipeline(settings)


def guard_evaluation(result) -> dg.AssetCheckEvaluation:
    (evaluation,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "prompt_format"]
    return evaluation


def test_the_builtin_model_passes_the_guard_and_its_partition_is_scored(project):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, ["smollm2-135m"])
        # As the runner materializes a model's partition: the check comes with its asset.
        result = dg.materialize(project.assets, selection=["generations", "metric_scores"],
                                partition_key=str(length_model_key(LEVEL, "smollm2-135m")),
                                resources=project.resources, instance=instance)
    evaluation = guard_evaluation(result)
    meta = {k: v.value for k, v in evaluation.metadata.items()}
    assert evaluation.passed, meta["verdict"]
    assert meta["template_source"] == "model" and meta["rows_checked"] == 1
    assert meta["bos_expected"] == {"chat": 3} and meta["bos_found"] == {"chat": {"3": 1}}
    assert meta["question_checked_in"] == one_instance(LEVEL)["instance_id"][0]
    assert result.asset_materializations_for_node("metric_scores")


def test_a_template_that_doubles_the_bos_fails_the_guard_and_the_model_job_never_scores_it(project):
    registry = ModelRegistry(project.settings.models_file)
    assert registry.get("smollm2-double-bos").chat_template_file.endswith("double_bos.jinja")
    job = project.defs.resolve_job_def(MODEL_JOB)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, ["smollm2-double-bos"])
        result = job.execute_in_process(partition_key=str(length_model_key(LEVEL, "smollm2-double-bos")),
                                        instance=instance, raise_on_error=False)
        scored = instance.fetch_materializations(dg.AssetKey("metric_scores"), limit=1).records
    evaluation = guard_evaluation(result)
    assert not evaluation.passed
    assert evaluation.description.startswith("model 'smollm2-double-bos': doubled BOS: the template "
                                             "(file:double_bos.jinja) starts every prompt with 3 BOS ids")
    assert f"example row: instance_id {one_instance(LEVEL)['instance_id'][0]!r}" in evaluation.description
    meta = {k: v.value for k, v in evaluation.metadata.items()}
    assert meta["template_source"] == "file:double_bos.jinja" and meta["bos_found"] == {"chat": {"4": 1}}
    assert meta["example"]["prompt_start"].startswith("<|im_start|><|im_start|><|im_start|>user\n")
    # Generated, then blocked: the run failed and metric_scores never ran for the partition.
    assert result.asset_materializations_for_node("generations")
    assert not result.success and not scored
    assert not partition_path(project.settings.lake_dir, "metric_scores",
                              {"length": LEVEL, MODEL_DIM: "smollm2-double-bos"}).exists()


def test_lcp_stops_at_the_failed_guard_and_prints_its_verdict(project, capfd):
    from lc_pipeline.runner import Runner

    # The previous test's generation is in the lake's store: this run reuses it, then checks it again.
    with dg.instance_for_test() as instance:
        runner = Runner(project, instance, echo=print)
        with pytest.raises(Exception, match=r"blocking asset check failed(.|\n)*generations: prompt_format"):
            runner.run(["smollm2-double-bos"], leaderboard=False)
        assert not instance.fetch_materializations(dg.AssetKey("metric_scores"), limit=1).records
    printed = capfd.readouterr()
    assert "model 'smollm2-double-bos': doubled BOS" in printed.out + printed.err
