"""The benchmark config (lc_pipeline/config.py): typed sections that refuse unknown keys and values of
the wrong type with a ConfigError naming the file and the field path, and fingerprints that stay
exactly what the dataclasses before the pydantic models gave (ids of every lake row derive from them).

tests/fixtures/config_fingerprints.json was written by the dataclass version (before the pydantic
models) for the packaged configs and the configs below (copies of those other tests write).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lc_pipeline.tasks import load_catalog
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.benchmarks.lveval.config import LVEvalConfig
from lc_pipeline.config import (
    BenchmarkConfig,
    ConfigError,
    SourceConfig,
    load_config,
    packaged_config_names,
)
from lc_pipeline.benchmarks.minilongbench.options import MiniLongBenchOptions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PINNED = json.loads((FIXTURES / "config_fingerprints.json").read_text())
DAGSTER = Path(sys.executable).with_name("dagster")

TINY = {  # tests/conftest.py
    "name": "tiny",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"], "base_lengths": ["1k"], "long_lengths": ["2k"], "depths": [0.0, 1.0],
    "items_per_length": 2, "retrieval_top_k": 40, "hard_negatives_per_item": 20, "max_new_tokens": 12,
    "models": ["smollm2-135m"],
}
MINIMAL = {"name": "cfg", "sources": [{"name": "demo"}], "lengths": ["1k", "2k"], "base_lengths": ["1k"],
           "long_lengths": ["2k"]}
TEST_CONFIGS = {
    "tiny": TINY,
    "bad-input-good": MINIMAL,  # tests/reliability/test_bad_input.py
    "helmet-rag": {  # tests/asset/test_helmet_asset.py
        "name": "helmet-rag", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 80, "seed": 3}],
        "lengths": ["8k", "16k"], "base_lengths": ["8k"], "long_lengths": ["16k"], "items_per_length": 0,
        "retrieval_top_k": 260, "hard_negatives_per_item": 160, "helmet": {"tasks": ["rag"], "n_per_task": 2},
    },
    "reliability": {  # tests/reliability/lake_world.py
        "name": "reliability", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 40, "seed": 3}],
        "lengths": ["1k", "2k"], "base_lengths": ["1k"], "long_lengths": ["2k"], "depths": [0.0, 1.0],
        "items_per_length": 3, "max_new_tokens": 8, "models": [],
    },
    "minilongbench": {**TINY, "name": "mlb", "minilongbench": {  # tests/asset/test_minilongbench_asset.py
        "scores": "train.parquet", "estimate_scores": "new.parquet", "ratio": 0.9, "dims": 4,
        "train_models": ["a", "b"], "epochs": 300}},
    "every-section": {  # every section set; unquoted and integer numbers kept as written
        "name": "all", "sources": [{"name": "demo", "n_entities": 60}, {"name": "lb", "kind": "longbench",
                                                                        "path": "x.jsonl", "tasks": ["a", "b"]}],
        "lengths": [512, "1k", "1.5k"], "base_lengths": [512], "long_lengths": ["1k", "1.5k"],
        "depths": [0, 0.25, 1], "items_per_length": 0, "length_unit": "words", "cross_domain_fill": False,
        "length_tolerance": 0.1, "models": ["m-1", "m-2"],
        # the nine HELMET tasks "all" named when these fingerprints were pinned (issue 19 added per-dataset tasks)
        "helmet": {"tasks": ["rag", "rag_multi", "rerank", "json_kv", "ruler_mk_needle", "ruler_mk_uuid", "ruler_mv",
                             "longqa", "summ"], "shots": 0, "n_depths": 3},
        "longbench100": {"tasks": "all", "n_per_task": 1},
        "prior_knowledge": {"threshold": 1, "enabled": False, "tasks": ["single_doc_qa"]},
        "lveval": {"variants": ["plain", "cfi"], "n_facts": 3, "fact_generator": "smollm2-135m",
                   "factrecall_positions": 5, "metric_variant": "paper"},
        "minilongbench": None,
    },
}
FIELDS = [k for k in PINNED["demo"] if k != "all" and not k.startswith("str(")]


def write(tmp_path: Path, raw: dict, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def pinned_values(config: BenchmarkConfig) -> dict[str, str]:
    return {"all": config.fingerprint(), **{f: config.fingerprint(f) for f in FIELDS},
            "str(helmet)": str(config.helmet), "str(longbench100)": str(config.longbench100),
            "str(lveval)": str(config.lveval)}


def refusal(tmp_path: Path, raw: dict) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, raw))
    return str(err.value)


# ----------------------------------------------------------------------------- fingerprints


def test_every_packaged_config_is_pinned():
    assert sorted(k for k in PINNED if not k.startswith("test:")) == packaged_config_names()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_fingerprints_and_section_strings_are_those_the_dataclasses_gave(tmp_path, name):
    if name.startswith("test:"):
        config = load_config(write(tmp_path, TEST_CONFIGS[name.removeprefix("test:")]))
    else:
        config = load_config(name)
    assert pinned_values(config) == PINNED[name]


def test_the_lveval_fingerprint_hashes_the_resolved_rules_file_and_its_content(tmp_path):
    (tmp_path / "rules.csv").write_text("item_id,old,new\nq1,Rilos,Bravik\n")
    config = load_config(write(tmp_path, {**MINIMAL, "lveval": {"variants": ["plain", "kpr"],
                                                                "rules_file": "rules.csv"}}))
    sha = hashlib.sha256(b"item_id,old,new\nq1,Rilos,Bravik\n").hexdigest()[:16]
    assert config.lveval.rules_file_sha256 == sha
    section = {"variants": ["plain", "kpr"], "n_facts": 2, "fact_generator": "knowledge_base", "fact_attempts": 3,
               "rules_file": str((tmp_path / "rules.csv").resolve()), "auto_rules": True, "max_rules": 4,
               "metric_variant": "code", "factrecall_positions": 0, "factrecall_items": 1, "rules_file_sha256": sha}
    blob = json.dumps({"lveval": section}, sort_keys=True, default=str).encode()
    assert config.fingerprint("lveval") == hashlib.sha256(blob).hexdigest()[:16]


MINE_TASKS = """\
benchmark: mine
tasks:
  - name: qa
    category: QA
    builder: {name: helmet, options: {kind: json_kv}}
    prompt: "{context} {demos}{question}"
    answer_prefix: "Value:"
    max_new_tokens: 8
    truncation: end_of_context
    metrics: [helmet.subem]
    aggregation: {group: QA}
"""


def test_task_files_and_tasks_leave_old_fingerprints_alone_and_count_once_set(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "mine.yaml").write_text(MINE_TASKS)
    plain = load_config(write(tmp_path, TINY))
    with_tasks = load_config(write(tmp_path, {**TINY, "task_files": ["tasks/mine.yaml"], "tasks": ["mine/qa"]}))
    assert plain.task_files == () and plain.tasks == () and plain.task_files_sha256 == ""
    assert plain.fingerprint() == PINNED["test:tiny"]["all"]
    assert with_tasks.fingerprint() != plain.fingerprint()
    assert all(with_tasks.fingerprint(f) == plain.fingerprint(f) for f in FIELDS)
    assert with_tasks.tasks == ("mine/qa",)


# ----------------------------------------------------------------------------- task files


def test_task_files_are_resolved_against_the_config_folder_and_hashed_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("benchmark: a\ntasks: []\n")
    (tmp_path / "b.yaml").write_text("benchmark: b\ntasks: []\n")
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    cwd = os.getcwd()
    os.chdir(elsewhere)  # relative to the config file, not to where the loader runs
    try:
        ab = load_config(write(tmp_path, {**TINY, "task_files": ["a.yaml", "b.yaml"]}))
        ba = load_config(write(tmp_path, {**TINY, "task_files": ["b.yaml", str(tmp_path / "a.yaml")]}))
    finally:
        os.chdir(cwd)
    assert ab.task_files == (str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    assert len(ab.task_files_sha256) == 16 and ab.task_files_sha256 != ba.task_files_sha256
    (tmp_path / "a.yaml").write_text("benchmark: a2\ntasks: []\n")
    assert load_config(tmp_path / "c.yaml").task_files_sha256 != ba.task_files_sha256  # an edit changes it


def test_a_missing_task_file_is_an_error_naming_it(tmp_path):
    message = refusal(tmp_path, {**TINY, "task_files": ["tasks/absent.yaml"]})
    assert str(tmp_path / "c.yaml") in message and "field 'task_files'" in message
    assert str(tmp_path / "tasks" / "absent.yaml") in message and "do not exist" in message


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(("changes", "expected"), [
    ({"lenghts": ["1k"]}, "unknown keys ['lenghts']; known keys are ['base_lengths', "),
    ({"helmet": {"tasks": ["rag"], "n_dept": 3}}, "helmet: unknown keys ['n_dept']; known keys are ['n_depths', "),
    ({"lveval": {"rule_file": "r.csv"}}, "lveval: unknown keys ['rule_file']"),
    ({"longbench100": {"task": ["kv_retrieval"]}}, "longbench100: unknown keys ['task']"),
    ({"prior_knowledge": {"treshold": 0.4}}, "prior_knowledge: unknown keys ['treshold']"),
    ({"lveval": {"rules_file_sha256": "abc"}}, "lveval: unknown keys ['rules_file_sha256']"),  # computed, never set
    ({"task_files_sha256": "abc"}, "unknown keys ['task_files_sha256']"),
])
def test_an_unknown_key_is_refused_in_every_section(tmp_path, changes, expected):
    message = refusal(tmp_path, {**MINIMAL, **changes})
    assert message.startswith(f"{tmp_path / 'c.yaml'}: ") and expected in message


@pytest.mark.parametrize(("changes", "expected"), [
    ({"helmet": {"n_depths": "six"}}, "field 'helmet.n_depths': expected an integer, got 'six'"),
    ({"helmet": {"n_depths": 6.0}}, "field 'helmet.n_depths': expected an integer, got 6.0"),
    ({"seed": True}, "field 'seed': expected an integer, got True"),
    ({"length_tolerance": True}, "field 'length_tolerance': expected a number, got True"),
    ({"prior_knowledge": {"enabled": "no"}}, "field 'prior_knowledge.enabled': expected true or false, got 'no'"),
    ({"lveval": {"variants": "plain"}}, "field 'lveval.variants': expected a list, got 'plain'"),
    ({"models": ["m", 7]}, "field 'models': element 1: expected a string, got 7"),
    ({"helmet": 3}, "field 'helmet': expected a mapping, got 3"),
    ({"helmet": {"tasks": "rag"}}, "helmet.tasks must be a list (or 'all': every task of helmet)"),
    ({"tasks": "helmet/rag"}, "field 'tasks': expected a list, got 'helmet/rag'"),
    ({"sources": [{"name": "demo", "options": 1}, {"name": "Bad/Name"}]},
     "source 'Bad/Name', field 'name': invalid source name 'Bad/Name'"),
])
def test_a_value_of_the_wrong_type_names_the_file_and_the_field_path(tmp_path, changes, expected):
    message = refusal(tmp_path, {**MINIMAL, **changes})
    assert message.startswith(f"{tmp_path / 'c.yaml'}: ") and expected in message


def test_every_problem_is_reported_at_once(tmp_path):
    message = refusal(tmp_path, {**MINIMAL, "seed": "x", "helmet": {"shot": 1}, "colour": "red"})
    assert "field 'seed'" in message and "helmet: unknown keys ['shot']" in message and "['colour']" in message


def test_a_file_that_is_not_yaml_is_a_config_error_naming_it(tmp_path):
    (tmp_path / "c.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="c.yaml: not valid YAML"):
        load_config(tmp_path / "c.yaml")


# ----------------------------------------------------------------------------- values as written


def test_sections_take_all_tasks_and_empty_sections_their_defaults(tmp_path):
    config = load_config(write(tmp_path, {**MINIMAL, "helmet": {"tasks": "all"}, "longbench100": {"tasks": "all"},
                                          "lveval": None, "prior_knowledge": None}))
    catalog = load_catalog()
    assert config.helmet.tasks == tuple(t.name for t in catalog.tasks("helmet"))
    assert config.longbench100.tasks == tuple(t.name for t in catalog.tasks("longbench100"))
    assert len(config.helmet.tasks) == 28 and len(config.longbench100.tasks) == 8  # HELMET: 21 datasets + 7 any-corpus
    assert config.lveval == LVEvalConfig() and config.lveval.wants_cfi is False


def test_tuples_stay_tuples_and_numbers_keep_the_type_they_were_written_with(tmp_path):
    config = load_config(write(tmp_path, {**MINIMAL, "lengths": [512, "1k"], "base_lengths": [512],
                                          "long_lengths": ["1k"], "depths": [0, 0.5, 1]}))
    assert config.lengths == ("512", "1k") and config.base_lengths == ("512",)
    assert config.depths == (0, 0.5, 1) and [type(d) for d in config.depths] == [int, float, int]
    assert isinstance(config.sources, tuple) and isinstance(config.models, tuple)
    assert config.target_tokens("1k") == 1024


def test_the_minilongbench_section_is_typed_and_hashed_as_written(tmp_path):
    config = load_config(write(tmp_path, {**MINIMAL, "minilongbench": {"ratio": 0, "train_models": ["a"]}}))
    assert isinstance(config.minilongbench, MiniLongBenchOptions)
    assert config.minilongbench.ratio == 0 and config.minilongbench.dims == 10  # defaults fill the rest
    blob = json.dumps({"minilongbench": {"ratio": 0, "train_models": ["a"]}}, sort_keys=True).encode()
    assert config.fingerprint("minilongbench") == hashlib.sha256(blob).hexdigest()[:16]  # as the mapping hashed
    assert load_config(write(tmp_path, MINIMAL)).minilongbench == MiniLongBenchOptions()
    assert "field 'minilongbench.ratio': the share of samples removed must be in [0, 1), got 1.5" in refusal(
        tmp_path, {**MINIMAL, "minilongbench": {"ratio": 1.5}})
    assert "minilongbench: unknown keys ['ratios']; known keys are ['baseline_draws', " in refusal(
        tmp_path, {**MINIMAL, "minilongbench": {"ratios": 0.5}})


def test_a_source_keeps_every_key_but_name_and_kind_as_its_options(tmp_path):
    config = load_config(write(tmp_path, {**MINIMAL, "sources": [
        {"name": "lb", "kind": "longbench", "path": "x.jsonl", "tasks": ["hotpotqa"], "options": {"a": 1}}]}))
    assert config.sources == (SourceConfig("lb", "longbench", {"path": "x.jsonl", "tasks": ["hotpotqa"],
                                                               "options": {"a": 1}}),)
    assert load_config(write(tmp_path, MINIMAL)).sources[0] == SourceConfig(name="demo")  # kind defaults


def test_a_config_built_in_code_is_validated_like_a_file(tmp_path):
    base = BenchmarkConfig(name="w", sources=(SourceConfig("demo"),), lengths=("1k", "2k"), base_lengths=("1k",),
                           long_lengths=("2k",))
    with pytest.raises(ConfigError, match="BenchmarkConfig: config 'w': length_unit 'pages'"):
        base.replace(length_unit="pages")
    with pytest.raises(ConfigError, match="HelmetConfig: unknown keys \\['depths'\\]"):
        HelmetConfig(depths=3)
    with pytest.raises(ConfigError, match="field 'name': invalid source name"):
        SourceConfig("../up")
    assert base.replace(seed=7).seed == 7 and base.seed == 42  # frozen: replace makes a copy
    with pytest.raises(ValueError, match="frozen"):
        base.seed = 7  # type: ignore[misc]


# ----------------------------------------------------------------------------- definitions load


def test_dagster_definitions_validate_fails_on_a_bad_config_with_its_message_and_passes_a_good_one(tmp_path):
    (tmp_path / "home").mkdir()
    bad = write(tmp_path, {**MINIMAL, "helmet": {"n_depths": "six"}, "lenghts": ["4k"]}, "bad.yaml")
    good = write(tmp_path, MINIMAL, "good.yaml")
    results = {}
    for path in (bad, good):
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "LCP_PROJECT_DIR": str(tmp_path),
               "LCP_LAKE": str(tmp_path / "lake"), "LCP_CONFIG": str(path), "LCP_MODELS": str(tmp_path / "m.yaml")}
        env.pop("LCP_EXECUTOR", None), env.pop("LCP_EXECUTOR_CONFIG", None)
        results[path.name] = subprocess.run(
            [str(DAGSTER), "definitions", "validate", "-m", "lc_pipeline.definitions"], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=300, check=False)
    out = results["bad.yaml"].stdout + results["bad.yaml"].stderr
    assert results["bad.yaml"].returncode != 0, out[-3000:]
    assert "ConfigError" in out and f"{bad}: field 'helmet.n_depths': expected an integer, got 'six'" in out
    assert "unknown keys ['lenghts']" in out
    good_out = results["good.yaml"].stdout + results["good.yaml"].stderr
    assert results["good.yaml"].returncode == 0, good_out[-3000:]


def test_a_task_the_config_names_must_be_declared_in_its_task_files(tmp_path):
    message = refusal(tmp_path, {**TINY, "tasks": ["mine/nothing"]})
    assert "field 'tasks'" in message and "unknown task 'mine/nothing'" in message
    message = refusal(tmp_path, {**TINY, "helmet": {"tasks": ["rag", "no_such_task"]}})
    assert "helmet.tasks: unknown ['no_such_task']" in message
    (tmp_path / "broken.yaml").write_text("benchmark: b\ntasks: [{name: x, category: QA}]\n")
    message = refusal(tmp_path, {**TINY, "task_files": ["broken.yaml"]})
    assert "broken.yaml" in message and "task b/x" in message and "builder" in message


def test_a_configs_fingerprint_does_not_depend_on_where_its_task_files_live(tmp_path):
    """helmet-demo names a task file beside it: two checkouts in different folders give the same ids; a task file
    with other content does not."""
    prints = []
    for where, headline in (("a", "mean_of_groups"), ("b", "mean_of_groups"), ("c", "mean_of_tasks")):
        folder = tmp_path / where / "deep"
        folder.mkdir(parents=True)
        (folder / "mine.yaml").write_text(f"benchmark: helmet\nheadline: {{overall: {headline}}}\ntasks: []\n")
        prints.append(load_config(write(folder, {**TINY, "task_files": ["mine.yaml"]})).fingerprint())
    assert prints[0] == prints[1] != prints[2]
