"""Two calls for one generation: a task's ``followup`` (chain of thought).

LongBench v2's chain-of-thought mode (spec released_benchmarks.md "LongBench v2") asks twice: a first call
(1,024 new tokens) produces the reasoning, a second call (128 tokens) is given that reasoning and asked for
the answer. A task declares it as data (tasks/spec.py ``Followup``): its instances' prompt and
``max_new_tokens`` are the first call's; ``followup.prompt`` renders the second call from ``{prompt}`` (the
first call's prompt) and ``{reasoning}`` (the first call's reply, cut at the task's stop sequences), or, with
``followup.fill`` (an official protocol: LongBench v2's ``0shot_cot_ans.txt``, which shows the question and
choices but not the document), from the authors' placeholders filled in their order with the reasoning and the
released record's fields (:func:`render_filled`; the plan reads the fields once per instance, :class:`Chain`
``record``).

How it runs (generate/partition.py): the plan gives each chained instance a :class:`Chain` and a final
cache key (:func:`followup_key`: the first call's key plus the followup's template and length, so a CoT row
never shares a key with a direct-mode row or with its own first call). :class:`FollowupGenerator` wraps the
model's generator: requests without a chain go straight through; chained ones go in two batched passes
(every first call of the chunk at once, then every second call), so the engine still batches; with a backend
that hands results over one by one (the openai backend), every first call is saved and every final result
stored as soon as it arrives.

What the generations row holds (no schema change): ``output`` is the second call's reply (the answer the
metric reads); ``prompt_tokens``, ``original_prompt_tokens``, ``completion_tokens`` and ``latency_s`` are the
sums over both calls; ``truncated`` is true when either call was cut; ``finish_reason`` is the second call's.
A first call that was not sent (truncation policy ``skip``: ``status`` skipped) or whose thinking ran out
(``invalid``) ends the chain: no second call is made, and the row is the first call's result under the final
key (the status says why there is no answer).
The reasoning is kept as its own row in the partition's generation store (the checkpoint, kept after the
partition is written; its ``cache_key`` is the first call's key, :attr:`Chain.first`): it is what a killed run
resumes from without asking again, and :func:`reasoning_of` reads it back per instance.

A generator that answers by record (``keyed_by_record``: imported predictions) gets no followup: an
imported prediction is already the final answer. Pure: no Dagster.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from lc_pipeline.generate.base import GenerationRequest, GenerationResult, Generator, cut_at_stop, stream_results
from lc_pipeline.schemas import NOT_SCORED
from lc_pipeline.tasks.spec import Followup

__all__ = ["Chain", "FollowupGenerator", "fill_in_order", "followup_key", "reasoning_of", "record_values",
           "render_filled", "render_followup", "stored_results"]

_PLACEHOLDER = re.compile(r"\{(prompt|reasoning)\}")


def render_followup(template: str, prompt: str, reasoning: str) -> str:
    """The second call's prompt: ``{prompt}`` and ``{reasoning}`` filled in one pass (a reasoning that writes
    ``{prompt}`` stays as written); every other character of the template is literal."""
    return _PLACEHOLDER.sub(lambda m: prompt if m[1] == "prompt" else reasoning, template)


def fill_in_order(template: str, pairs: Sequence[tuple[str, str]], *, strip: bool = False) -> str:
    """``template`` with each ``(placeholder, value)`` replaced in turn (``str.replace``, every occurrence), as the
    authors' harnesses fill their templates (LongBench v2's ``pred.py``: ``.replace('$DOC$', ...).replace('$Q$',
    ...)``...); a value is stripped first when ``strip``. A value that holds a later placeholder is filled too, as
    theirs is."""
    for placeholder, value in pairs:
        template = template.replace(placeholder, value.strip() if strip else value)
    return template


def record_values(followup: Followup, record: Mapping[str, object], where: str = "?") -> dict[str, str]:
    """The ``record.<field>`` values ``followup.fill`` names, from ``record`` (the benchmark's ``record_of``); a
    field the record lacks is an error naming ``where`` (the instance) and the field."""
    values: dict[str, str] = {}
    for _, source in followup.fill:
        if source.startswith("record."):
            name = source.removeprefix("record.")
            if name not in record:
                raise ValueError(f"{where}: followup.fill names record field {name!r}, which the record does not "
                                 f"keep (it has {sorted(record)})")
            values[name] = str(record[name])
    return values


def render_filled(followup: Followup, prompt: str, reasoning: str, record: Mapping[str, str]) -> str:
    """The second call's prompt of a followup with ``fill`` (tasks/spec.py ``Followup``)."""
    def value(source: str) -> str:
        if source == "reasoning":
            return reasoning
        if source == "prompt":
            return prompt
        return record[source.removeprefix("record.")]

    return fill_in_order(followup.prompt, [(p, value(s)) for p, s in followup.fill], strip=followup.strip)


def followup_key(first_key: str, followup: Followup) -> str:
    """The final row's cache key: the first call's key (prompt, model, decoding, ...) and the followup (its
    ``fill`` and ``strip`` when set; the record's values come with the first call's prompt)."""
    parts: list = [first_key, "followup", hashlib.sha256(followup.prompt.encode()).hexdigest(),
                   followup.max_new_tokens]
    if followup.fill or followup.strip:
        parts += [[list(p) for p in followup.fill], followup.strip]
    blob = json.dumps(parts)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Chain:
    """One chained generation: ``first`` is the reasoning call (its key: the first call's own cache key),
    ``final`` the same request under the final key (what the plan and the generations row carry)."""

    first: GenerationRequest
    followup: Followup
    # The released record's fields that ``followup.fill`` names (record_values); {} for a followup without fill.
    record: Mapping[str, str] = field(default_factory=dict)

    @property
    def final(self) -> GenerationRequest:
        return replace(self.first, key=followup_key(self.first.key, self.followup))

    def second(self, reasoning: str) -> GenerationRequest:
        """The answer call, under the final key: the followup's prompt and length, the rest as the first call
        (truncation policy, context, chat-template switch, stop sequences, record)."""
        if self.followup.fill:
            prompt = render_filled(self.followup, self.first.prompt, reasoning, self.record)
        else:
            prompt = render_followup(self.followup.prompt, self.first.prompt, reasoning)
        return replace(self.first, key=self.final.key, max_new_tokens=self.followup.max_new_tokens, prompt=prompt)


def combine(key: str, first: GenerationResult, second: GenerationResult) -> GenerationResult:
    """One result for both calls: the second call's output and finish reason, token counts and latency
    summed, truncated when either call was cut."""
    return GenerationResult(
        key=key,
        output=second.output,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        original_prompt_tokens=first.original_prompt_tokens + second.original_prompt_tokens,
        truncated=first.truncated or second.truncated,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        finish_reason=second.finish_reason,
        latency_s=first.latency_s + second.latency_s,
        truncation_policy=second.truncation_policy,
        # The answer's call is the prompt that was fed for it; a first call not sent (or invalid) marks the chain.
        prompt_ids_hash=second.prompt_ids_hash,
        bos_tokens=second.bos_tokens,
        chat_template_source=second.chat_template_source,
        status=first.status or second.status,
        thinking=second.thinking,
    )


def stored_results(rows: pl.DataFrame | None, keys: Sequence[str] | set[str]) -> dict[str, GenerationResult]:
    """The generation store's rows whose ``cache_key`` is in ``keys``, as results (first calls already made)."""
    if rows is None or rows.is_empty():
        return {}
    wanted = rows.filter(pl.col("cache_key").is_in(list(keys)))
    return {
        r["cache_key"]: GenerationResult(
            key=r["cache_key"], output=r["output"], prompt_tokens=r["prompt_tokens"],
            original_prompt_tokens=r["original_prompt_tokens"], truncated=r["truncated"],
            completion_tokens=r["completion_tokens"], finish_reason=r["finish_reason"], latency_s=r["latency_s"],
            truncation_policy=r["truncation_policy"], status=_stored_status(r),
        )
        for r in wanted.iter_rows(named=True)
    }


def _stored_status(row: Mapping) -> str:
    """A stored row's backend-decided status (skipped / invalid), "" otherwise (derived again when written)."""
    status = row.get("status") or ""
    return status if status in NOT_SCORED else ""


def reasoning_of(store_rows: pl.DataFrame | None, chains: Mapping[str, Chain],
                 instance_of: Mapping[str, str]) -> dict[str, str]:
    """instance_id -> the first call's reply (the reasoning the answer was given), read from the generation
    store; ``chains`` by final key (a plan's), ``instance_of`` final key -> instance_id."""
    firsts = stored_results(store_rows, {c.first.key for c in chains.values()})
    return {instance_of[k]: firsts[c.first.key].output for k, c in chains.items()
            if k in instance_of and c.first.key in firsts}


class FollowupGenerator:
    """A :class:`~lc_pipeline.generate.base.Generator` running chained requests in two passes.

    ``chains``: final key -> :class:`Chain`. ``known``: first calls already made (from the store); ``save``
    gets every new batch of first-call results (cut at their stop sequences by the caller when it writes
    them) before the second pass starts, so a run killed between the passes keeps its reasoning.
    """

    def __init__(self, inner: Generator, chains: Mapping[str, Chain], known: Mapping[str, GenerationResult],
                 save: Callable[[list[GenerationResult]], None]) -> None:
        self.inner, self.chains, self.known, self.save = inner, dict(chains), dict(known), save
        self.backend, self.model_id = inner.backend, inner.model_id
        self.streams_results = bool(getattr(inner, "streams_results", False))

    def sampling_params(self) -> dict:
        return self.inner.sampling_params()

    def generate(self, requests: Sequence[GenerationRequest], progress: Callable[[int], None] | None = None,
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        """One result per request; each final result also to ``on_result`` as soon as it exists (and each first
        call's to ``save``), when the inner generator hands results over one by one (``streams_results``)."""
        results: dict[str, GenerationResult] = {}

        def deliver(result: GenerationResult) -> None:
            results[result.key] = result
            if on_result is not None:
                on_result(result)

        def first_made(result: GenerationResult) -> None:
            self.save([result])
            self.known[result.key] = result

        plain = [r for r in requests if r.key not in self.chains]
        chained = [self.chains[r.key] for r in requests if r.key in self.chains]
        if plain:
            stream_results(self.inner, plain, progress, deliver)
        if chained:
            todo = list({c.first.key: c.first for c in chained if c.first.key not in self.known}.values())
            if todo:
                if self.streams_results:
                    stream_results(self.inner, todo, None, first_made)
                else:  # one batch: saved at once, before the second pass
                    made = self.inner.generate(todo)
                    self.save(made)
                    self.known.update((r.key, r) for r in made)
            # A first call not sent (skip) or without an answer (invalid) ends its chain: no second call.
            ended = [c for c in chained if self.known[c.first.key].status in NOT_SCORED]
            for chain in ended:
                deliver(replace(self.known[chain.first.key], key=chain.final.key))
            if ended and progress is not None:
                progress(len(ended))
            going = {c.final.key: c for c in chained if self.known[c.first.key].status not in NOT_SCORED}
            seconds = [c.second(cut_at_stop(self.known[c.first.key].output, c.first.stop)[0]) for c in going.values()]
            if seconds:
                stream_results(self.inner, seconds, progress,
                               lambda answer: deliver(combine(answer.key, self.known[going[answer.key].first.key],
                                                              answer)))
        return [results[r.key] for r in requests]
