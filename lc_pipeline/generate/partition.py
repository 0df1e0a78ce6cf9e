"""One (length, model) partition of generations: plan, reuse what is stored, generate the rest.

``plan_partition`` turns instances into requests with their ids, cache keys and truncation
policies; ``generate_partition`` skips every request whose cache key is already in the
store, generates the others and stores every finished row at once (a :class:`StoreWriter`:
a journal line per row, folded into Parquet parts in the background). A backend that hands
results over one by one (the openai backend: the whole partition in one call, a window of
``max_concurrency`` requests always in flight) has each answer stored as it arrives; batching
backends go chunk by chunk (``chunk_size``) and have each chunk stored when it is done. A run
killed mid-partition (even with ``kill -9``) therefore resumes with only the missing requests,
and an unchanged rerun generates nothing.
Pure logic: the Dagster asset is a thin wrapper around these two functions.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.construct.truncation import policy_for_task
from lc_pipeline.generate.backends import FLUSHED_BATCHES, ONE_REQUEST, capabilities
from lc_pipeline.generate.base import (
    ApiDecoding,
    GenerationRequest,
    GenerationResult,
    Generator,
    cache_key,
    cut_at_stop,
    request_decoding,
    sampling_params_hash,
    sampling_params_json,
    sampling_seed,
    stream_results,
)
from lc_pipeline.generate.checkpoint import GenerationCheckpoint, StoreWriter
from lc_pipeline.generate.followup import Chain, FollowupGenerator, record_values, stored_results
from lc_pipeline.generate.registry import ModelSpec
from lc_pipeline.generate.thinking import ThinkingGenerator, check_location, with_budget
from lc_pipeline.interrupts import stop_if_interrupted
from lc_pipeline.tasks.catalog import TaskCatalog, load_catalog

# Batches per chunk for the transformers backend (each chunk's rows are stored when it is done).
FLUSH_EVERY_BATCHES = 2
# How often generate_partition reports how many rows are stored (``on_stored``), at most.
REPORT_EVERY_S = 5.0


@dataclass
class PlannedGeneration:
    generation_id: str
    instance_id: str
    request: GenerationRequest  # request.key is the cache key
    target_tokens: int | None = None  # the instance's level target (instances.target_tokens)
    # The row's own sampling params (JSON) and hash where they differ from the plan's: a sampled request's decoding
    # (base.request_decoding), a protocol note (a budget the engine cannot honour); "": the plan's.
    sampling_params: str = ""
    sampling_params_hash: str = ""


@dataclass
class PartitionPlan:
    backend: str
    model_id: str
    sampling_params: str  # JSON
    sampling_params_hash: str
    items: list[PlannedGeneration] = field(default_factory=list)
    # Tasks with a followup (chain of thought, generate/followup.py): final key -> its two calls, and the first
    # calls as planned rows (kept in the store under their own keys, never in the partition).
    chains: dict[str, Chain] = field(default_factory=dict)
    first_calls: dict[str, PlannedGeneration] = field(default_factory=dict)
    # A reasoning model's settings (ModelSpec.thinking_settings): its replies are split into thoughts and answer
    # (generate/thinking.py) before anything reads them; None: not a reasoning model.
    thinking: dict | None = None


# The instance columns a benchmark's ``record_of`` reads the released record from (a followup's ``fill``).
RECORD_COLUMNS = ("question", "answers", "language", "record_fields")
# The protocol module's function giving the authors' sampling temperature of a task (None: greedy), and the
# ``record_fields`` key of an instance's input budget (the authors' limit on the rendered input; HELMET: L -
# max_new_tokens), both read for instances of an official protocol (``protocol`` "official@<commit>") only.
TEMPERATURE_HOOK = "official_temperature"
# The protocol module's function giving how the authors' API script decodes a task (base.ApiDecoding: no max_tokens,
# the server's temperature, a system turn; None: as we send it), applied on a generator that honours it
# (``honours_api_decoding``: the openai backend), noted in the rows of the others.
API_DECODING_HOOK = "official_api_decoding"
BUDGET_FIELD = "protocol_budget"


def _protocol_module(benchmark: str, what: str):
    from lc_pipeline.config import protocol_module

    name = protocol_module(benchmark)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise ValueError(f"benchmark {benchmark!r}: {what} through {name}, and there is no module {name}") from None
        raise


def official_temperature(benchmark: str, task: str) -> float | None:
    """The sampling temperature the authors' harness uses for ``task`` (its protocol module's
    ``official_temperature(task)``), None when they decode greedily or the module declares none."""
    from lc_pipeline.config import has_official_protocol

    if not has_official_protocol(benchmark):
        return None
    hook = getattr(_protocol_module(benchmark, "the official temperature is read"), TEMPERATURE_HOOK, None)
    return None if hook is None else hook(task)


def official_api_decoding(benchmark: str, task: str) -> ApiDecoding | None:
    """How the authors' API script decodes ``task`` (its protocol module's ``official_api_decoding(task)``,
    base.ApiDecoding), None when it sends what we send or the module declares nothing."""
    from lc_pipeline.config import has_official_protocol, protocol_module

    if not has_official_protocol(benchmark):
        return None
    hook = getattr(_protocol_module(benchmark, "the official API decoding is read"), API_DECODING_HOOK, None)
    value = None if hook is None else hook(task)
    if value is not None and not isinstance(value, ApiDecoding):
        raise ValueError(f"benchmark {benchmark!r}, task {task!r}: {protocol_module(benchmark)}.{API_DECODING_HOOK} "
                         f"returned a {type(value).__name__}, expected an ApiDecoding or None")
    return value if value is not None and value.changes else None


def local_engine_note(api: ApiDecoding, backend: str, max_new_tokens: int) -> str:
    """What a row of an engine that needs a cap says under a protocol whose API decoding it does not apply."""
    kept = f"keeps its cap of max_new_tokens {max_new_tokens} and its own decoding"
    if api.system is not None or api.read_system is not None:
        kept += ", without the protocol's system turn"
    return (f"the protocol's API decoding ({api.source or 'official protocol'}) applies to API servers (backend "
            f"openai); backend {backend!r} {kept}")


def protocol_budget(row: Mapping) -> int | None:
    """An official instance's input budget (``record_fields.protocol_budget``), None when it has none; a value
    that is not a positive integer is an error naming the instance and the field."""
    raw = row.get("record_fields")
    if not raw or BUDGET_FIELD not in raw:
        return None
    try:
        fields = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"instance {row['instance_id']!r}: field 'record_fields' is not a JSON object: {exc}") from None
    value = fields.get(BUDGET_FIELD) if isinstance(fields, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"instance {row['instance_id']!r}: field 'record_fields.{BUDGET_FIELD}': expected a "
                         f"number of tokens >= 2, got {value!r}")
    return value


def window_note(budget: int, window_budget: int, spec: ModelSpec, max_new_tokens: int) -> str:
    """What a row says when the authors' input budget is above what this model's window leaves: the engine here
    does not run a model past its window, so the cut stays at the window (HELMET runs it past: fidelity review
    HE8)."""
    return (f"the protocol's input budget is {budget} tokens, more than model {spec.slug!r}'s window "
            f"{spec.max_model_len} - {max_new_tokens} new tokens = {window_budget}: cut at the window "
            f"({window_budget} tokens), where the authors' harness runs the model past its window")


def record_of(benchmark: str, row: Mapping) -> Mapping:
    """The released record of an instance row, as its benchmark's protocol module reads it
    (``lc_pipeline.benchmarks.<benchmark>.protocol.record_of``, found by convention: the core names no benchmark);
    an error naming the module when the benchmark has none."""
    from lc_pipeline.config import protocol_module

    name = protocol_module(benchmark)
    module = _protocol_module(benchmark, "a followup with fill reads the released record")
    reader = getattr(module, "record_of", None)
    if reader is None:
        raise ValueError(f"benchmark {benchmark!r}: {name} has no record_of (a followup with fill reads the "
                         "released record through it)")
    return reader(row)


def generation_id(instance_id: str, slug: str, model_fingerprint: str, sampling_hash: str) -> str:
    payload = json.dumps([instance_id, slug, model_fingerprint, sampling_hash])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def plan_partition(
    instances: pl.DataFrame,
    spec: ModelSpec,
    generator: Generator,
    truncation_overrides: Mapping[str, str] | None = None,
    catalog: TaskCatalog | None = None,
) -> PartitionPlan:
    """Requests for every instance, in instance_id order.

    Uses the instances columns ``instance_id``, ``benchmark`` and ``task`` (-> the TaskSpec: truncation
    policy, chat-template switch, stop sequences), ``prompt``, ``context`` and ``max_new_tokens``; a
    missing column or null value is an error naming it. ``record_id`` (run as released) goes into each request
    when the instances have it ("" otherwise); it enters the cache key only for a generator that answers by
    record (``keyed_by_record``: the ``imported`` backend).

    A reasoning model (``spec.thinking``) asks for the task's ``max_new_tokens`` plus its ``budget_tokens``
    (a followup's second call too), so the window fitting reserves the whole budget (generate/thinking.py).

    The truncation policy of a request, first that applies: the run's ``truncation_overrides``
    (``models.truncation_overrides``: ``benchmark/task``, ``task`` or ``"*"``), then the model's own
    (``spec.truncation``, e.g. ``skip`` for every task of that model), then the task file's ``truncation``.
    """
    catalog = catalog or load_catalog()
    needed = ("instance_id", "benchmark", "task", "prompt", "context", "max_new_tokens")
    missing = [c for c in needed if c not in instances.columns]
    if missing:
        raise ValueError(f"instances: missing columns {missing} needed for generation")
    params = generator.sampling_params()
    sp_json, sp_hash = sampling_params_json(params), sampling_params_hash(params)
    fp = spec.fingerprint()
    by_record = bool(getattr(generator, "keyed_by_record", False))
    plain_route = str(getattr(generator, "plain_prompt_route", "") or "")
    honours_api = bool(getattr(generator, "honours_api_decoding", False))
    check_location(spec.slug, spec.thinking_settings, spec.backend, spec.api)
    plan = PartitionPlan(generator.backend, generator.model_id, sp_json, sp_hash, thinking=spec.thinking_settings)
    if "record_id" not in instances.columns:
        instances = instances.with_columns(pl.lit("").alias("record_id"))
    if "target_tokens" not in instances.columns:
        instances = instances.with_columns(pl.lit(None, pl.Int64).alias("target_tokens"))
    if "protocol" not in instances.columns:
        instances = instances.with_columns(pl.lit("ours").alias("protocol"))
    counted = "input_tokens" in instances.columns and "tokenizer" in instances.columns
    extra = ["input_tokens", "tokenizer"] if counted else []
    # A followup that fills the released record's fields (Followup.fill) reads them from the instance's columns.
    extra += [c for c in RECORD_COLUMNS if c in instances.columns and c not in (*needed, "record_id")]
    extra.append("protocol")
    temperatures: dict[tuple[str, str], float | None] = {}
    api_decodings: dict[tuple[str, str], ApiDecoding | None] = {}
    for row in instances.sort("instance_id").select(*needed, "record_id", "target_tokens", *extra).iter_rows(named=True):
        for col in needed:
            if row[col] is None:
                raise ValueError(f"instance {row['instance_id']!r}: field {col!r} is null")
        try:
            task = catalog.resolve(row["benchmark"], row["task"])
            policy = policy_for_task(row["benchmark"], row["task"], spec.truncation or task.truncation,
                                     truncation_overrides)
        except ValueError as exc:
            raise ValueError(f"instance {row['instance_id']!r}: {exc}") from exc
        # The task's chat-template switch matters only for a model that has a chat template to skip.
        plain = spec.chat_template and not task.chat_template
        record_id = row["record_id"] or ""
        new_tokens = with_budget(int(row["max_new_tokens"]), plan.thinking)
        # A generator that sends plain prompts another way than it once did (the openai backend's chat mode: to the
        # completions endpoint, where the server once templated them) says so: such rows get keys of their own.
        key_fp = f"{fp}+{plain_route}" if plain and plain_route else fp
        # An official protocol's decoding and input budget (module docstring of base.GenerationRequest): each enters
        # the row's identity only when it changes what is generated, so every other row keeps its key and id.
        official = (row["protocol"] or "").startswith("official") and not by_record
        temperature = api = None
        if official:
            where = (row["benchmark"], task.name)
            if where not in temperatures:
                temperatures[where] = official_temperature(*where)
                api_decodings[where] = official_api_decoding(*where)
                if honours_api and api_decodings[where] is not None:  # the system turn read: it goes to the server
                    api_decodings[where] = api_decodings[where].resolved()
            temperature, api = temperatures[where], api_decodings[where]
        budget = protocol_budget(row) if official else None
        window_budget = spec.max_model_len - new_tokens
        input_budget = budget if budget is not None and budget < window_budget else None
        row_params = dict(params)
        if budget is not None and budget > window_budget:
            row_params["protocol_note"] = window_note(budget, window_budget, spec, new_tokens)
        if api is not None and not honours_api:  # a local engine needs its cap: the row says so
            row_params["api_decoding_note"] = local_engine_note(api, generator.backend, new_tokens)
            api = None
        request = GenerationRequest(row["instance_id"], row["prompt"], new_tokens, policy, row["context"],
                                    chat_template=not plain, stop=task.stop, record_id=record_id,
                                    counted_tokens=row["input_tokens"] if counted else None,
                                    counted_with=(row["tokenizer"] or "") if counted else "",
                                    temperature=temperature,
                                    seed=sampling_seed(row["instance_id"]) if temperature is not None else 0,
                                    input_budget=input_budget, api=api)
        decoding = request_decoding(request)
        row_params.update(decoding)
        row_json, row_hash = ((sampling_params_json(row_params), sampling_params_hash(row_params))
                              if row_params != params else ("", ""))
        key_hash = sampling_params_hash({**params, **decoding}) if decoding else sp_hash
        key = cache_key(row["prompt"], new_tokens, policy, key_fp, key_hash, plain, task.stop,
                        record_id if by_record else "", input_budget)
        request.key = key
        if task.followup is not None and not by_record:  # an imported prediction is already the final answer
            followup = task.followup
            if plan.thinking:  # the answer call thinks too
                followup = followup.model_copy(
                    update={"max_new_tokens": with_budget(followup.max_new_tokens, plan.thinking)})
            record = {}
            if followup.fill:
                try:
                    record = record_values(followup, record_of(row["benchmark"], row),
                                           f"instance {row['instance_id']!r} (task {task.qualified_name})")
                except ValueError as exc:
                    raise ValueError(str(exc) if str(exc).startswith("instance ") else
                                     f"instance {row['instance_id']!r} (task {task.qualified_name}): {exc}") from None
            chain = Chain(request, followup, record)
            plan.chains[chain.final.key] = chain
            plan.first_calls[key] = PlannedGeneration(
                generation_id(row["instance_id"] + "#first-call", spec.slug, fp, key_hash), row["instance_id"], request,
                None, row_json, row_hash)
            request = chain.final
        plan.items.append(
            PlannedGeneration(
                generation_id=generation_id(row["instance_id"], spec.slug, fp, key_hash),
                instance_id=row["instance_id"],
                request=request,
                target_tokens=row["target_tokens"],
                sampling_params=row_json,
                sampling_params_hash=row_hash,
            )
        )
    return plan


def chunk_size(spec: ModelSpec) -> int:
    """How many requests go to the backend in one call (0: the whole partition at once). Rows are stored as
    the backend hands them over either way: one by one for the openai backend, per call for the others. The
    backend declares which (BackendCapabilities.requests_per_call): the whole partition (vllm's engine batches it
    continuously, openai keeps max_concurrency requests in flight, imported looks answers up), ``batch_size`` *
    FLUSH_EVERY_BATCHES (transformers), or one at a time (llamacpp)."""
    per_call = capabilities(spec.backend).requests_per_call
    if per_call == FLUSHED_BATCHES:
        return spec.batch_size * FLUSH_EVERY_BATCHES
    if per_call == ONE_REQUEST:
        return 1
    return 0  # WHOLE_PARTITION


def row_status(result: GenerationResult, output: str, finish_reason: str) -> str:
    """A generation row's status (schemas.GENERATION_STATUSES): the backend's ("skipped", "invalid") when it set
    one, else "empty" (nothing to score), "cut" (stopped at max_new_tokens) or "answered"."""
    if result.status:
        if result.status not in schemas.GENERATION_STATUSES:
            raise ValueError(f"generation {result.key!r}: unknown status {result.status!r}; expected one of "
                             f"{list(schemas.GENERATION_STATUSES)}")
        return result.status
    if not output.strip():
        return "empty"
    return "cut" if finish_reason == "length" else "answered"


def generation_row(plan: PartitionPlan, result: GenerationResult, planned: PlannedGeneration) -> dict:
    """The generations row of one result (schemas.GENERATIONS columns, Python values).

    A reasoning model's results come split (generate_partition wraps its generator in a ThinkingGenerator):
    ``output`` is the answer, ``thinking`` the thoughts, status "invalid" when they ran out; so the stop sequences
    below cut the answer only, and row_status reads the answer. A task's stop sequences end its output, whatever
    the backend supports (finish_reason "stop")."""
    output, cut = cut_at_stop(result.output, planned.request.stop)
    finish = "stop" if cut else result.finish_reason
    return {
        "generation_id": planned.generation_id,
        "instance_id": planned.instance_id,
        "output": output,
        "prompt_tokens": result.prompt_tokens,
        "original_prompt_tokens": result.original_prompt_tokens,
        "truncated": result.truncated,
        "truncation_policy": result.truncation_policy,
        "completion_tokens": result.completion_tokens,
        "finish_reason": finish,
        "latency_s": result.latency_s,
        "backend": plan.backend,
        "model_id": plan.model_id,
        "sampling_params": planned.sampling_params or plan.sampling_params,
        "sampling_params_hash": planned.sampling_params_hash or plan.sampling_params_hash,
        "cache_key": result.key,
        "target_tokens": planned.target_tokens,
        "status": row_status(result, output, finish),
        "thinking": result.thinking,
        "prompt_ids_hash": result.prompt_ids_hash,
        "chat_template_source": result.chat_template_source,
        "bos_tokens": result.bos_tokens,
    }


def result_rows(plan: PartitionPlan, results: list[GenerationResult], by_key: dict[str, PlannedGeneration]) -> pl.DataFrame:
    """The generations rows of ``results`` (:func:`generation_row`), in their order."""
    rows = [generation_row(plan, r, by_key[r.key]) for r in results]
    return schemas.conform(pl.DataFrame(rows, schema=schemas.TABLES["generations"], orient="row"), "generations")


def with_stored_defaults(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of a generation store written before a column existed, completed: ``status`` from the output and
    finish reason (as :func:`row_status` derives it), ``thinking`` / ``prompt_ids_hash`` / ``chat_template_source``
    "" and ``bos_tokens`` / ``target_tokens`` null (unknown: the guard says so rather than guessing)."""
    derived = (pl.when(pl.col("output").str.strip_chars() == "").then(pl.lit("empty"))
               .when(pl.col("finish_reason") == "length").then(pl.lit("cut")).otherwise(pl.lit("answered")))
    fills = {"status": derived, "thinking": pl.lit(""), "prompt_ids_hash": pl.lit(""),
             "chat_template_source": pl.lit(""), "bos_tokens": pl.lit(None, pl.Int32),
             "target_tokens": pl.lit(None, pl.Int64)}
    for column, value in fills.items():
        if column not in rows.columns:
            rows = rows.with_columns(value.alias(column))
        elif column in ("status", "thinking", "prompt_ids_hash", "chat_template_source"):
            rows = rows.with_columns(pl.col(column).fill_null(value))
    return rows


def _generate_into(plan: PartitionPlan, generator: Generator, writer: StoreWriter, todo: list[PlannedGeneration],
                   stored: pl.DataFrame | None, chunk: int, progress: Callable[[int], None] | None,
                   on_stored: Callable[[int, int], None] | None) -> None:
    """``todo`` through ``generator`` (wrapped for a reasoning model and for followups), ``chunk`` requests per
    call (0: one call); each result's row (and each first call's) goes to ``writer`` as soon as it exists."""
    by_key = {p.request.key: p for p in plan.items}
    if plan.thinking:  # thoughts out of the output before the followup, the stop sequences and the status see it
        generator = ThinkingGenerator(generator, plan.thinking)
    if plan.chains:  # two calls for a task with a followup; first calls already stored are not made again
        generator = FollowupGenerator(
            generator, plan.chains, stored_results(stored, plan.first_calls),
            lambda made: writer.add([generation_row(plan, r, plan.first_calls[r.key]) for r in made]))
    reported = time.monotonic()
    done = 0

    def keep(result: GenerationResult) -> None:
        nonlocal reported, done
        writer.add([generation_row(plan, result, by_key[result.key])])
        done += 1
        if on_stored is not None and time.monotonic() - reported >= REPORT_EVERY_S:
            reported = time.monotonic()
            on_stored(done, len(todo))
        # Ctrl-C / SIGTERM whose interrupt the code it landed in dropped (an asyncio callback logs it and goes on):
        # stop after this stored answer rather than at the end of the partition.
        stop_if_interrupted()

    step = chunk if chunk > 0 else len(todo)
    try:
        for start in range(0, len(todo), step):
            stop_if_interrupted()
            stream_results(generator, [p.request for p in todo[start : start + step]], progress, keep)
    finally:
        if on_stored is not None and done:
            on_stored(done, len(todo))


@dataclass
class PartitionOutcome:
    rows: pl.DataFrame  # one row per planned generation, in instance_id order
    reused: int  # rows found in the store
    generated: int  # rows generated by this call


def generate_partition(
    plan: PartitionPlan,
    generator: Generator,
    store: GenerationCheckpoint,
    chunk: int,
    progress: Callable[[int], None] | None = None,
    on_stored: Callable[[int, int], None] | None = None,
) -> PartitionOutcome:
    """Reuse stored rows, generate the missing ones (``chunk`` requests per call to the generator, 0: all in
    one), store each finished row at once, return the whole partition.

    ``progress(n)``: n more rows done (reused ones first); ``on_stored(stored, total)``: how many of the rows to
    generate are stored, at most every ``REPORT_EVERY_S`` seconds and once at the end (a log line)."""
    by_key = {p.request.key: p for p in plan.items}
    stored = store.load()
    stored_keys = set(stored["cache_key"]) if stored is not None and "cache_key" in stored.columns else set()
    todo = [p for p in plan.items if p.request.key not in stored_keys]
    # Identical prompts (same key) are generated once.
    unique_todo = list({p.request.key: p for p in todo}.values())
    reused = len(plan.items) - len(todo)
    if progress is not None and reused:
        progress(reused)
    if unique_todo:
        with store.writer(schemas.TABLES["generations"]) as writer:
            _generate_into(plan, generator, writer, unique_todo, stored, chunk, progress, on_stored)

    everything = store.load()
    if everything is None:
        everything = schemas.empty("generations")
    # Stored rows may come from another instance with the same prompt, or an older plan:
    # ids (and the instance's level target) come from this plan, outputs from the store.
    # The row's sampling params come from this plan too: a protocol note about this model's window is the plan's.
    outputs = with_stored_defaults(everything).filter(pl.col("cache_key").is_in(list(by_key))).drop(
        "generation_id", "instance_id", "target_tokens", "sampling_params", "sampling_params_hash")
    ids = pl.DataFrame(
        {
            "generation_id": [p.generation_id for p in plan.items],
            "instance_id": [p.instance_id for p in plan.items],
            "cache_key": [p.request.key for p in plan.items],
            "target_tokens": [p.target_tokens for p in plan.items],
            "sampling_params": [p.sampling_params or plan.sampling_params for p in plan.items],
            "sampling_params_hash": [p.sampling_params_hash or plan.sampling_params_hash for p in plan.items],
        },
        schema={**dict.fromkeys(("generation_id", "instance_id", "cache_key", "sampling_params",
                                 "sampling_params_hash"), pl.String),  # typed when empty
                "target_tokens": pl.Int64},
    )
    rows = ids.join(outputs, on="cache_key", how="left", maintain_order="left")
    missing = rows.filter(pl.col("output").is_null())["instance_id"].to_list()
    if missing:
        raise RuntimeError(f"generations: no stored row for instances {missing[:5]} (of {len(missing)}) after generating")
    return PartitionOutcome(schemas.conform(rows.sort("instance_id"), "generations"), reused, len(unique_todo))
