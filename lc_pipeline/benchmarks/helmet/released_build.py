"""Builder ``helmet.released``: HELMET run on its released data (config ``helmet-released``).

Tasks are HELMET's (benchmarks/helmet/task_files/helmet*.yaml: their wording, answer prefix, answer length, chat-template
setting, metrics and judge rubric). Two ways to an instance:

* a dataset HELMET releases per level (:data:`released_data.DATASETS`: JSON KV, the three RULER tasks, the
  four RAG datasets, MS MARCO): one instance per item of the ``helmet_released`` sources whose task it is and
  whose file is the level being built (``released.level_by: record_level``). Its context is the one the
  source assembled as HELMET does (passages, JSON object, haystack); the prompt is the task's template
  filled with that context, the question and the demonstrations the source chose, written in the task's
  format (``Question: ... / Answer: ...``, ``Query: ... / Ranking: ...``, ``Key: ... / Corresponding value:
  ...``). Nothing is retrieved, re-filled or cut: a prompt longer than a model's window is cut at
  generation by the task's truncation policy, as for every released benchmark;
* ALCE (ASQA, QAMPARI): HELMET reads one file at every level; each question's first n passages (n by level:
  the task's ``builder.options.per_level``, HELMET's table) as ``Document [i](Title: t): text``, joined by a
  blank line as HELMET joins them, with the demonstrations its source drew: each the task's template filled
  with the demonstration's question and all its passages, then its cited answer after the answer prefix,
  separated by two blank lines. ``record_fields`` holds what the correctness and citation metrics read
  (``style``, ``question``, ``passages`` shown, ``qa_pairs`` / ``answer_clusters``);
* ICL (``builder.options.kind: icl``), which HELMET builds from the datasets at run time: its test sample,
  demonstrations and label permutations drawn as HELMET draws them (benchmarks/helmet/released_icl.py) from the
  items of the task's ``kind: icl`` source, the level's shots its ``per_level``, ``helmet.n_per_task`` test
  texts;
* LongQA and Summ, which HELMET also builds at run time: the constructed HELMET builder (benchmarks/helmet/construction/)
  over the config's other sources, with the config's ``helmet:`` sizes (``n_per_task``, ``shots``).

Under ``protocol: official`` (benchmarks/helmet/protocol.py) every prompt is HELMET's ``data.py`` template instead
of the task's, filled from the same record (LongQA / Summ: from the constructed row's context, question and
options, 0-shot), the chat-mode ones without the answer prefix; ALCE's passages are written with HELMET's
``doc_prompt``; each row's ``record_fields`` adds ``protocol_budget`` and ``protocol_note`` (HELMET's budget
L - max_new_tokens and how generation here differs) and ``protocol`` (read by the ICL metric, HE9), its ``protocol`` column the protocol's label, and its
instance id the label in place of the task's prompt. Under ``ours`` nothing changes.

A released dataset with no item at the level is an error naming the file HELMET ships for it.

Pure: no Dagster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl

from lc_pipeline.benchmarks.helmet.released_data import DATASETS, PER_LEVEL, level_file
from lc_pipeline.benchmarks.helmet.construction.cite import format_cited
from lc_pipeline.benchmarks.helmet.construction.pools import per_level_count
from lc_pipeline.construct.released import (
    SUITE,
    in_frames,
    in_this_level,
    record_fields,
)
from lc_pipeline.construct.rows import instance_row
from lc_pipeline.fingerprints import short_id
from lc_pipeline.text import fill_template

BUILDER = "helmet.released"
SOURCE_KIND = "helmet_released"


def _unquoted(key: str) -> str:
    """A JSON key without one pair of enclosing double quotes: the task's template quotes it."""
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


def _singular(kind: str) -> str:
    """RULER's ``type_needle_v`` (``numbers``, ``uuids``) as the task's ``{kind}`` (``number``, ``uuid``)."""
    return kind.removesuffix("s")


def prompt_fields(kind: str, item: dict[str, Any], fields: dict[str, Any], answer_prefix: str | None) -> dict[str, str]:
    """The task template's fields for one released item: ``context``, ``question``, ``demos`` (and RULER's
    ``kind``), the demonstrations written in the task's format with its answer prefix."""
    demos = fields.get("demos") or []
    if demos and answer_prefix is None:
        raise ValueError("the task has no answer_prefix; its demonstrations end with it")
    if kind == "rag":
        text = "".join(f"{d['passages']}\n\nQuestion: {d['question']}\n{answer_prefix} {d['answer']}\n\n" for d in demos)
        return {"context": item["context"], "question": item["question"], "demos": text}
    if kind == "rerank":
        text = "".join(f"{d['passages']}\n\nQuery: {d['question']}\n{answer_prefix} {d['answer']}\n\n" for d in demos)
        return {"context": item["context"], "question": item["question"], "demos": text}
    if kind == "json_kv":
        text = "".join(f'Key: "{_unquoted(d["key"])}"\n{answer_prefix} {d["value"]}\n\n' for d in demos)
        return {"context": item["context"], "question": _unquoted(item["question"]), "demos": text}
    return {"context": item["context"], "question": item["question"], "kind": _singular(fields["type_needle_v"])}


def alce_demos(template: str, answer_prefix: str | None, demos: list[dict[str, Any]]) -> str:
    """ALCE's demonstrations in the task's wording: the template filled with each (no demos of its own), its cited
    answer after the answer prefix; each followed by two blank lines."""
    out = []
    for d in demos:
        text = template.format(demos="", question=d["question"], context=alce_context(d["docs"])).rstrip()
        if answer_prefix and text.endswith(answer_prefix):
            out.append(f"{text} {d['answer']}")
        elif answer_prefix:
            out.append(f"{text}\n\n{answer_prefix} {d['answer']}")
        else:
            raise ValueError("the task has no answer_prefix; its demonstrations end with it")
    return "".join(d + "\n\n\n" for d in out)


def alce_context(docs: list[dict[str, Any]]) -> str:
    """Passages ``Document [i](Title: t): text`` (IDs from 1), a blank line between them (HELMET's join)."""
    return "\n\n".join(format_cited(i, d["title"], d["text"]) for i, d in enumerate(docs, 1))


def _official(config):
    """The config's HELMET official protocol, or None (ours)."""
    protocol = config.official_protocol()
    return protocol if protocol is not None and protocol.benchmark == "helmet" else None


def _official_row(official, spec, item: dict[str, Any], level: str, max_new_tokens: int,
                  row_fields: str) -> tuple[str, str]:
    """(prompt, record_fields) of a row under HELMET's official protocol (protocol.py)."""
    from lc_pipeline.benchmarks.helmet.protocol import budget_fields, official_prompt
    from lc_pipeline.construct.builders import BuildError

    try:
        prompt = official_prompt(spec.name, item, chat=spec.chat_template)
    except (ValueError, KeyError) as exc:
        raise BuildError(f"task {spec.qualified_name} at {level}, item {item.get('item_id')!r} (protocol "
                         f"{official.label}): {exc}") from None
    fields = json.loads(row_fields or "{}")
    # the protocol's label here too: metrics see record_fields, not the protocol column (metrics.icl_label)
    fields.update(budget_fields(spec.name, level, max_new_tokens), protocol=official.label)
    return prompt, json.dumps(fields, ensure_ascii=False, sort_keys=True)


def helmet_released(request) -> Iterator[pl.DataFrame]:
    """Builder ``helmet.released`` (module docstring)."""
    from lc_pipeline.construct.builders import BuildError

    inputs = request.inputs
    config = inputs.config
    official = _official(config)
    released_sources = {s.name for s in config.sources if s.kind == SOURCE_KIND}
    mine = [t for t in request.tasks if t.name in DATASETS]
    icl = [t for t in request.tasks if t.name not in DATASETS and t.builder.options.get("kind") == "icl"]
    others = tuple(t for t in request.tasks if t.name not in DATASETS and t not in icl)
    if mine:
        yield from in_frames(_released_rows(request, mine, released_sources))
    if icl:
        yield from in_frames(_icl_rows(request, icl))
    if others:
        from lc_pipeline.benchmarks.helmet.construction import build_helmet

        items = inputs.items.filter(~pl.col("source").is_in(sorted(released_sources)))
        try:
            built = build_helmet(inputs.documents, items, inputs.passages, inputs.hard_negatives, level=inputs.level,
                                 config=config.helmet, seed=config.seed, counter=inputs.counter,
                                 length_tolerance=config.length_tolerance, tasks=others)
        except ValueError as exc:
            raise BuildError(f"HELMET instances at {inputs.level}: {exc}") from exc
        yield built if official is None else _official_frame(official, built, others, inputs)


def _official_frame(official, built: pl.DataFrame, specs, inputs) -> pl.DataFrame:
    """The constructed rows (LongQA, Summ) re-prompted under HELMET's official protocol."""
    from lc_pipeline.benchmarks.helmet.protocol import with_helmet_postfix
    from lc_pipeline.benchmarks.helmet.construction.long_document import OMITTED

    by_name = {s.name: s for s in specs}
    rows = []
    for row in built.iter_rows(named=True):
        spec = by_name[row["task"]]
        row = {**row, "context": with_helmet_postfix(row["context"], OMITTED)}
        prompt, fields = _official_row(official, spec, row, inputs.level, row["max_new_tokens"], row["record_fields"])
        rows.append({**row, "prompt": prompt, "record_fields": fields, "input_tokens": inputs.counter.count(prompt),
                     "context_tokens": inputs.counter.count(row["context"]), "protocol": official.label,
                     "instance_id": short_id(row["instance_id"], official.label)})
    return pl.DataFrame(rows, schema=built.schema)


def _icl_rows(request, specs) -> Iterator[dict[str, Any]]:
    from lc_pipeline.benchmarks.helmet.released_icl import icl_instances
    from lc_pipeline.construct.builders import BuildError
    from lc_pipeline.benchmarks.helmet.construction.icl import shots_for_level

    inputs = request.inputs
    config, counter, level = inputs.config, inputs.counter, inputs.level
    official = _official(config)
    sources = {s.name: s for s in config.sources}
    for spec in specs:
        name = spec.builder.options.get("source")
        source = sources.get(name)
        if source is None or source.kind != "icl":
            raise BuildError(f"task {spec.qualified_name}: builder.options.source {name!r} is not a configured source "
                             "of kind icl (HELMET's ICL datasets are read with kind icl)")
        if not spec.answer_prefix:
            raise BuildError(f"task {spec.qualified_name}: field 'answer_prefix': missing; the demonstrations end "
                             "with it")
        holdout = source.options.get("holdout")
        try:
            shots = shots_for_level(spec.builder.options.get("per_level"), level, spec.name)
            built = icl_instances(inputs.items.filter(pl.col("source") == name).to_dicts(), shots=shots,
                                  n_test=config.helmet.n_per_task, seed=config.seed, prefix=spec.answer_prefix,
                                  holdout=(holdout, source.options.get("holdout_seed", 42)) if holdout else None)
        except ValueError as exc:
            raise BuildError(f"task {spec.name} at {level}: {exc}") from None
        if not built:
            raise BuildError(f"task {spec.name} at {level}: source {name!r} gives no test item")
        max_new_tokens = spec.max_new_tokens or config.max_new_tokens
        for b in built:
            item = b["item"]
            fields = json.loads(item["record_fields"])
            row_fields = json.dumps({"dataset": spec.name, "level": level, "label": fields["label"],
                                     "label_mapping": b["mapping"], "shots": b["shown"], "row": fields["row"]},
                                    ensure_ascii=False, sort_keys=True)
            if official is None:
                prompt = fill_template(spec.prompt, {"context": b["context"], "question": item["question"]})
            else:
                prompt, row_fields = _official_row(official, spec, {**item, "context": b["context"]}, level,
                                                   max_new_tokens, row_fields)
            yield instance_row(
                instance_id=short_id(SUITE, BUILDER, item["item_id"], spec.name, level, shots,
                                     spec.prompt if official is None else official.label,
                                     max_new_tokens, config.tokenizer, config.seed),
                item_id=item["item_id"], source=item["source"], suite=SUITE, task=spec.name, category=spec.category,
                language=item["language"], depth=None, evidence_depths=[], question=item["question"],
                answers=[b["answer"]], answer_keywords=[], evidence_doc_ids=[], context_doc_ids=[],
                n_hard_negatives=0, n_filler_documents=0, context=b["context"], prompt=prompt,
                tokenizer=config.tokenizer, target_tokens=None, input_tokens=counter.count(prompt),
                context_tokens=counter.count(b["context"]), max_new_tokens=max_new_tokens, target_units=None,
                record_id=item["record_id"], record_fields=row_fields,
                protocol="ours" if official is None else official.label,
            )


def _released_rows(request, specs, released_sources: set[str]) -> Iterator[dict[str, Any]]:
    from lc_pipeline.construct.builders import BuildError

    inputs = request.inputs
    inputs.meta.setdefault("records_outside_levels", 0)
    config, counter, level = inputs.config, inputs.counter, inputs.level
    official = _official(config)
    if config.released is None or config.released.level_by != "record_level":
        raise BuildError(f"builder {BUILDER} runs in a config with `released: {{level_by: record_level}}` "
                         "(packaged config helmet-released)")
    items = inputs.items.filter(pl.col("source").is_in(sorted(released_sources)))
    for spec in specs:
        dataset = DATASETS[spec.name]
        max_new_tokens = spec.max_new_tokens or config.max_new_tokens
        n = 0
        for item in items.filter(pl.col("task") == spec.name).iter_rows(named=True):
            fields = record_fields(item)
            row_fields = item["record_fields"]
            if dataset.kind == "alce":  # one file for every level: the level's first n passages
                try:
                    n = per_level_count(spec.builder.options, spec.name, level) or PER_LEVEL["alce"][level]
                except (ValueError, KeyError) as exc:
                    raise BuildError(f"task {spec.name} at {level}: {exc}") from None
                if len(fields["docs"]) < n:
                    raise BuildError(f"task {spec.name} at {level}: item {item['item_id']!r} (record "
                                     f"{item['record_id']!r}, {fields['file']}) has {len(fields['docs'])} passages, "
                                     f"the level shows {n}")
                passages = fields["docs"][:n]
                if official is None:
                    item = {**item, "context": alce_context(passages)}
                else:
                    from lc_pipeline.benchmarks.helmet.protocol import alce_passages

                    item = {**item, "context": alce_passages(fields["style"], passages)}
                slots = "qa_pairs" if fields["style"] == "asqa" else "answer_clusters"
                row_fields = json.dumps({"dataset": spec.name, "file": fields["file"], "index": fields["index"],
                                         "level": level, "style": fields["style"], "question": item["question"],
                                         "passages": passages, slots: fields[slots]}, ensure_ascii=False,
                                        sort_keys=True)
            elif not in_this_level(item, fields, 0, inputs):
                continue
            if official is not None:
                prompt, row_fields = _official_row(official, spec, item, level, max_new_tokens, row_fields)
            else:
                prompt = _ours_prompt(spec, dataset.kind, item, fields)
            n += 1
            yield instance_row(
                instance_id=short_id(SUITE, BUILDER, item["item_id"], spec.name, level,
                                     spec.prompt if official is None else official.label, max_new_tokens,
                                     config.tokenizer),
                item_id=item["item_id"], source=item["source"], suite=SUITE, task=spec.name, category=spec.category,
                language=item["language"], depth=None, evidence_depths=[], question=item["question"],
                answers=item["answers"], answer_keywords=item["answer_keywords"],
                evidence_doc_ids=item["evidence_doc_ids"], context_doc_ids=[], n_hard_negatives=0,
                n_filler_documents=0, context=item["context"], prompt=prompt, tokenizer=config.tokenizer,
                target_tokens=None, input_tokens=counter.count(prompt), context_tokens=counter.count(item["context"]),
                max_new_tokens=max_new_tokens, target_units=None, record_id=item["record_id"],
                record_fields=row_fields, protocol="ours" if official is None else official.label,
            )
        if not n:
            raise BuildError(f"task {spec.name} at {level}: no released record; HELMET ships it as "
                             f"data/{level_file(dataset, level)} (a source of kind {SOURCE_KIND} with dataset "
                             f"{spec.name!r} and this level in its levels)")


def _ours_prompt(spec, kind: str, item: dict[str, Any], fields: dict[str, Any]) -> str:
    """The task file's prompt of a released item (module docstring)."""
    from lc_pipeline.construct.builders import BuildError

    try:
        if kind == "alce":
            values = {"context": item["context"], "question": item["question"],
                      "demos": alce_demos(spec.prompt, spec.answer_prefix, fields["demos"])}
        else:
            values = prompt_fields(kind, item, fields, spec.answer_prefix)
        return fill_template(spec.prompt, values)
    except KeyError as exc:
        raise BuildError(f"task {spec.qualified_name} ({spec.declared_in}): field 'prompt' names {exc}, "
                         f"which a released {spec.name} record does not give (it gives {sorted(values)})") from None
    except ValueError as exc:
        raise BuildError(f"task {spec.qualified_name} ({spec.declared_in}), item {item['item_id']!r}: "
                         f"{exc}") from None


__all__ = ["BUILDER", "SOURCE_KIND", "alce_context", "alce_demos", "helmet_released", "prompt_fields"]
