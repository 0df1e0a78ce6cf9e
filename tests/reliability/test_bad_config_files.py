"""Bad config, registry and task files (issue 22, items 2, 7, 8 and 9): each probe's file rebuilt here.

Every one is the project's own error naming the file (and the line and column where there is one),
``lcp`` prints it and exits 1 with no traceback, and a refused write leaves the file's bytes as they
were. ``lcp add-model`` keeps the comments of models.yaml byte for byte.
"""

from __future__ import annotations

import codecs
import dataclasses

import pytest
import yaml
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.config import PACKAGED_CONFIGS, ConfigError, load_config
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry, ModelSpecError
from lc_pipeline.tasks.catalog import TaskFileError, load_catalog
from lc_pipeline.yaml_files import read_yaml

DEMO = (PACKAGED_CONFIGS / "demo.yaml").read_text(encoding="utf-8")
END = DEMO.count("\n")  # the packaged demo config's last line: the probes below add lines after it
SMOL = BUILTIN_MODELS["smollm2-135m"]

COMMENTED_REGISTRY = """\
# Models of our lab: one entry per served model.

llama-8b:
  backend: openai
  model_id: 'meta-llama/Llama-3.1-8B-Instruct'   # the tokenizer, read locally
  base_url: "http://127.0.0.1:8000/v1"
  max_model_len:   32768

# on gpu01, restarted nightly
qwen-7b:
  backend: openai
  model_id: Qwen/Qwen2.5-7B-Instruct
  max_model_len: 32768
# keep this list short
"""

# Seven levels of nine aliases: 9**7 = 4.8 million strings once expanded, from 330 bytes.
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f"], "abcdefg", strict=True)
)


def config_file(tmp_path, text: str | bytes, name: str = "bad.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def error_of(call, error_type) -> str:
    with pytest.raises(error_type) as caught:
        call()
    return str(caught.value)


# --- configs -------------------------------------------------------------------------------------------------------

def test_a_config_path_that_is_a_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "configs").mkdir()
    message = error_of(lambda: load_config(tmp_path / "configs"), ConfigError)
    assert message == f"config {tmp_path / 'configs'}: is a folder, not a config"


def test_a_tab_in_a_config_is_a_yaml_error_naming_file_line_and_column(tmp_path):
    path = config_file(tmp_path, DEMO.replace("  - name: demo", "\t- name: demo"))
    message = error_of(lambda: load_config(path), ConfigError)
    assert message.startswith(f"config {path}: not valid YAML at line 4, column 1: ")
    assert "found character '\\t' that cannot start any token" in message and "a tab cannot" in message


@pytest.mark.parametrize(("encoding", "found"), [
    ("utf-16", "UTF-16, little-endian, not UTF-8 (it starts with a byte-order mark ff fe)"),
    ("utf-16-be", "not UTF-8 text: NUL bytes at line 1 (UTF-16 without a byte-order mark"),
    ("latin-1", "not UTF-8 at line 2, column 8: byte 0xe9 is not UTF-8 (in Latin-1 / Windows-1252 it would be 'é')"),
])
def test_a_config_not_in_utf8_is_refused_naming_the_encoding_found(tmp_path, encoding, found):
    path = config_file(tmp_path, DEMO.replace("name: demo\n", "name: démo\n", 1).encode(encoding))
    message = error_of(lambda: load_config(path), ConfigError)
    assert message.startswith(f"config {path}: ") and found in message


def test_a_utf8_config_with_a_byte_order_mark_loads_like_one_without(tmp_path):
    path = config_file(tmp_path, codecs.BOM_UTF8 + DEMO.encode("utf-8"))
    assert load_config(path) == load_config("demo")


@pytest.mark.parametrize(("text", "where"), [
    ("seed: 1\n", f"line {END + 1}, column 1: duplicate key 'seed' (first given on line"),
    ("helmet:\n  n_depths: 2\n  n_depths: 3\n",
     f"line {END + 3}, column 3: duplicate key 'n_depths' (first given on line {END + 2})"),
])
def test_a_key_given_twice_in_a_config_at_any_depth_is_refused_naming_both_lines(tmp_path, text, where):
    assert "\nseed:" in DEMO and "\nhelmet:" not in DEMO
    path = config_file(tmp_path, DEMO + text)
    message = error_of(lambda: load_config(path), ConfigError)
    assert message.startswith(f"config {path}: not valid YAML at ") and where in message


def test_an_alias_bomb_under_1_kb_is_refused_before_it_is_expanded(tmp_path):
    assert len(ALIAS_BOMB) < 1024
    path = config_file(tmp_path, DEMO + ALIAS_BOMB)
    message = error_of(lambda: load_config(path), ConfigError)
    # Reported at the first alias (line 2 of the bomb, after "b: &b ["), counted without expanding anything.
    assert message.startswith(f"config {path}: not valid YAML at line {END + 2}, column 8: its aliases (*name) "
                              "expand to 6,0")
    assert message.endswith("values, more than the 200,000 a config may hold (an alias bomb?): write the values out")


def test_a_task_file_written_by_pyyaml_with_a_shared_value_loads_its_anchor(tmp_path):
    shared = ["passages", "demonstrations"]
    path = tmp_path / "generated.yaml"
    path.write_text(yaml.safe_dump({"first": shared, "second": shared}), encoding="utf-8")
    assert "&id001" in path.read_text(encoding="utf-8")
    assert read_yaml(path, "task file") == {"first": shared, "second": shared}


def test_a_value_that_contains_itself_is_refused(tmp_path):
    path = config_file(tmp_path, DEMO + "loop: &loop [1, *loop]\n")
    message = error_of(lambda: load_config(path), ConfigError)
    assert message.endswith("a recursive alias (a value that contains itself)")


def test_two_sources_with_one_name_are_a_config_error_naming_the_name_and_both_positions(tmp_path):
    second = "  - name: extra\n    kind: demo_corpus\n  - name: demo\n    kind: demo_corpus\n"
    path = config_file(tmp_path, DEMO.replace("lengths: [1k", second + "lengths: [1k", 1))
    message = error_of(lambda: load_config(path), ConfigError)
    assert message == (f"{path}: config 'demo': sources: two sources are named 'demo' (sources[0] and sources[2], "
                       "counting from 0); each source needs its own name, the name of its partition source=demo")


def test_lcp_prints_a_config_error_and_exits_1_without_a_traceback(tmp_path, monkeypatch):
    path = config_file(tmp_path, DEMO.replace("  - name: demo", "\t- name: demo"))
    monkeypatch.setenv("LCP_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("LCP_CONFIG", str(path))
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert f"Error: config {path}: not valid YAML at line 4, column 1" in result.output
    assert "Traceback" not in result.output


# --- task files ----------------------------------------------------------------------------------------------------

TASK_FILE = """\
benchmark: mine
tasks:
  - name: recall
    category: Mine
    builder: {name: helmet, options: {kind: json_kv}}
    category: Other
"""


def test_a_task_file_with_a_key_given_twice_is_a_task_file_error_naming_file_and_line(tmp_path):
    path = config_file(tmp_path, TASK_FILE, "mine.yaml")
    message = error_of(lambda: load_catalog([path]), TaskFileError)
    assert message.startswith(f"task file {path}: not valid YAML at line 6, column 5: duplicate key 'category'")


def test_a_utf16_task_file_named_by_a_config_is_a_config_error_naming_the_task_file(tmp_path):
    config_file(tmp_path, TASK_FILE.encode("utf-16"), "mine.yaml")
    path = config_file(tmp_path, DEMO + "task_files: [mine.yaml]\n")
    message = error_of(lambda: load_config(path), ConfigError)
    assert f"task_files: task file {tmp_path / 'mine.yaml'}: the file is UTF-16, little-endian, not UTF-8" in message


# --- the model registry --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "problem"), [
    ("llama-8b:\n\tbackend: openai\n", "not valid YAML at line 2, column 1: "),
    ("- llama-8b\n- qwen-7b\n", "expected a mapping slug -> settings, got list"),
    ("llama-8b: 5\n", "model 'llama-8b': settings must be a mapping, got int"),
    ("llama-8b:\n  backend: openai\n  model_id: m\n  max_model_len: 8\nllama-8b:\n  backend: vllm\n",
     "not valid YAML at line 5, column 1: duplicate key 'llama-8b' (first given on line 1)"),
    (COMMENTED_REGISTRY.replace("  max_model_len:   32768", "  max_model_len: 1\n  max_model_len: 2"),
     "not valid YAML at line 8, column 3: duplicate key 'max_model_len' (first given on line 7)"),
    (COMMENTED_REGISTRY.encode("utf-16"), "the file is UTF-16, little-endian, not UTF-8"),
], ids=["tabs", "list", "scalar-entry", "duplicate-slug", "duplicate-field", "utf-16"])
def test_a_bad_registry_file_is_refused_naming_it_and_left_unchanged_by_add(tmp_path, text, problem):
    path = config_file(tmp_path, text, "models.yaml")
    before = path.read_bytes()
    registry = ModelRegistry(path)
    message = error_of(registry.names, ModelSpecError)
    assert message.startswith(f"model registry {path}: ") and problem in message
    assert error_of(lambda: registry.add(dataclasses.replace(SMOL, slug="new-one")), ModelSpecError) == message
    assert path.read_bytes() == before


def test_a_registry_path_that_is_a_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "models.yaml").mkdir()
    message = error_of(ModelRegistry(tmp_path / "models.yaml").names, ModelSpecError)
    assert message == f"model registry {tmp_path / 'models.yaml'}: is a folder, not a model registry"


def test_lcp_prints_a_registry_error_and_exits_1_without_a_traceback(tmp_path, monkeypatch):
    config_file(tmp_path, "- llama-8b\n", "models.yaml")
    monkeypatch.setenv("LCP_PROJECT_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["models", "list"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output == (f"Error: model registry {tmp_path / 'models.yaml'}: expected a mapping slug -> "
                             "settings, got list\n")


def test_lcp_add_model_keeps_the_registrys_comments_byte_for_byte(tmp_path, monkeypatch):
    path = config_file(tmp_path, COMMENTED_REGISTRY, "models.yaml")
    monkeypatch.setenv("LCP_PROJECT_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["models", "add", "smollm2-1k", "--max-model-len", "1024"])
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert text.startswith(COMMENTED_REGISTRY + "\n")  # every byte before it, then a blank line like the others
    assert yaml.safe_load(text[len(COMMENTED_REGISTRY):]) == {"smollm2-1k": {**SMOL.settings(), "max_model_len": 1024}}
    assert ModelRegistry(path).names() == ["llama-8b", "qwen-7b", "smollm2-135m", "smollm2-1k"]


def test_overwriting_a_model_replaces_its_entry_in_place_and_keeps_the_other_lines(tmp_path):
    path = config_file(tmp_path, COMMENTED_REGISTRY, "models.yaml")
    registry = ModelRegistry(path)
    changed = dataclasses.replace(registry.get("llama-8b"), max_model_len=8192)
    registry.add(changed, overwrite=True)
    head, _, rest = COMMENTED_REGISTRY.partition("llama-8b:\n")
    tail = rest[rest.index("\n# on gpu01"):]  # the next entry's comment stays with it
    entry = yaml.safe_dump({"llama-8b": changed.settings()}, sort_keys=False)
    assert path.read_text(encoding="utf-8") == head + entry + tail
    assert ModelRegistry(path).get("llama-8b") == changed


def test_a_commented_registry_that_cannot_be_edited_in_place_is_refused_unchanged(tmp_path):
    path = config_file(tmp_path, "# ours\n{llama-8b: {backend: openai, model_id: m, max_model_len: 8}}\n",
                       "models.yaml")
    before = path.read_bytes()
    message = error_of(lambda: ModelRegistry(path).add(dataclasses.replace(SMOL, slug="new-one")), ModelSpecError)
    assert "cannot set model 'new-one' and keep the file's comments" in message and "nothing was written" in message
    assert path.read_bytes() == before


def test_an_executor_config_with_a_key_twice_is_refused_naming_its_line(tmp_path):
    from lc_pipeline.definitions import load_executor_config

    path = tmp_path / "executor.yaml"
    path.write_text("execution:\n  config:\n    broker: redis://127.0.0.1:6379/0\n    broker: pyamqp://x//\n",
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"executor\.yaml: not valid YAML at line 4, column 5: duplicate key 'broker'"):
        load_executor_config(path)
