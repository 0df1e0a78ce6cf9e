"""Part of a config, to try it out (config ``only``; ``lcp run --tasks T,... --limit N``, issue 32): the selection is
checked when the config loads, is part of the config's fingerprint, and narrows each level's instance frames to the
selected tasks and the first N instances of each (task, variant), counting what it leaves out."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline.config import ConfigError, RunSelection, load_config, settings_config
from lc_pipeline.construct.run_selection import Narrowed, narrowed
from lc_pipeline.fingerprints import instances_fingerprint
from lc_pipeline.settings import Settings


def frame(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame({"instance_id": [f"i{n}" for n in range(len(rows))], "task": [t for t, _ in rows],
                         "variant": [v for _, v in rows]})


def test_no_selection_passes_every_frame_through_unchanged():
    frames = [frame([("a", "plain")] * 3), frame([("b", "plain")])]
    assert [f.height for f in narrowed(frames, None)] == [3, 1]


def test_the_selection_keeps_the_first_n_instances_of_each_selected_task_and_variant_and_counts_the_rest():
    only = RunSelection(tasks=("hotpotqa", "trec"), limit=2)
    record = Narrowed(only)
    frames = [frame([("hotpotqa", "plain")] * 3 + [("qasper", "plain")] * 2),
              frame([("trec", "plain"), ("hotpotqa", "cfi"), ("hotpotqa", "cfi"), ("hotpotqa", "cfi")])]
    kept = pl.concat(list(narrowed(frames, record)))
    assert kept.group_by("task", "variant").len().sort("task", "variant").rows() == [
        ("hotpotqa", "cfi", 2), ("hotpotqa", "plain", 2), ("trec", "plain", 1)]
    assert kept["instance_id"].to_list()[:2] == ["i0", "i1"]  # the first ones, in the builders' order
    meta = record.metadata()
    assert meta["kept"] == {"hotpotqa": 4, "trec": 1}
    assert meta["left_out"] == {"hotpotqa": 2, "qasper": 2}
    assert meta["selected_tasks_without_instances"] == []


def test_a_selected_task_the_level_does_not_build_is_named_in_the_record():
    only = RunSelection(tasks=("trec",))
    record = Narrowed(only)
    assert list(narrowed([frame([("hotpotqa", "plain")])], record)) == []
    assert record.metadata()["selected_tasks_without_instances"] == ["trec"]


def test_an_unknown_task_or_a_limit_below_one_is_refused_when_the_config_loads():
    with pytest.raises(ConfigError, match=r"only.tasks \(--tasks\): unknown \['hotpot'\].*'hotpotqa'"):
        load_config("longbench", only=RunSelection(tasks=("hotpot",)))
    with pytest.raises(ConfigError, match="only.limit must be >= 1"):
        load_config("longbench", only=RunSelection(limit=0))


def test_a_selection_is_part_of_the_instances_fingerprint_and_no_selection_keeps_it_as_it_was():
    whole = load_config("demo")
    assert load_config("demo", only=None).only is None
    part = load_config("demo", only=RunSelection(limit=1))
    assert instances_fingerprint(part) != instances_fingerprint(whole)
    assert "only" not in whole.model_dump(exclude_unset=True)


def test_settings_from_the_environment_name_the_selection(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_CONFIG", "longbench")
    monkeypatch.setenv("LCP_TASKS", "hotpotqa, trec")
    monkeypatch.setenv("LCP_LIMIT", "5")
    settings = Settings.from_env(tmp_path)
    assert (settings.tasks, settings.limit) == (("hotpotqa", "trec"), 5)
    assert settings_config(settings).only == RunSelection(tasks=("hotpotqa", "trec"), limit=5)
    monkeypatch.setenv("LCP_LIMIT", "five")
    with pytest.raises(ValueError, match=r"\$LCP_LIMIT='five': expected a whole number >= 1"):
        Settings.from_env(tmp_path)
