"""The LLM judge end to end against a real OpenAI-compatible server: llama-cpp-python's server on
127.0.0.1 serving SmolLM2-135M-Instruct both as the evaluated model (through the openai
backend) and as the judge. The demo benchmark is the one `lcp plan` and `lcp demo` built (conftest's
``cli_demo_project``, shared with test_cli: two short levels, 512 and 1k, one depth, two items each), copied;
in the copy the pipeline generates with the served model and judges; a rerun asks the server nothing (the reply
cache), the verdicts join the leaderboard, and the API key appears nowhere it could be read.

A 135M model is a weak judge: asked freely (Loong's rubric), it rarely ends with the
``[[score]]`` line, and those verdicts are counted as parse failures; with the server's JSON
mode it answers HELMET's rubric in JSON. The parse rates are printed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from built_lakes import CONFIG_FILE, copy_project
from click.testing import CliRunner
from conftest import settings_for
from servers import llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline.cli import main
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry
from lc_pipeline.partitions import length_model_key
from lc_pipeline.resources.judge import JudgeCache, JudgeResource
from lc_pipeline.runner import Runner
from lc_pipeline.score.judge import PARSE_STATUSES

pytestmark = [*needs_llama_server, pytest.mark.slow]

SLUG = "smollm2-served"
SECRET = "sk-test-judge-secret-0123456789"
@pytest.fixture(scope="module")
def server_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        yield url


@pytest.fixture(scope="module")
def world(tmp_path_factory, server_url, cli_demo_project):
    root, _ = copy_project(cli_demo_project, tmp_path_factory.mktemp("judge") / "project")
    settings = settings_for(root, root / CONFIG_FILE, lake="data_lake")
    # The evaluated model: the same GGUF, served; greedy (the server's default repeat penalty off).
    ModelRegistry(settings.models_file).add(dataclasses.replace(
        BUILTIN_MODELS["smollm2-135m"], slug=SLUG, backend="openai", api_model="smollm2", base_url=server_url,
        max_model_len=2048, extra_body={"repeat_penalty": 1.0}))
    with dg.instance_for_test(temp_dir=str(settings.dagster_home)) as instance:
        pipeline = build_pipeline(settings)
        runner = Runner(pipeline, instance, echo=lambda m: None)
        runner.run(models=[])  # the benchmark: already built in the copy
        runner.register_models([SLUG])
        yield settings, pipeline, instance


def judge_resource(settings, server_url, **changes) -> JudgeResource:
    return JudgeResource(base_url=server_url, model="smollm2", max_tokens=96, max_concurrency=2,
                         cache_path=str(settings.lake_dir / "_cache" / "judge.sqlite"), **changes)


def judge_run(world, resource, selection, level="512"):
    settings, pipeline, instance = world
    result = dg.materialize(pipeline.assets, selection=selection, partition_key=length_model_key(level, SLUG),
                            resources={**pipeline.resources, "judge": resource}, instance=instance)
    assert result.success
    [mat] = [m for m in result.get_asset_materialization_events() if m.asset_key == dg.AssetKey("judge_scores")]
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    frame = pl.read_parquet(settings.lake_dir / "judge_scores" / f"length={level}" / f"model={SLUG}" / "data.parquet")
    return meta, frame


def test_judge_real_generations_then_rerun_from_the_cache(world, server_url, monkeypatch, capfd):
    settings, pipeline, instance = world
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the server ignores it; it must not be recorded anywhere
    meta, first = judge_run(world, judge_resource(settings, server_url), ["generations", "judge_scores"])
    generations = pl.read_parquet(settings.lake_dir / "generations" / "length=512" / f"model={SLUG}" / "data.parquet")
    assert generations.height == 2 and set(generations["backend"]) == {"openai"}

    # Every QA-suite generation judged with Loong's 1-100 rubric; raw reply, parsed fields, status kept.
    assert first.height == generations.height and set(first["rubric"]) == {"loong"}
    assert set(first["generation_id"]) == set(generations["generation_id"])
    assert first["raw"].str.len_chars().min() > 0 and set(first["parse_status"]) <= set(PARSE_STATUSES)
    ok = first["parse_status"] == "ok"
    assert (first["score"].is_not_null() == ok).all() and first.filter(ok)["score"].is_between(0, 1).all()
    assert meta["server_calls"] == first.height and meta["cache_hits"] == 0
    assert meta["parse_failures"] == int((~ok).sum())
    report = [f"loong rubric, free replies: parse rate {meta['parse_rate']:.2f}; statuses {meta['parse_statuses']}"]

    # A rerun asks the server nothing: every reply comes from the cache, the rows are the same.
    meta2, second = judge_run(world, judge_resource(settings, server_url), ["judge_scores"])
    assert meta2["server_calls"] == 0 and meta2["cache_hits"] == first.height
    assert second.equals(first)
    report.append(f"rerun: {meta2['server_calls']} server calls, {meta2['cache_hits']} cached replies")

    # HELMET's long-QA rubric with the server's JSON mode: new questions, so new calls.
    json_judge = judge_resource(settings, server_url, json_mode=True, rubric_overrides={"qa/*": "helmet_longqa"})
    meta3, third = judge_run(world, json_judge, ["judge_scores"])
    assert set(third["rubric"]) == {"helmet_longqa"} and meta3["server_calls"] == third.height
    report.append(f"helmet_longqa rubric, JSON mode: parse rate {meta3['parse_rate']:.2f}; "
                  f"statuses {meta3['parse_statuses']}; mean score {meta3.get('mean_score_helmet_longqa')}")
    assert meta3["parse_rate"] > 0
    assert len(JudgeCache(settings.lake_dir / "_cache" / "judge.sqlite")) == first.height + third.height

    # The key is in no table, cache, metadata, event log or console output.
    files = [*settings.lake_dir.rglob("*"), *Path(instance.root_directory).rglob("*")]
    assert [p for p in files if p.is_file() and SECRET.encode() in p.read_bytes()] == []
    assert SECRET not in repr([meta, meta2, meta3])
    out, err = capfd.readouterr()
    assert SECRET not in out + err
    with capfd.disabled():  # the parse rates, for the record (-s shows them)
        print("\n" + "\n".join(report))


def test_judge_scores_join_the_leaderboard(world, server_url):
    settings, pipeline, instance = world
    json_judge = judge_resource(settings, server_url, json_mode=True, rubric_overrides={"qa/*": "helmet_longqa"})
    for level in ("512", "1k"):  # LongScore needs the base and the long length
        judge_run(world, json_judge, ["generations", "metric_scores", "judge_scores"], level)
    for selection, key in ((["prior_knowledge", "long_scores"], SLUG), (["leaderboard"], None)):
        assert dg.materialize(pipeline.assets, selection=selection, partition_key=key, resources=pipeline.resources,
                              instance=instance).success
    board = pl.read_parquet(settings.lake_dir / "leaderboard" / "data.parquet").filter(pl.col("model") == SLUG)
    assert {"subem", "judge:helmet_longqa"} <= set(board["metric"])
    row = board.filter(pl.col("metric") == "judge:helmet_longqa").row(0, named=True)
    assert 0 <= row["old_metric"] <= 100

    # docs/results.md's judge-vs-metric agreement, as `lcp results query` prints it from this lake.
    sql = ("select j.model, j.rubric, m.metric, count(*) as n, round(corr(j.score, m.score), 3) as pearson, "
           "round(avg(((j.score >= 0.5) = (m.score >= 0.5))::int), 3) as agreement "
           "from judge_scores j join metric_scores m using (generation_id, length, model) "
           "where j.parse_status = 'ok' group by all order by all")
    result = CliRunner().invoke(main, ["results", "query", "--lake", str(settings.lake_dir), "--format", "json", sql])
    assert result.exit_code == 0, result.output
    agreement = [r for r in json.loads(result.stdout) if r["model"] == SLUG and r["rubric"] == "helmet_longqa"]
    assert agreement and {r["metric"] for r in agreement} >= {"subem"}
    assert all(r["n"] >= 1 and 0 <= r["agreement"] <= 1 for r in agreement)
