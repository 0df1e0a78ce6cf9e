"""`lcp models add | list | remove`: the project's model registry (models.yaml, or $LCP_MODELS); `lcp models
import` (commands/imports.py) registers predictions made elsewhere as a model."""

from __future__ import annotations

import dataclasses
import json
import shlex

import click

from lc_pipeline.commands.options import config_option, format_option
from lc_pipeline.construct.truncation import POLICIES as TRUNCATION_POLICIES
from lc_pipeline.generate.backends import GENERATORS
from lc_pipeline.settings import cli_settings


class JsonObject(click.ParamType):
    """A JSON object given on the command line (``--extra-body '{"repeat_penalty": 1.0}'``), parsed to a dict."""

    name = "json object"

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            self.fail(f"{value!r} is not JSON: {exc}", param, ctx)
        if not isinstance(parsed, dict):
            self.fail(f"{value!r} is a JSON {type(parsed).__name__}, not an object {{...}}", param, ctx)
        return parsed


JSON_OBJECT = JsonObject()


@click.command("add")
@click.argument("name")
@click.option("--like", default="smollm2-135m", show_default=True, help="Start from this model's settings.")
@click.option("--backend", default=None, type=click.Choice(GENERATORS.names()),
              help="transformers (CPU/GPU), llamacpp (in-process GGUF), openai (any OpenAI-compatible server), "
                   "vllm (vLLM's engine: CUDA GPUs, or a CPU after make install-vllm).")
@click.option("--model-id", default=None, help="HF id, local path, or package:<pip package>.")
@click.option("--gguf-file", default=None,
              help="GGUF file inside model-id (transformers loads it, vllm gets it converted to a Hugging Face "
                   "folder); 'none': no GGUF, clearing the --like model's (e.g. a --model-id folder of safetensors).")
@click.option("--max-model-len", type=int, default=None, help="Context window in model tokens.")
@click.option("--batch-size", type=int, default=None)
@click.option("--system-prompt", default=None)
@click.option("--no-chat-template", is_flag=True, help="Feed the raw prompt (base models).")
@click.option("--api", type=click.Choice(["chat", "completions"]), default=None,
              help="openai: chat (the server applies the template) or completions (we send token ids).")
@click.option("--api-model", default=None, help="openai: the model name the server knows.")
@click.option("--base-url", default=None, help="openai: the server (default: $OPENAI_BASE_URL).")
@click.option("--api-key-env", default=None, help="openai: the environment variable holding the key.")
@click.option("--max-concurrency", type=int, default=None,
              help="openai: requests in flight at once (default 8); a one-slot server such as llama-cpp-python's "
                   "wants 1, or queued requests run into the timeout.")
@click.option("--request-timeout-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="openai: seconds to wait for one reply (default 600); prefill of a long prompt on a CPU server "
                   "can take longer: raise it there.")
@click.option("--max-retries", type=click.IntRange(min=0), default=None,
              help="openai: retries of a failed request (a connection error, HTTP 408/409/429/5xx, a reply that is "
                   "not a completion), with exponential backoff (default 4).")
@click.option("--retry-timeouts/--no-retry-timeouts", default=None,
              help="openai: whether a request that timed out is sent again (default: no, since the server may still "
                   "be computing it and a one-slot server would compute it twice).")
@click.option("--send-token-ids/--send-text", default=None,
              help="openai with --api completions: send our token ids (the default: exact; vLLM takes them) or the "
                   "rendered prompt text (for servers that take text only, such as llama-cpp-python's).")
@click.option("--extra-body", type=JSON_OBJECT, default=None, metavar="JSON",
              help="openai: server-specific request fields, a JSON object (default none), e.g. "
                   "'{\"repeat_penalty\": 1.0}' for greedy decoding on llama-cpp-python's server (its default "
                   "repeat penalty 1.1 changes temperature-0 outputs).")
@click.option("--tokenizer", default=None, help="Tokenizer to count with: a path / HF id, or tiktoken:<encoding>.")
@click.option("--tensor-parallel-size", type=int, default=None, help="vllm: GPUs per model.")
@click.option("--truncation", type=click.Choice(TRUNCATION_POLICIES), default=None,
              help="Truncation policy of every task for this model (skip: a prompt that does not fit is not sent, "
                   "its row says skipped); default: each task's. A run's truncation_overrides still win.")
@click.option("--chat-template-file", default=None,
              type=click.Path(exists=True, dir_okay=False, readable=True, resolve_path=True),
              help="A Jinja chat template file used instead of the model's own (stored as an absolute path; its "
                   "content enters the model's fingerprint). openai: only with --api completions.")
@config_option
@click.option("--overwrite", is_flag=True, help="Replace an existing registration with different settings.")
def add_model(name, like, backend, model_id, gguf_file, max_model_len, batch_size, system_prompt, no_chat_template,
              api, api_model, base_url, api_key_env, max_concurrency, request_timeout_s, max_retries, retry_timeouts,
              send_token_ids, extra_body, tokenizer, tensor_parallel_size, truncation, chat_template_file, config,
              overwrite) -> None:
    """Register model NAME (a slug: [a-z0-9._-]) and add its dynamic partition."""
    from lc_pipeline.dagster_instance import add_missing_partitions, open_instance
    from lc_pipeline.generate.registry import ModelRegistry, validate_model_slug
    from lc_pipeline.partitions import MODEL_DIM

    s = cli_settings(config)
    try:
        validate_model_slug(name)
        registry = ModelRegistry(s.models_file)
        base = registry.get(like)
        changes = {k: v for k, v in {
            "slug": name, "backend": backend, "model_id": model_id, "gguf_file": gguf_file,
            "max_model_len": max_model_len, "batch_size": batch_size, "system_prompt": system_prompt,
            "api": api, "api_model": api_model, "base_url": base_url, "api_key_env": api_key_env,
            "max_concurrency": max_concurrency, "request_timeout_s": request_timeout_s, "max_retries": max_retries,
            "retry_timeouts": retry_timeouts, "send_token_ids": send_token_ids, "extra_body": extra_body,
            "tokenizer": tokenizer, "tensor_parallel_size": tensor_parallel_size,
            "truncation": truncation, "chat_template_file": chat_template_file,
        }.items() if v is not None}
        if no_chat_template:
            changes["chat_template"] = False
        if gguf_file is not None and gguf_file.lower() == "none":
            changes["gguf_file"] = None
        spec = dataclasses.replace(base, **changes)
        if spec.gguf_file is not None:
            from lc_pipeline.generate.registry import resolve_model_path

            try:  # a local model_id (a folder, an installed package) must hold the GGUF, or every run fails
                resolve_model_path(spec)
            except ModuleNotFoundError:
                pass  # a package not installed on this machine: checked where the model runs
        registry.add(spec, overwrite=overwrite)
    except FileNotFoundError as exc:
        raise click.ClickException(f"{exc}; name the GGUF with --gguf-file, or pass --gguf-file none for a "
                                   "model-id without one") from exc
    except (ValueError, KeyError) as exc:
        raise click.ClickException(str(exc)) from exc
    with open_instance() as instance:
        add_missing_partitions(instance, MODEL_DIM, [name])
    click.echo(f"registered {name} in {s.models_file} and added partition model={name}")
    with_config = f" --config {shlex.quote(config)}" if config else ""
    click.echo(f"next: lcp backfill --model {name}{with_config}   (or backfill its partitions in the UI)")




@click.command("list")
@config_option
@format_option("table", "json",
               help="json: every setting of each model and its fingerprint (api_key_env is the name of the variable "
                    "that holds the key, never the key).")
def list_models(config: str | None, fmt: str) -> None:
    """List registered models and their settings.

    The table shows an openai model's server settings too: api, concurrency, timeout, retries, whether timeouts are
    retried, extra request fields. Credentials in a base_url (user:key@, query values) are shown as ***."""
    from lc_pipeline.commands.output import print_table
    from lc_pipeline.generate.backends import capabilities
    from lc_pipeline.generate.registry import ModelRegistry, redact_url

    s = cli_settings(config)
    reg = ModelRegistry(s.models_file)
    specs = [reg.get(n) for n in reg.names()]
    if fmt == "json":  # base_url without its credentials (user:key@, query values), as in the table
        click.echo(json.dumps([{**m.shown(), "fingerprint": m.fingerprint()} for m in specs], indent=1))
        return

    def served(m) -> tuple:
        if not capabilities(m.backend).reads("api"):  # no server settings
            return ("",) * 6
        return (m.api, m.max_concurrency, f"{m.request_timeout_s:g}", m.max_retries, m.retry_timeouts,
                json.dumps(m.extra_body) if m.extra_body else "")

    rows = [(m.slug, m.backend, m.model_id, m.max_model_len, redact_url(m.base_url) or "", *served(m), m.fingerprint())
            for m in specs]
    print_table(["model", "backend", "model_id", "max_model_len", "base_url", "api", "concurrency", "timeout_s",
                 "retries", "retry_timeouts", "extra_body", "fingerprint"], rows)


@click.command("remove")
@click.argument("name")
@config_option
def remove_model(name: str, config: str | None) -> None:
    """Remove a model you registered (`lcp models add`) from models.yaml.

    Only its entry goes; the file's other entries and comments stay as they are. Its generations and scores stay in
    the lake (the folders named model=NAME), and registering the same settings again reuses them."""
    from lc_pipeline.generate.registry import ModelRegistry, UnknownModelError

    s = cli_settings(config)
    try:
        spec = ModelRegistry(s.models_file).remove(name)
    except UnknownModelError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Removed model {name!r} ({spec.backend}) from {s.models_file}; its results in the lake are kept "
               f"(model={name} folders).")

