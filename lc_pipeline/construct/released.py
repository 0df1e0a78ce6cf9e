"""A published benchmark run as released: one instance per released record (config ``released:``).

The QA suite re-assembles a source's documents around its evidence; this builder does the other
half (spec released_benchmarks.md): each record keeps the context its authors released, verbatim,
and is prompted by its task file (our wording, or the user's copy of the benchmark's prompt file:
``prompt_file``), with the task's answer length. Under the config's official protocol
(config.OfficialProtocol) the prompt is the one the authors' harness builds from the record and the answer
length theirs; the row's ``protocol`` says which (``official@<commit>`` or ``ours``), and an official row's id
differs from ours. Nothing is cut here: a prompt longer than a model's window is cut at generation time by the
task's truncation policy (the protocol's, under official), and the generation row says so.

A record's level (a partition of the length dimension) is the benchmark's own group, chosen by the
config's ``released.level_by`` (config.ReleasedConfig): the single level, the record's released
``length`` in ``bounds`` (LongBench-E's 0-4k / 4-8k / 8k+), the level it was released at (LV-Eval's
``<dataset>_<level>.jsonl``) or the prompt's token count in ``bounds`` (Loong's sets). Records in no
level are counted in the level's metadata (``records_outside_levels``), never silently lost.

Pure: no Dagster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl

from lc_pipeline.construct.build_request import BuildError
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.construct.rows import instance_row, instances_frame
from lc_pipeline.fingerprints import short_id

SUITE = "released"
BATCH_RECORDS = 256  # records per INSTANCES frame: one row group, bounded memory


class ReleasedRecordError(ValueError):
    """A record that cannot be run as released; the message names the source, the record and the field."""


def record_fields(item: dict[str, Any]) -> dict[str, Any]:
    """The item's ``record_fields`` JSON as a mapping (``{}`` when empty)."""
    raw = item.get("record_fields") or "{}"
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ReleasedRecordError(f"item {item['item_id']!r}: field 'record_fields' is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ReleasedRecordError(f"item {item['item_id']!r}: field 'record_fields' must be a JSON object")
    return fields


def in_bounds(value: int, bounds: dict[str, tuple[int, int | None]]) -> str | None:
    """The level whose ``[low, high)`` holds ``value`` (the first in ``bounds`` order), else None."""
    for level, (low, high) in bounds.items():
        if value >= low and (high is None or value < high):
            return level
    return None


def level_of(item: dict[str, Any], fields: dict[str, Any], input_tokens: int, released, lengths) -> str | None:
    """The level (partition) a record belongs to, by ``released.level_by`` (module docstring)."""
    rule = released.level_by
    if rule == "one":
        return lengths[0]
    if rule == "prompt_tokens":
        return in_bounds(input_tokens, released.bounds)
    key = "length" if rule == "record_length" else "level"
    value = fields.get(key)
    if value is None:
        raise ReleasedRecordError(f"item {item['item_id']!r} (record {item['record_id']!r}): released.level_by "
                                  f"{rule!r} needs the record's {key!r}, which its source did not keep")
    if rule == "record_length":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReleasedRecordError(f"item {item['item_id']!r}: field 'length' must be an integer, got {value!r}")
        return in_bounds(value, released.bounds)
    return str(value) if str(value) in lengths else None


def in_this_level(item: dict[str, Any], fields: dict[str, Any], input_tokens: int, inputs) -> bool:
    """Whether the record belongs to the level being built (:func:`level_of`); a record in no level is counted
    in the level's metadata (``records_outside_levels``), never silently lost."""
    try:
        record_level = level_of(item, fields, input_tokens, inputs.config.released, inputs.config.lengths)
    except ReleasedRecordError as exc:
        raise BuildError(str(exc)) from None
    if record_level is None:
        inputs.meta["records_outside_levels"] = inputs.meta.get("records_outside_levels", 0) + 1
    return record_level == inputs.level


def in_frames(rows) -> Iterator[pl.DataFrame]:
    """INSTANCES frames of at most ``BATCH_RECORDS`` rows (one row group each, bounded memory); a level no
    record falls in is one empty frame (an empty partition, written as one)."""
    batch: list[dict[str, Any]] = []
    yielded = False
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH_RECORDS:
            yield instances_frame(batch)
            batch, yielded = [], True
    if batch or not yielded:
        yield instances_frame(batch)


def _record_tasks(items: pl.DataFrame, released, catalog, modes, prompts, config, level):
    """(item, task spec, prompt) for each record and each task that runs it: the record's own task, then the
    tasks whose ``records_of`` names it."""
    for item in items.iter_rows(named=True):
        task = item["task"]
        if task not in prompts:
            try:
                spec = catalog.resolve(released.benchmark, task)
            except ValueError as exc:
                raise BuildError(f"released {released.benchmark} at {level}: item {item['item_id']!r}: {exc}") from None
            prompts[task] = (spec, _prompt(spec, config))
            for mode in modes.get(spec.name, ()):
                prompts[f"{task}\x1f{mode.name}"] = (mode, _prompt(mode, config))
        yield item, *prompts[task]
        for mode in modes.get(prompts[task][0].name, ()):
            yield item, *prompts[f"{task}\x1f{mode.name}"]


def _prompt(spec, config) -> QAPrompt:
    if spec.prompt is None:
        raise BuildError(f"task {spec.qualified_name} ({spec.declared_in}) has no prompt: a record run as released is "
                         "prompted by its task")
    return QAPrompt(spec.prompt, spec.max_new_tokens or config.max_new_tokens,
                    short_id(spec.prompt, spec.max_new_tokens, length=16))


def released_records(request) -> Iterator[pl.DataFrame]:
    """Builder ``released.records``: every record of the configured sources whose task the benchmark
    declares (``released.tasks`` narrows them, ``released.subset`` picks a compressed benchmark's records), in
    the level the record belongs to, prompted by its task with its released context."""
    yield from in_frames(_released_rows(request))


def _released_rows(request) -> Iterator[dict[str, Any]]:
    inputs = request.inputs
    inputs.meta.setdefault("records_outside_levels", 0)  # reported for every level, 0 included
    config, catalog, counter, level = inputs.config, inputs.catalog, inputs.counter, inputs.level
    released = config.released
    if released is None:
        raise BuildError("builder released.records runs only in a config with a `released:` section")
    items = inputs.items
    if released.subset:  # a compressed benchmark's samples of the released one (tasks.registry.RECORD_SUBSETS)
        from lc_pipeline.tasks.registry import RECORD_SUBSETS

        subset_item_ids = RECORD_SUBSETS.get(released.benchmark, where=f"config released.subset {released.subset!r}")
        keep = subset_item_ids(items, released.subset)
        items = items.filter(pl.col("item_id").is_in(sorted(keep)))
    # Tasks that run another task's records (LongBench v2's chain-of-thought mode runs the direct mode's):
    # ``builder.options.records_of`` names that task.
    modes: dict[str, list[Any]] = {}
    for spec in request.tasks:
        of = spec.builder.options.get("records_of")
        if of:
            modes.setdefault(of, []).append(spec)
    prompts: dict[str, tuple[Any, QAPrompt]] = {}
    wanted = {t.name for t in request.tasks}
    official = config.official_protocol()
    for item, spec, prompt in _record_tasks(items, released, catalog, modes, prompts, config, level):
        if spec.name not in wanted:
            continue
        if not item["context"]:
            raise BuildError(f"item {item['item_id']!r} of source {item['source']!r}: field 'context' is empty: its "
                             f"source keeps no released context, so it cannot run as released (builder "
                             f"{released.builder})")
        fields = record_fields(item)
        if official is None:
            text, max_new_tokens = prompt.render(item["context"], item["question"]), prompt.max_new_tokens
            id_parts: tuple = (prompt.template, max_new_tokens)
        else:
            text, max_new_tokens = _official_prompt(official, spec, item)
            id_parts = (official.label, max_new_tokens)  # the prompt is the authors' file's at that commit
        input_tokens = counter.count(text)
        if not in_this_level(item, fields, input_tokens, inputs):
            continue
        yield instance_row(
            instance_id=short_id(SUITE, item["item_id"], spec.name, level, *id_parts, config.tokenizer),
            item_id=item["item_id"], source=item["source"], suite=SUITE, task=spec.name, category=spec.category,
            language=item["language"], depth=None, evidence_depths=[], question=item["question"],
            answers=item["answers"], answer_keywords=item["answer_keywords"],
            evidence_doc_ids=item["evidence_doc_ids"], context_doc_ids=[], n_hard_negatives=0,
            n_filler_documents=0, context=item["context"], prompt=text, tokenizer=config.tokenizer,
            target_tokens=None, input_tokens=input_tokens, context_tokens=counter.count(item["context"]),
            max_new_tokens=max_new_tokens, target_units=None, record_id=item["record_id"],
            record_fields=item["record_fields"], protocol="ours" if official is None else official.label,
        )


def _official_prompt(official, spec, item: dict[str, Any]) -> tuple[str, int]:
    """(prompt, max_new_tokens) of ``item`` for ``spec`` under the official protocol: the authors' prompt built
    from the record, their answer length (the task file's when their table has no entry for the task)."""
    try:
        text = official.prompt(spec.name, item)
    except ValueError as exc:
        raise BuildError(f"item {item['item_id']!r} (task {spec.qualified_name}, protocol {official.label}): "
                         f"{exc}") from None
    return text, int(official.max_new_tokens.get(spec.name) or spec.max_new_tokens)
