"""`lcp remove-model NAME`: a registered model's entry leaves models.yaml, every other byte of the file stays."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.generate.registry import ModelRegistry, ModelSpecError, UnknownModelError

REGISTRY = """\
# models of this project (kept by hand and by lcp add-model)

# the local server
local-a:
  backend: openai
  model_id: served-a
  base_url: http://127.0.0.1:8000/v1  # llama.cpp
  max_model_len: 4096

# a second one, with its own comment
local-b:
  backend: openai
  model_id: served-b
  base_url: http://127.0.0.1:8001/v1
  max_model_len: 8192
# trailing note
"""


@pytest.fixture
def registry(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(REGISTRY)
    return path


def test_removing_a_model_keeps_the_other_entries_and_their_comments_byte_for_byte(registry):
    removed = ModelRegistry(registry).remove("local-a")
    assert removed.model_id == "served-a"
    # The entry's lines go, its inline comment with them; the comment lines above it stay (a removal never
    # guesses which comments were about the entry).
    assert registry.read_text() == REGISTRY.replace(
        "local-a:\n  backend: openai\n  model_id: served-a\n  base_url: http://127.0.0.1:8000/v1  # llama.cpp\n"
        "  max_model_len: 4096\n", "")
    assert "local-a" not in ModelRegistry(registry).names() and ModelRegistry(registry).get("local-b").max_model_len == 8192


def test_removing_the_last_entry_keeps_the_comments_that_follow_it(registry):
    ModelRegistry(registry).remove("local-b")
    text = registry.read_text()
    assert "local-b" not in text and text.endswith("# trailing note\n") and "local-a:" in text


def test_a_built_in_or_unknown_model_is_refused_and_the_file_is_unchanged(registry):
    with pytest.raises(ModelSpecError, match="'smollm2-135m' is built in"):
        ModelRegistry(registry).remove("smollm2-135m")
    with pytest.raises(UnknownModelError, match=r"unknown model 'nope': not in .*models.yaml; registered there: "
                                                r"\['local-a', 'local-b'\]"):
        ModelRegistry(registry).remove("nope")
    assert registry.read_text() == REGISTRY


def test_lcp_remove_model_says_what_it_removed_and_that_results_stay(registry, monkeypatch):
    monkeypatch.setenv("LCP_MODELS", str(registry))
    result = CliRunner().invoke(main, ["models", "remove", "local-b"])
    assert result.exit_code == 0, result.output
    assert f"Removed model 'local-b' (openai) from {registry}; its results in the lake are kept" in result.output
    unknown = CliRunner().invoke(main, ["models", "remove", "local-b"])
    assert unknown.exit_code == 1 and "Error: unknown model 'local-b'" in unknown.output
    assert "Traceback" not in unknown.output
