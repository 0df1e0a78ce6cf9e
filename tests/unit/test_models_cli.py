"""`lcp add-model`'s server settings and `lcp models` showing them (issue 29, "Servers as users run them")."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec

SERVED = ["models", "add", "smol-srv", "--backend", "openai", "--api", "completions", "--send-text",
          "--base-url", "http://127.0.0.1:8080/v1", "--api-model", "smol", "--max-concurrency", "1",
          "--request-timeout-s", "3000", "--max-retries", "2", "--retry-timeouts",
          "--extra-body", '{"repeat_penalty": 1.0}']


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_PROJECT_DIR", str(tmp_path))
    for var in ("LCP_MODELS", "LCP_LAKE", "DAGSTER_HOME", "LCP_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_add_model_sets_every_server_setting(project):
    out = lcp(*SERVED, "--config", "longbench")
    assert out.splitlines()[-1].startswith("next: lcp backfill --model smol-srv --config longbench ")
    spec = ModelRegistry(project / "models.yaml").get("smol-srv")
    assert (spec.api, spec.send_token_ids, spec.max_concurrency, spec.request_timeout_s, spec.max_retries,
            spec.retry_timeouts, spec.extra_body) == ("completions", False, 1, 3000.0, 2, True, {"repeat_penalty": 1.0})


def test_without_config_the_next_step_has_none(project):
    assert lcp("models", "add", "smol-2k", "--max-model-len", "2048").splitlines()[-1].startswith(
        "next: lcp backfill --model smol-2k   (")


def test_unset_flags_keep_the_like_models_values(project):
    lcp(*SERVED)
    lcp("models", "add", "smol-srv-2", "--like", "smol-srv", "--no-retry-timeouts", "--send-token-ids")
    first, second = (ModelRegistry(project / "models.yaml").get(s) for s in ("smol-srv", "smol-srv-2"))
    assert dataclasses.replace(first, slug="smol-srv-2", retry_timeouts=False, send_token_ids=True) == second


@pytest.mark.parametrize("value, why", [
    ("[1.0]", "'[1.0]' is a JSON list, not an object"),
    ("{repeat_penalty: 1}", "'{repeat_penalty: 1}' is not JSON: Expecting property name"),
])
def test_extra_body_must_be_a_json_object_and_the_error_names_the_flag(project, value, why):
    result = CliRunner().invoke(main, ["models", "add", "bad", "--backend", "openai", "--extra-body", value])
    assert result.exit_code == 2
    assert f"Invalid value for '--extra-body': {why}" in result.output
    assert not (project / "models.yaml").exists()


def test_every_server_flags_help_gives_the_registrys_default():
    """The help texts say the defaults in words; they must be ModelSpec's."""
    defaults = {f.name: f.default for f in dataclasses.fields(ModelSpec)}
    helps = {p.name: p.help for p in main.get_command(None, "models").get_command(None, "add").params}
    assert f"(default {defaults['max_concurrency']})" in helps["max_concurrency"]
    assert f"(default {defaults['request_timeout_s']:g})" in helps["request_timeout_s"]
    assert f"(default {defaults['max_retries']})" in helps["max_retries"]
    assert defaults["retry_timeouts"] is False and "(default: no," in helps["retry_timeouts"]
    assert defaults["send_token_ids"] is True and "token ids (the default" in helps["send_token_ids"]
    assert defaults["extra_body"] is None and "(default none)" in helps["extra_body"]


def test_models_shows_the_server_settings_and_json_every_field_but_no_key(project, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-secret-123")
    lcp(*SERVED)
    lines = lcp("models", "list").splitlines()
    header = [c.strip() for c in lines[0].split(" | ")]
    assert header == ["model", "backend", "model_id", "max_model_len", "base_url", "api", "concurrency", "timeout_s",
                      "retries", "retry_timeouts", "extra_body", "fingerprint"]
    row = dict(zip(header, (c.strip() for c in next(ln for ln in lines if ln.startswith("smol-srv")).split(" | "))))
    assert (row["api"], row["concurrency"], row["timeout_s"], row["retries"], row["retry_timeouts"],
            row["extra_body"]) == ("completions", "1", "3000", "2", "True", '{"repeat_penalty": 1.0}')
    builtin = dict(zip(header, (c.strip() for c in next(ln for ln in lines if ln.startswith("smollm2-135m"))
                                .split(" | "))))
    assert builtin["api"] == builtin["concurrency"] == ""  # not a server model

    text = lcp("models", "list", "--format", "json")
    assert "sk-planted-secret-123" not in text
    listed = {m["slug"]: m for m in json.loads(text)}
    spec = ModelRegistry(project / "models.yaml").get("smol-srv")
    assert listed["smol-srv"] == {**spec.to_dict(), "fingerprint": spec.fingerprint()}
    assert listed["smol-srv"]["api_key_env"] == "OPENAI_API_KEY"
