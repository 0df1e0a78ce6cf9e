"""Builder ``loong.released``: Loong's items run as released (spec loong.md §4.1, §5, §6.3, §12).

Loong ships no contexts: an item names its documents (``doc``), and the authors' code
(``src/utils/prompt.py``: ``get_content``, ``get_doc_str``, ``get_generate_prompt``) assembles the
prompt from them. This builder does the same for every item of the configured sources
(sources.py keeps what it needs in ``record_fields``):

- the documents: every document the item names, in the item's order, and no other text (no
  distractors, no padding). Each is its header line, the document, and a blank line
  (``header + "\\n" + text + "\\n\\n"``, concatenated with nothing between): financial reports under
  ``《<file stem's last "-" token>》``, papers under their title, judgments under ``《判决文书i》``, i
  their 1-based position in ``doc`` (gold answers cite these titles, §4.1);
- the order: as listed when the item's ``shuffle_doc`` is false (every legal item, and the financial
  "in order" questions); else shuffled by a generator seeded with Loong's seed 1000000007 and the
  item's id. The authors shuffle with one generator for the whole file (and shuffle financial reports
  again after truncation), so their order depends on every item before it and on the model's window:
  it cannot be reproduced item by item; ours is fixed per item, so every model sees the same order;
- the prompt: the item's own ``prompt_template`` with ``{question}``, ``{instruction}`` and then
  ``{docs}`` replaced by plain substitution, as the authors' code does (``str.replace``: the doubled
  braces of the paper instructions reach the model as they are, §4.1);
- the judge's question (the instance's ``question``): the template with ``{docs}`` removed and the
  instruction and question filled, stripped (§7.2: the judge sees the instruction and the question,
  not the documents; the authors' code leaves the literal ``{docs}`` in for papers, we do not);
- the set: the prompt's token count (config ``tokenizer``, cl100k_base as the paper's tiktoken) in the
  config's ``released.bounds`` (``level_by: prompt_tokens``; the packaged config ``loong``: set1
  [10000, 50000), set2 [50000, 100000), set3 [100000, 200000), set4 200000 and up: the released data
  has 29 set-4 items above the paper's nominal 250K, §5.2, §10.4). Items in no set are counted in the
  level's metadata (``records_outside_levels``).

Nothing is cut here: a prompt longer than a model's window loses whole documents at generation
(the task's truncation ``drop_documents``, §6.3; construct/truncation.py splits this context at the
headers above). Differences from the authors' text that remain: our documents are stripped of
leading and trailing white space, and a judgment's verdict follows its facts after a blank line
(sources.py; the authors concatenate ``content + result``).

Under the config's official protocol (benchmarks/loong/protocol.py, found through ``config.official_protocol()``;
issue 30) everything above the documents' reading is the authors' instead: each document read whole from the
release's ``doc/`` folder as their ``get_content`` reads it (nothing stripped, a verdict right after its facts),
documents dropped whole to keep the prompt within 128,000 cl100k tokens (no answer room) in their walk and shuffle
order, the item in its released ``set`` (``set<n>``, whatever ``released.level_by`` says), the released answer's
``str()`` in the row's ``record_fields.answer`` for their judge, and the row's ``protocol`` and id saying so. An
official row's ``evidence_doc_ids`` are the evidence documents its prompt holds verbatim as the documents table
has them (a document dropped at 128,000 tokens is not, nor a judgment whose verdict follows its facts directly
rather than after our blank line; the level's metadata counts them, ``evidence_not_verbatim``). The rows of
``protocol: ours`` are what they were before the protocol existed.

Pure: no Dagster.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import polars as pl

from lc_pipeline.construct.released import (
    SUITE,
    ReleasedRecordError,
    in_frames,
    in_this_level,
    record_fields,
)
from lc_pipeline.construct.rows import instance_row
from lc_pipeline.fingerprints import short_id

SHUFFLE_SEED = 1000000007  # Loong's random.seed (src/run.sh --seed)
BUILDER = "loong.released"
_REQUIRED = ("prompt_template", "instruction", "question", "doc_ids")
# Each document is its header line, its text and a blank line; the header is "《...》" (reports, judgments) or a
# paper's title above its own "# title" heading.
_DOCUMENT_START = re.compile(r"\n\n(?=《[^》\n]*》\n|(?P<title>[^\n]+)\n#+[ \t]*(?P=title)[ \t#]*(?:\n|$))")
DOCUMENT_SEPARATOR = "\n\n"


def split_documents(context: str) -> list[str]:
    """The document blocks of a context built here, in order (construct/truncation.split_documents, the policy
    ``drop_documents``); joined with a blank line they give the context back."""
    cuts = [m.start() for m in _DOCUMENT_START.finditer(context)]
    starts = [0, *(c + len(DOCUMENT_SEPARATOR) for c in cuts)]
    return [context[a:b] for a, b in zip(starts, [*cuts, len(context)], strict=True)]


def document_blocks(headers: Sequence[str], texts: Sequence[str]) -> list[str]:
    """Each document as the authors' code writes it: its header line, the text, a blank line."""
    return [f"{header}\n{text}\n\n" for header, text in zip(headers, texts, strict=True)]


def document_order(n: int, shuffle: bool, record_id: str) -> list[int]:
    """Positions in the order the documents are shown: as listed, or shuffled per item (module docstring)."""
    order = list(range(n))
    if shuffle:
        random.Random(f"{SHUFFLE_SEED}:{record_id}").shuffle(order)
    return order


def fill_template(template: str, instruction: str, question: str, docs: str) -> str:
    """The authors' ``get_generate_prompt``: ``{question}``, then ``{instruction}``, then ``{docs}``."""
    return template.replace("{question}", question).replace("{instruction}", instruction).replace("{docs}", docs)


def judge_question(template: str, instruction: str, question: str) -> str:
    """What the judge is shown as the question (§7.2): the template without its documents."""
    return fill_template(template, instruction, question, "").strip()


def _fields(item: Mapping[str, Any]) -> dict[str, Any]:
    fields = record_fields(item)
    missing = [k for k in _REQUIRED if k not in fields]
    if missing:
        raise ReleasedRecordError(f"item {item['item_id']!r} of source {item['source']!r}: record_fields lacks "
                                  f"{missing}: builder {BUILDER} runs Loong items (source kind loong)")
    if not isinstance(fields["prompt_template"], str) or "{docs}" not in fields["prompt_template"]:
        raise ReleasedRecordError(f"item {item['item_id']!r} (record {item['record_id']!r}): field 'prompt_template' "
                                  f"must be a string with a {{docs}} slot, got {fields['prompt_template']!r}")
    if "doc_headers" not in fields:
        raise ReleasedRecordError(f"item {item['item_id']!r} (record {item['record_id']!r}): its documents were not "
                                  f"loaded: give source {item['source']!r} the release's documents folder "
                                  "(option documents_dir, or path: the folder holding loong.jsonl and doc/)")
    return fields


def loong_prompt(item: Mapping[str, Any], fields: Mapping[str, Any], texts: Mapping[str, str]) -> tuple[str, str, list[str]]:
    """(prompt, context, document ids in the order shown) of one item; ``texts`` maps document ids to texts."""
    ids = list(fields["doc_ids"])
    missing = sorted({d for d in ids if d not in texts})
    if missing:
        raise ReleasedRecordError(f"item {item['item_id']!r} (record {item['record_id']!r}): field 'doc_ids': "
                                  f"document(s) {missing} not among the source's documents")
    blocks = document_blocks(fields["doc_headers"], [texts[d] for d in ids])
    order = document_order(len(blocks), bool(fields.get("shuffle_doc", True)), item["record_id"] or item["item_id"])
    context = "".join(blocks[i] for i in order)
    prompt = fill_template(fields["prompt_template"], fields["instruction"] or "", fields["question"] or "", context)
    return prompt, context, [ids[i] for i in order]


def loong_released(request) -> Iterator[pl.DataFrame]:
    """Builder ``loong.released``: one instance per Loong item whose task the level builds, in the set its
    prompt's token count falls in (module docstring)."""
    yield from in_frames(_loong_rows(request))


def _loong_rows(request) -> Iterator[dict[str, Any]]:
    from lc_pipeline.construct.builders import BuildError

    inputs = request.inputs
    inputs.meta.setdefault("records_outside_levels", 0)  # reported for every level, 0 included
    config, counter, level = inputs.config, inputs.counter, inputs.level
    released = config.released
    if released is None:
        raise BuildError(f"builder {BUILDER} runs only in a config with a `released:` section")
    if released.subset:
        raise BuildError(f"builder {BUILDER}: released.subset {released.subset!r} is not a Loong subset")
    specs = {t.name: t for t in request.tasks}
    items = inputs.items.filter(pl.col("task").is_in(sorted(specs)))
    try:
        fields_of = {item["item_id"]: _fields(item) for item in items.iter_rows(named=True)}
    except ReleasedRecordError as exc:
        raise BuildError(str(exc)) from None
    official = config.official_protocol()
    if official is not None:
        yield from _official_rows(request, items, fields_of, official)
        return
    wanted = sorted({d for f in fields_of.values() for d in f["doc_ids"]})
    docs = inputs.documents.filter(pl.col("doc_id").is_in(wanted)).select("doc_id", "text")
    texts = dict(docs.iter_rows())
    for item in items.iter_rows(named=True):
        spec, fields = specs[item["task"]], fields_of[item["item_id"]]
        try:
            prompt, context, shown = loong_prompt(item, fields, texts)
        except ReleasedRecordError as exc:
            raise BuildError(str(exc)) from None
        input_tokens = counter.count(prompt)
        if not in_this_level(item, fields, input_tokens, inputs):
            continue
        max_new_tokens = spec.max_new_tokens or config.max_new_tokens
        yield instance_row(
            instance_id=short_id(SUITE, BUILDER, item["item_id"], spec.name, level, max_new_tokens, config.tokenizer,
                                 short_id(prompt)),
            item_id=item["item_id"], source=item["source"], suite=SUITE, task=spec.name, category=spec.category,
            language=item["language"], depth=None, evidence_depths=[],
            question=judge_question(fields["prompt_template"], fields["instruction"] or "", fields["question"] or ""),
            answers=item["answers"], answer_keywords=item["answer_keywords"],
            evidence_doc_ids=item["evidence_doc_ids"], context_doc_ids=shown, n_hard_negatives=0,
            n_filler_documents=0, context=context, prompt=prompt, tokenizer=config.tokenizer, target_tokens=None,
            input_tokens=input_tokens, context_tokens=counter.count(context), max_new_tokens=max_new_tokens,
            target_units=None, record_id=item["record_id"], record_fields=item["record_fields"],
        )


def _official_rows(request, items: pl.DataFrame, fields_of: dict[str, dict], official) -> Iterator[dict[str, Any]]:
    """Instances under the official protocol (benchmarks/loong/protocol.py ``LoongProtocol``): the documents read
    and kept as the authors' ``get_doc_str`` does, in their set (the released ``set`` field, audit LO4)."""
    from lc_pipeline.construct.builders import BuildError

    inputs = request.inputs
    config, counter, level = inputs.config, inputs.counter, inputs.level
    specs = {t.name: t for t in request.tasks}
    inputs.meta.setdefault("documents_dropped", 0)  # documents left out to fit the authors' 128,000 tokens
    sources = {s.name: s for s in config.sources}
    releases: dict[str, Any] = {}
    wanted = sorted({d for f in fields_of.values() for d in f["doc_ids"]})
    texts = dict(inputs.documents.filter(pl.col("doc_id").is_in(wanted)).select("doc_id", "text").iter_rows())
    for item in items.iter_rows(named=True):
        spec, fields = specs[item["task"]], fields_of[item["item_id"]]
        set_ = fields.get("set")
        if set_ is None:
            raise BuildError(f"item {item['item_id']!r} (record {item['record_id']!r}): field 'set': missing; protocol "
                             f"{official.label} puts an item in its released set")
        if f"set{set_}" not in config.lengths:
            inputs.meta["records_outside_levels"] = inputs.meta.get("records_outside_levels", 0) + 1
        if f"set{set_}" != level:
            continue
        try:
            if item["source"] not in releases:
                releases[item["source"]] = official.release(sources[item["source"]])
            release = releases[item["source"]]
            made = official.assemble(item, fields, release.documents)
        except ValueError as exc:
            raise BuildError(f"{exc} (protocol {official.label})") from None
        if item["record_id"] not in release.answers:
            raise BuildError(f"item {item['item_id']!r}: record {item['record_id']!r} is not in the release's "
                             f"loong.jsonl (protocol {official.label} reads its answer there)")
        inputs.meta["documents_dropped"] += made.dropped
        ids = list(fields["doc_ids"])
        shown = [ids[i] for i in made.shown]
        # The evidence the prompt holds as our documents table has it (instances' check contains_evidence): not a
        # document dropped at 128,000 tokens, nor a judgment whose verdict the authors join to its facts without
        # the blank line ours puts between them.
        evidence = [d for d in item["evidence_doc_ids"] if d in shown and texts.get(d, "\0").strip() in made.context]
        inputs.meta["evidence_not_verbatim"] = (inputs.meta.get("evidence_not_verbatim", 0)
                                                + len(item["evidence_doc_ids"]) - len(evidence))
        max_new_tokens = spec.max_new_tokens or config.max_new_tokens
        yield instance_row(
            instance_id=short_id(SUITE, BUILDER, item["item_id"], spec.name, level, official.label, max_new_tokens,
                                 short_id(made.prompt)),
            item_id=item["item_id"], source=item["source"], suite=SUITE, task=spec.name, category=spec.category,
            language=item["language"], depth=None, evidence_depths=[],
            question=judge_question(fields["prompt_template"], fields["instruction"] or "", fields["question"] or ""),
            answers=item["answers"], answer_keywords=item["answer_keywords"],
            evidence_doc_ids=evidence, context_doc_ids=shown,
            n_hard_negatives=0, n_filler_documents=0, context=made.context, prompt=made.prompt,
            tokenizer=config.tokenizer, target_tokens=None, input_tokens=counter.count(made.prompt),
            context_tokens=counter.count(made.context), max_new_tokens=max_new_tokens, target_units=None,
            record_id=item["record_id"], protocol=official.label,
            # the authors' judge shows the answer as str() renders it (protocol.py); ours rows have no such field
            record_fields=json.dumps({**fields, "answer": release.answers[item["record_id"]]}, ensure_ascii=False,
                                     sort_keys=True),
        )
