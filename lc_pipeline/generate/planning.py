"""What a run will cost before it runs (``lcp plan``): requests, prompt tokens, truncations, time and money.

Issue 21 "Numbers users can trust", *Plan before running*. For one model and the instances of a config:

- **Requests** come from :func:`lc_pipeline.generate.partition.plan_partition`, the function the generations
  asset calls, so cache keys, truncation policies (task file, ``truncation_overrides``, the model's own
  ``truncation``) and the chat-template switch are the run's, never re-derived here.
- **Prompt tokens** are counted by the backend's own render + fit path (:func:`request_fitter`): the model's
  tokenizer and chat template, :func:`lc_pipeline.generate.prompting.fit_request`'s truncation. The count a
  generations row will carry (``prompt_tokens``, ``original_prompt_tokens``, ``truncated``) is the count here.
  An API model counted with tiktoken, or a chat server that applies a template we do not have, is flagged
  (``tokenizer.exact`` false).
- **Reused**: a request whose cache key is already in its partition's generation store costs nothing.
- **Time**: a throughput measured from the model's earlier generations (:func:`measure_throughput`: prompt and
  completion tokens over the rows' own latency; prefill and decode apart when a least-squares fit of the rows
  supports it) or one the user gives; the expected completion length is ``max_new_tokens`` scaled by the
  measured share of it the model used (1 without a measurement: an upper bound). Model loading, instance
  building and scoring are not included.
- **Cost**: ``ModelSpec.price_per_million_input_tokens`` / ``_output_tokens`` over the prompt tokens and
  ``max_new_tokens`` (plus a reasoning model's thinking budget) per request: an upper bound on the output.

Pure: no Dagster. ``lc_pipeline/commands/plan.py`` reads the lake and prints.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field

import polars as pl

from lc_pipeline.construct.truncation import FittedPrompt, PromptDoesNotFitError
from lc_pipeline.generate.backends import COUNTED_ONLY, GENERATOR_FIT, GGUF_VOCAB_FIT, HF_TOKENIZER_FIT, capabilities
from lc_pipeline.generate.base import GenerationRequest, Generator
from lc_pipeline.generate.partition import PartitionPlan
from lc_pipeline.generate.registry import ModelSpec, resolve_model_path

# A request row of the plan (one per instance, as a generations row).
REQUEST_SCHEMA = {
    "length": pl.String,
    "benchmark": pl.String,
    "task": pl.String,
    "instance_id": pl.String,
    "cache_key": pl.String,
    "target_tokens": pl.Int64,
    "truncation_policy": pl.String,
    "prompt_tokens": pl.Int64,  # what the generations row will say: fed tokens (template included)
    "original_prompt_tokens": pl.Int64,  # before truncation
    "truncated": pl.Boolean,
    "status": pl.String,  # "" (sent) | "skipped" (policy skip: not sent) | "does_not_fit" (the run will fail)
    "max_new_tokens": pl.Int64,  # the request's: the task's plus a reasoning model's thinking budget
    "output_tokens_max": pl.Int64,  # max_new_tokens (+ a followup's second call)
    "followup": pl.Boolean,  # two calls (generate/followup.py): the second prompt's reasoning is not counted
    "reused": pl.Boolean,  # its cache key is in the partition's generation store
    "first_of_key": pl.Boolean,  # the first row of its cache key in the partition (identical prompts run once)
}

# ------------------------------------------------------------------------------------------ counting


@dataclass(frozen=True)
class TokenizerInfo:
    name: str
    kind: str  # "model" (the evaluated model's own) | "tiktoken" (an API model's stand-in) | "none"
    exact: bool  # counts equal what the model is fed
    note: str = ""


Fitter = Callable[[GenerationRequest], FittedPrompt]


def request_fitter(spec: ModelSpec, generator: Generator) -> tuple[Fitter, TokenizerInfo]:
    """The render + fit path ``spec``'s backend uses, without loading weights: the one it declares
    (BackendCapabilities.prompt_fit).

    ``openai`` and ``vllm`` fit with a tokenizer only: their generator's own ``fit``. ``transformers`` loads the
    tokenizer it would load with the weights (the Hugging Face one, converted from the GGUF when there is one);
    ``llamacpp`` the GGUF's vocabulary (``vocab_only``). ``imported`` predictions are counted as that backend
    counts them (the spec's tokenizer, ``tiktoken:cl100k_base`` by default); nothing is generated.
    """
    from lc_pipeline.generate import prompting

    caps = capabilities(spec.backend)
    if caps.prompt_fit == COUNTED_ONLY:
        from lc_pipeline.construct.tokens import TokenCounter

        name = spec.tokenizer or "tiktoken:cl100k_base"
        counter = TokenCounter.load(name.removeprefix("tiktoken:"))

        def count(request: GenerationRequest) -> FittedPrompt:
            n = counter.count(request.prompt)
            return FittedPrompt([], request.prompt, n, False, request.truncation)

        return count, TokenizerInfo(name, "tiktoken", False, "imported predictions: nothing is generated")
    if caps.prompt_fit == GENERATOR_FIT and hasattr(generator, "fit"):
        tok = generator.prompt_tokenizer  # type: ignore[attr-defined]
        tiktoken = tok.name.startswith("tiktoken:")
        served = caps.server_renders_chat(spec.api)
        note = ""
        if tiktoken:
            note = "counted with tiktoken, not the served model's tokenizer"
        if served and tok.chat_text(prompting.messages_for(spec, "x")) is None:
            note = (note + "; " if note else "") + "the server applies the chat template (a margin is counted)"
        exact = not tiktoken and not (served and note)
        return generator.fit, TokenizerInfo(tok.name, "tiktoken" if tiktoken else "model", exact,  # type: ignore[attr-defined]
                                            note)
    if caps.prompt_fit == HF_TOKENIZER_FIT:
        name = f"{spec.model_id}/{spec.gguf_file}" if spec.gguf_file is not None else spec.model_id
        tok: prompting.PromptTokenizer = prompting.hf_tokenizer(spec, name)
    elif caps.prompt_fit == GGUF_VOCAB_FIT:
        if spec.gguf_file is None:
            raise ValueError(f"model {spec.slug!r}: backend {spec.backend!r} needs gguf_file (a .gguf inside model_id)")
        gguf = os.path.join(resolve_model_path(spec), spec.gguf_file)
        tok = prompting.LlamaCppTokenizer(prompting.load_llamacpp_vocab(gguf, vocab_only=True),
                                          f"{spec.model_id}/{spec.gguf_file}", chat_template=spec.chat_template_text())
    else:  # SHARED_FIT (a backend added later, or a generator without its own fit): the shared fit
        tok = prompting.load_tokenizer(spec)
    return (lambda request: prompting.fit_request(spec, tok, request)), TokenizerInfo(tok.name, "model", True)


def _fit_status(fit: Fitter, request: GenerationRequest) -> tuple[int, int, bool, str]:
    """(prompt_tokens, original_prompt_tokens, truncated, status) of one request as the backend records it: a
    ``skip`` request over the window is not sent (prompt_tokens 0, its exact length in original_prompt_tokens,
    prompting.skipped_result)."""
    try:
        fitted = fit(request)
    except PromptDoesNotFitError:
        return 0, 0, False, "does_not_fit"
    if getattr(fitted, "skipped", False):
        return 0, fitted.original_tokens, False, "skipped"
    fed = len(fitted.ids) if fitted.ids else fitted.original_tokens
    return fed, fitted.original_tokens, fitted.truncated, ""


def count_requests(
    plan: PartitionPlan,
    instances: pl.DataFrame,
    length: str,
    spec: ModelSpec,
    fit: Fitter,
    stored_keys: Iterable[str] = (),
) -> pl.DataFrame:
    """One row per planned generation (:data:`REQUEST_SCHEMA`), in the plan's (instance_id) order.

    ``instances`` gives each row its benchmark and task; ``stored_keys`` are the cache keys already in the
    partition's generation store. A task with a followup counts the first call's prompt plus the second call's
    template without the reasoning (unknown before the first call answers: a lower bound).
    """
    meta = {r["instance_id"]: r for r in instances.select("instance_id", "benchmark", "task").iter_rows(named=True)}
    stored, seen = set(stored_keys), set()
    first_call_by_instance = {p.instance_id: p.request for p in plan.first_calls.values()}
    chains = plan.chains
    rows = []
    for item in plan.items:
        req = item.request
        chain = chains.get(req.key)
        tokens, original, truncated, status = _fit_status(fit, first_call_by_instance.get(item.instance_id, req))
        out_max = req.max_new_tokens  # plan_partition added a reasoning model's thinking budget
        if chain is not None and not status:  # a skipped first call makes no second call
            second = chain.second("")
            t2, o2, cut2, status = _fit_status(fit, second)
            tokens, original, truncated = tokens + t2, original + o2, truncated or cut2
            out_max += second.max_new_tokens
        info = meta.get(item.instance_id, {})
        rows.append({
            "length": length, "benchmark": info.get("benchmark"), "task": info.get("task"),
            "instance_id": item.instance_id, "cache_key": req.key, "target_tokens": item.target_tokens,
            "truncation_policy": req.truncation, "prompt_tokens": tokens, "original_prompt_tokens": original,
            "truncated": truncated, "status": status, "max_new_tokens": req.max_new_tokens,
            "output_tokens_max": out_max, "followup": chain is not None, "reused": req.key in stored,
            "first_of_key": req.key not in seen,
        })
        seen.add(req.key)
    return pl.DataFrame(rows, schema=REQUEST_SCHEMA)


# ------------------------------------------------------------------------------------------ throughput


@dataclass(frozen=True)
class Throughput:
    """How fast the model generates: ``basis`` "lake" (measured from ``rows`` earlier generations) or "given".

    ``tokens_per_second`` is (prompt + completion tokens) over latency; with ``prefill_tokens_per_second`` and
    ``decode_tokens_per_second`` set (a non-negative least-squares fit latency = p / prefill + c / decode that
    explains the rows), time is estimated from the two rates. ``completion_share``: the completion tokens the
    model used over the ``max_new_tokens`` it was allowed (None: unknown, the estimate uses the whole budget).
    """

    basis: str
    rows: int
    tokens_per_second: float
    prefill_tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    completion_share: float | None = None
    fit_r2: float | None = None
    # Requests in flight at once whose latencies overlap (an openai server's max_concurrency: each row's latency
    # is its own wall time); the run's time is the rows' summed time over this. 1: rows' latencies add up.
    parallel: int = 1
    # Whose rows: "this model", or (a new slug with no rows yet) the models run with the same backend and weights.
    source: str = "this model"

    def seconds(self, prompt_tokens: float, completion_tokens: float) -> float:
        if self.prefill_tokens_per_second and self.decode_tokens_per_second:
            one = prompt_tokens / self.prefill_tokens_per_second + completion_tokens / self.decode_tokens_per_second
        else:
            one = (prompt_tokens + completion_tokens) / self.tokens_per_second
        return one / self.parallel

    def describe(self) -> str:
        if self.basis == "given":
            return f"--tokens-per-second {self.tokens_per_second:g} (prompt + completion tokens)"
        what = f"{self.rows} earlier generations of {self.source} in the lake: {self.tokens_per_second:.1f} tokens/s"
        if self.prefill_tokens_per_second and self.decode_tokens_per_second:
            what += (f" overall; prefill {self.prefill_tokens_per_second:.1f} tokens/s, decode "
                     f"{self.decode_tokens_per_second:.1f} tokens/s (least squares over the rows, R² {self.fit_r2:.2f})")
        if self.completion_share is not None:
            what += f"; completions used {100 * self.completion_share:.0f}% of max_new_tokens"
        if self.parallel > 1:
            what += (f"; {self.parallel} requests in flight at once (max_concurrency), assuming the server serves "
                     "them in parallel at that rate")
        return what


MIN_ROWS_FOR_SPLIT = 8  # fewer rows: one overall rate (two coefficients from a handful of rows would be noise)
MIN_R2_FOR_SPLIT = 0.8


def measure_throughput(generations: pl.DataFrame, max_new_tokens: pl.DataFrame | None = None,
                       spec: ModelSpec | None = None, model_id: str | None = None) -> Throughput | None:
    """The model's rate from its earlier generations rows (any lengths; one row per cache key); None when no
    row has a latency (imported predictions, or nothing generated yet).

    Rows the model did not run (``skipped``) and rows without a latency are left out; with ``spec`` and
    ``model_id`` (the generator's), rows of another backend or model file are left out when rows of this one
    exist, and an openai model's rate counts its ``max_concurrency`` requests in flight at once
    (:attr:`Throughput.parallel`). ``max_new_tokens`` (columns ``instance_id, max_new_tokens``, e.g. the lake's
    instances) gives the share of the allowed completion the model used.
    """
    needed = ("prompt_tokens", "completion_tokens", "latency_s")
    if generations.is_empty() or any(c not in generations.columns for c in needed):
        return None
    rows = generations
    if spec is not None and {"backend", "model_id"} <= set(rows.columns):
        same = rows.filter((pl.col("backend") == spec.backend) & (pl.col("model_id") == (model_id or spec.model_id)))
        rows = same if not same.is_empty() else rows
    if "status" in rows.columns:
        rows = rows.filter(pl.col("status").fill_null("") != "skipped")  # nothing was sent
    rows = rows.filter(pl.col("latency_s").is_not_null() & (pl.col("latency_s") > 0))
    if "cache_key" in rows.columns:
        rows = rows.unique("cache_key", keep="first", maintain_order=True)
    if rows.is_empty():
        return None
    prompt = rows["prompt_tokens"].cast(pl.Float64).to_numpy()
    completion = rows["completion_tokens"].cast(pl.Float64).to_numpy()
    latency = rows["latency_s"].cast(pl.Float64).to_numpy()
    overall = float((prompt.sum() + completion.sum()) / latency.sum())
    prefill = decode = r2 = None
    if rows.height >= MIN_ROWS_FOR_SPLIT and completion.sum() > 0:
        import numpy as np
        from scipy.optimize import nnls

        a = np.column_stack([prompt, completion])
        coef, _ = nnls(a, latency)
        resid = latency - a @ coef
        total = float(((latency - latency.mean()) ** 2).sum())
        r2 = 1.0 - float((resid ** 2).sum()) / total if total > 0 else None
        if coef[0] > 0 and coef[1] > 0 and r2 is not None and r2 >= MIN_R2_FOR_SPLIT:
            prefill, decode = 1.0 / float(coef[0]), 1.0 / float(coef[1])
        else:
            r2 = None
    share = None
    if max_new_tokens is not None and "instance_id" in rows.columns and not max_new_tokens.is_empty():
        joined = rows.join(max_new_tokens.select("instance_id", "max_new_tokens").unique("instance_id"),
                           on="instance_id", how="inner")
        if "followup" in joined.columns:  # pragma: no cover - generations rows carry no such column today
            joined = joined.filter(~pl.col("followup"))
        budget = float(joined["max_new_tokens"].sum() or 0)
        if budget > 0:
            share = min(1.0, float(joined["completion_tokens"].sum()) / budget)
    parallel = spec.max_concurrency if spec is not None and capabilities(spec.backend).parallel_requests else 1
    return Throughput("lake", rows.height, overall, prefill, decode, share, r2, parallel)


def given_throughput(tokens_per_second: float) -> Throughput:
    """A rate the user gives: the run's own prompt + completion tokens per second (requests in flight included)."""
    if not math.isfinite(tokens_per_second) or tokens_per_second <= 0:
        raise ValueError(f"--tokens-per-second must be a positive number, got {tokens_per_second!r}")
    return Throughput("given", 0, float(tokens_per_second))


# ------------------------------------------------------------------------------------------ summary

SUMMARY_FIELDS = (
    "benchmark", "length", "target_tokens", "instances", "requests", "prompt_tokens", "original_prompt_tokens",
    "max_prompt_tokens", "truncated", "skipped", "does_not_fit", "max_new_tokens", "output_tokens_max", "reused",
    "to_generate", "prompt_tokens_to_generate", "estimated_seconds", "estimated_seconds_all", "estimated_cost",
    "estimated_cost_all",
)


@dataclass
class ModelPlan:
    model: str
    backend: str
    max_model_len: int
    truncation: str | None
    tokenizer: TokenizerInfo
    throughput: Throughput | None
    prices: dict[str, float | None]
    cells: list[dict] = field(default_factory=list)  # per benchmark x length, SUMMARY_FIELDS
    totals: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    requests: pl.DataFrame | None = None

    def to_json(self, with_requests: bool = False) -> dict:
        out = {
            "model": self.model, "backend": self.backend, "max_model_len": self.max_model_len,
            "truncation": self.truncation, "tokenizer": asdict(self.tokenizer),
            "throughput": ({**asdict(self.throughput), "description": self.throughput.describe()}
                           if self.throughput else None),
            "prices_per_million_tokens": self.prices, "cells": self.cells, "totals": self.totals,
            "notes": self.notes,
        }
        if with_requests and self.requests is not None:
            out["requests"] = self.requests.to_dicts()
        return out


def _sent(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("status") == "")


def _cell(df: pl.DataFrame, spec: ModelSpec, throughput: Throughput | None) -> dict:
    sent = _sent(df)
    runs = sent.filter(pl.col("first_of_key"))  # identical prompts of a partition run once
    todo = runs.filter(~pl.col("reused"))
    share = throughput.completion_share if throughput and throughput.completion_share is not None else 1.0

    def seconds(part: pl.DataFrame) -> float | None:
        if throughput is None:
            return None
        return round(throughput.seconds(float(part["prompt_tokens"].sum()),
                                        share * float(part["output_tokens_max"].sum())), 1)

    def cost(part: pl.DataFrame) -> float | None:
        pin, pout = spec.price_per_million_input_tokens, spec.price_per_million_output_tokens
        if pin is None and pout is None:
            return None
        return round((pin or 0.0) * float(part["prompt_tokens"].sum()) / 1e6
                     + (pout or 0.0) * float(part["output_tokens_max"].sum()) / 1e6, 6)

    targets = df["target_tokens"].drop_nulls()
    return {
        "target_tokens": int(targets.max()) if targets.len() else None,
        "instances": df.height,
        "requests": runs.height,
        "prompt_tokens": int(df["prompt_tokens"].sum()),
        "original_prompt_tokens": int(df["original_prompt_tokens"].sum()),
        "max_prompt_tokens": int(sent["prompt_tokens"].max() or 0),
        "truncated": int(df["truncated"].sum()),
        "skipped": int((df["status"] == "skipped").sum()),
        "does_not_fit": int((df["status"] == "does_not_fit").sum()),
        "max_new_tokens": int(df["max_new_tokens"].max() or 0),
        "output_tokens_max": int(runs["output_tokens_max"].sum()),
        "reused": int(sent.filter(pl.col("reused")).height),
        "to_generate": todo.height,
        "prompt_tokens_to_generate": int(todo["prompt_tokens"].sum()),
        "estimated_seconds": seconds(todo),
        "estimated_seconds_all": seconds(runs),
        "estimated_cost": cost(todo),
        "estimated_cost_all": cost(runs),
    }


def summarize(
    spec: ModelSpec,
    requests: pl.DataFrame,
    tokenizer: TokenizerInfo,
    throughput: Throughput | None,
    level_order: list[str],
) -> ModelPlan:
    """Per benchmark x length cells (levels in config order) and totals of :func:`count_requests`' rows."""
    prices = {"input": spec.price_per_million_input_tokens, "output": spec.price_per_million_output_tokens}
    plan = ModelPlan(spec.slug, spec.backend, spec.max_model_len, spec.truncation, tokenizer, throughput, prices,
                     requests=requests)
    rank = {lv: i for i, lv in enumerate(level_order)}
    groups = sorted(requests.partition_by(["benchmark", "length"], as_dict=True, maintain_order=True).items(),
                    key=lambda kv: (kv[0][0] or "", rank.get(kv[0][1], len(rank))))
    for (benchmark, length), df in groups:
        plan.cells.append({"benchmark": benchmark, "length": length, **_cell(df, spec, throughput)})
    totals = _cell(requests, spec, throughput) if requests.height else _cell(
        pl.DataFrame(schema=REQUEST_SCHEMA), spec, throughput)
    totals.pop("target_tokens")
    # Requests of different partitions are separate runs even with identical prompts: sum the cells.
    for key in ("requests", "output_tokens_max", "to_generate", "prompt_tokens_to_generate"):
        totals[key] = sum(c[key] for c in plan.cells)
    for key in ("estimated_seconds", "estimated_seconds_all", "estimated_cost", "estimated_cost_all"):
        values = [c[key] for c in plan.cells]
        totals[key] = None if not values or any(v is None for v in values) else round(sum(values), 6)
    plan.totals = totals
    plan.notes = _notes(plan, spec)
    return plan


def _notes(plan: ModelPlan, spec: ModelSpec) -> list[str]:
    notes = []
    if not plan.tokenizer.exact:
        notes.append(f"token counts in {plan.tokenizer.name}: {plan.tokenizer.note or 'not the model tokenizer'}")
    if plan.throughput is None:
        notes.append("no time estimate: no earlier generations of this model in the lake; pass --tokens-per-second")
    else:
        notes.append(f"time from {plan.throughput.describe()}; model loading, instance building and scoring "
                     "are not included")
    if plan.prices["input"] is None and plan.prices["output"] is None:
        notes.append("no cost estimate: the model's registry entry has no price_per_million_input_tokens / "
                     "price_per_million_output_tokens")
    else:
        notes.append("cost: output tokens counted as max_new_tokens per request (an upper bound)")
    thinking = spec.thinking_settings
    if thinking:
        notes.append(f"reasoning model: max_new_tokens includes the thinking budget of {thinking['budget_tokens']} "
                     "tokens per call (the window reserves it; output cost and time count it)")
    if plan.totals.get("does_not_fit"):
        notes.append(f"{plan.totals['does_not_fit']} prompt(s) do not fit max_model_len {spec.max_model_len} even "
                     "after truncation: their partitions will fail")
    if plan.requests is not None and plan.requests["followup"].any():
        notes.append("tasks with a followup call: the second call's prompt is counted without the first call's "
                     "reasoning (a lower bound)")
    return notes


def stored_keys(store_rows: pl.DataFrame | None) -> set[str]:
    """Cache keys of a generation store's rows (``GenerationCheckpoint.load()``; None: an empty store)."""
    if store_rows is None or "cache_key" not in store_rows.columns:
        return set()
    return set(store_rows["cache_key"].to_list())


def plan_json(plans: list[ModelPlan], meta: Mapping[str, object], with_requests: bool = False) -> dict:
    """The ``--format json`` document: ``{"format": 1, ...meta, "models": [ModelPlan.to_json()]}``."""
    return {"format": 1, **meta, "models": [p.to_json(with_requests) for p in plans]}
