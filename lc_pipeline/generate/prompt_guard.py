"""The prompt-format guard: was every prompt of a generations partition fed the way the model expects?

Chat-template and BOS mistakes swing long-context scores by tens of points and show nowhere in the
numbers (issue 21, "Prompt-format guard"). Every generation row records what was fed (schemas.GENERATIONS:
``bos_tokens``, ``prompt_ids_hash``, ``chat_template_source``); :func:`check_prompt_format` compares those
records with what the model's template implies, found by rendering probes through the path every backend
uses (:func:`lc_pipeline.generate.prompting.render_ids`). The rules:

(a) **BOS.** A probe rendered with the row's chat switch (the template, or the plain prompt of ``chat:
    false`` tasks and base models) may *start* with one BOS id at most: a run of two or more is a doubled
    BOS. A ``chat_template_file`` may write no more BOS ids than the model's own template does (where the
    model has one); a plain prompt gets at most the one BOS its vocabulary adds. Only the leading run is
    held to one in the model's own template, because some vocabularies' BOS is also their turn marker
    (SmolLM2's BOS is ``<|im_start|>``: three of them in every chat prompt). Every row's ``bos_tokens``
    must then equal its probe's count: a row fed more (a BOS string in the prompt text parsed as a special
    token, a backend adding one) or fewer fails.
(b) **The question survives the template.** A probe whose user text holds a unique sentinel must keep it
    in the decoded ids; and one real row is re-rendered from its instance's prompt: its question, when the
    prompt holds it verbatim, must appear in the decoded prompt.
(c) **Records.** Every sent row has a ``prompt_ids_hash``, a ``bos_tokens`` count and a
    ``chat_template_source`` matching the registry entry ("model", "file:<name>" or "none"). Rows with status
    "skipped" were not sent (exempt); rows rendered by a server ("server": the openai backend's chat api)
    cannot be checked here and are counted as such; rows recorded before these columns existed (or imported
    predictions: all three fields empty) are counted as unrecorded, not failed.

Pure logic (no Dagster): assets/prompt_guard.py turns the verdict into a blocking asset check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.generate.backends import capabilities
from lc_pipeline.generate.prompting import (
    PromptTokenizer,
    chat_template_source,
    messages_for,
    render_ids,
)
from lc_pipeline.generate.registry import ModelSpec

SENTINEL = "LCP-GUARD-SENTINEL-7F3A9C"
PROBE_TEXT = f"Answer the question. Question: what does the token {SENTINEL} stand for?"
START_CHARS = 160  # how much of a rendered prompt an example shows
SWITCHES = {True: "chat", False: "plain"}


@dataclass
class GuardVerdict:
    """The guard's verdict on one partition; ``message`` names the model, what is wrong and an example row."""

    passed: bool
    model: str
    message: str
    template_source: str  # the registry entry's ("model" | "file:<name>" | "none"); "server" for api chat
    bos_expected: dict[str, int] = field(default_factory=dict)  # switch ("chat" | "plain") -> BOS ids implied
    bos_found: dict[str, dict[int, int]] = field(default_factory=dict)  # switch -> {BOS count: rows}
    rows_checked: int = 0
    rows_skipped: int = 0  # status "skipped": not sent
    rows_server: int = 0  # rendered by the server: not checkable here
    rows_forced: int = 0  # of those, plain-prompt rows a chat-only server templated ("server:forced")
    rows_unrecorded: int = 0  # no record of what was fed (older stores, imported predictions)
    question_checked: str | None = None  # the instance whose question was found in its re-rendered prompt
    example: dict | None = None  # instance_id, generation_id, problem, prompt_start
    notes: list[str] = field(default_factory=list)


class _Failure(Exception):
    def __init__(self, problem: str, row: dict | None = None) -> None:
        super().__init__(problem)
        self.problem, self.row = problem, row


def leading_bos(ids: list[int], bos: int | None) -> int:
    """How many BOS ids the sequence starts with."""
    n = 0
    while bos is not None and n < len(ids) and ids[n] == bos:
        n += 1
    return n


def count_bos(ids: list[int], bos: int | None) -> int:
    return 0 if bos is None else sum(1 for i in ids if i == bos)


def _normalized(text: str) -> str:
    return " ".join(text.split())


def check_prompt_format(spec: ModelSpec, tok: PromptTokenizer | Callable[[], PromptTokenizer],
                        generations: pl.DataFrame, instances: pl.DataFrame) -> GuardVerdict:
    """The guard's verdict on one generations partition of ``spec`` (rules in the module docstring).

    ``tok`` is the tokenizer the backend renders with (prompting.load_tokenizer gives the same vocabulary and
    template), or a function loading it, called only when some row needs checking (a partition of skipped or
    server-rendered rows needs no tokenizer); ``generations`` needs ``generation_id, instance_id, status, bos_tokens, prompt_ids_hash,
    chat_template_source``; ``instances`` needs ``instance_id, prompt`` and, for rule (b)'s real row,
    ``question``.
    """
    missing = [c for c in ("generation_id", "instance_id", "status", "bos_tokens", "prompt_ids_hash",
                           "chat_template_source") if c not in generations.columns]
    if missing:
        raise ValueError(f"model {spec.slug!r}: generations lack the columns {missing} the prompt guard reads")
    source = "server" if capabilities(spec.backend).server_renders_chat(spec.api) else chat_template_source(spec, True)
    verdict = GuardVerdict(True, spec.slug, "", source)
    prompts = _instance_texts(instances)
    rows = generations.sort("instance_id").to_dicts()
    checkable: list[dict] = []
    for row in rows:
        src = row["chat_template_source"] or ""
        if row["status"] == "skipped":
            verdict.rows_skipped += 1
        elif src.startswith("server"):  # "server", or "server:forced": a plain prompt a chat-only server templated
            verdict.rows_server += 1
            verdict.rows_forced += src == "server:forced"
        elif not src and not row["prompt_ids_hash"] and row["bos_tokens"] is None:
            verdict.rows_unrecorded += 1
        else:
            checkable.append(row)
    verdict.rows_checked = len(checkable)
    if verdict.rows_server:
        verdict.notes.append(f"{verdict.rows_server} row(s) rendered by the server (openai api chat): their "
                             "template and BOS are the server's, not checkable here")
    if verdict.rows_forced:
        verdict.notes.append(f"{verdict.rows_forced} of them are tasks run without the chat template that a chat-only "
                             "server templated anyway (chat_template_source 'server:forced'); give the model a "
                             "completions endpoint to run them as the task says")
    if verdict.rows_unrecorded:
        verdict.notes.append(f"{verdict.rows_unrecorded} row(s) carry no record of what was fed (generated before "
                             "the guard, or imported predictions): not checked")
    if checkable and not hasattr(tok, "encode"):
        tok = tok()
    try:
        _check_records(spec, checkable)
        by_switch = {chat: [r for r in checkable if (r["chat_template_source"] != "none") == chat]
                     for chat in (True, False)}
        for chat, group in by_switch.items():
            if group:
                _check_bos(spec, tok, chat, group, verdict)
        if by_switch[True]:
            _check_sentinel(spec, tok, by_switch[True])
        _check_question(spec, tok, checkable, prompts, verdict)
    except _Failure as failure:
        verdict.passed = False
        verdict.example = _example(spec, tok, failure, prompts)
        verdict.message = _message(spec, failure.problem, verdict.example)
        return verdict
    verdict.message = (f"model {spec.slug!r}: {verdict.rows_checked} row(s) fed as the template implies "
                       f"(source {source!r}, BOS {verdict.bos_expected})"
                       + "".join(f"; {n}" for n in verdict.notes))
    return verdict


def _instance_texts(instances: pl.DataFrame) -> dict[str, tuple[str, str]]:
    if "instance_id" not in instances.columns or "prompt" not in instances.columns:
        raise ValueError("instances lack the columns instance_id / prompt the prompt guard reads")
    questions = instances["question"] if "question" in instances.columns else [None] * instances.height
    return {iid: (prompt or "", question or "")
            for iid, prompt, question in zip(instances["instance_id"], instances["prompt"], questions, strict=True)}


def _check_records(spec: ModelSpec, rows: list[dict]) -> None:
    """Rule (c): what was fed is recorded, with the registry entry's template source."""
    for row in rows:
        src = row["chat_template_source"] or ""
        if not row["prompt_ids_hash"]:
            raise _Failure("a sent row has no prompt_ids_hash (the backend did not record the ids it fed)", row)
        if row["bos_tokens"] is None:
            raise _Failure("a sent row has no bos_tokens count (the backend did not record the ids it fed)", row)
        if not src:
            raise _Failure("a sent row has no chat_template_source", row)
        expected = chat_template_source(spec, src != "none")
        if src != expected:
            raise _Failure(f"a row was rendered with chat_template_source {src!r}, the registry entry implies "
                           f"{expected!r} (rows of other settings in this partition)", row)


def _check_bos(spec: ModelSpec, tok: PromptTokenizer, chat: bool, rows: list[dict], verdict: GuardVerdict) -> None:
    """Rule (a) for one chat switch: the probe's BOS ids, then every row's count against the probe's."""
    bos = getattr(tok, "bos_id", None)
    switch = SWITCHES[chat]
    try:
        probe = render_ids(spec, tok, PROBE_TEXT, chat)
    except ValueError as exc:
        raise _Failure(f"the {switch} prompt cannot be rendered: {exc}", rows[0]) from exc
    lead, total = leading_bos(probe, bos), count_bos(probe, bos)
    verdict.bos_expected[switch] = total
    found: dict[int, int] = {}
    for row in rows:
        found[int(row["bos_tokens"])] = found.get(int(row["bos_tokens"]), 0) + 1
    verdict.bos_found[switch] = dict(sorted(found.items()))
    where = (f"the template ({chat_template_source(spec, True)})" if chat else "the plain prompt")
    if lead > 1:
        raise _Failure(f"doubled BOS: {where} starts every prompt with {lead} BOS ids (id {bos}); one at most", rows[0])
    if chat:
        own = getattr(tok, "own_chat_template", None)
        active = getattr(tok, "chat_template", None)
        if spec.chat_template_file is not None and own and active != own:
            reference = count_bos(tok.encode(tok.chat_text(messages_for(spec, PROBE_TEXT), template=own) or ""), bos)
            if total > reference:
                raise _Failure(f"doubled BOS: {where} writes {total} BOS ids (id {bos}) where the model's own "
                               f"template writes {reference}", rows[0])
    elif total > 1:
        raise _Failure(f"doubled BOS: {where} gets {total} BOS ids (id {bos}); the vocabulary adds one at most",
                       rows[0])
    for row in rows:
        if int(row["bos_tokens"]) != total:
            raise _Failure(f"a row was fed {row['bos_tokens']} BOS ids (id {bos}) where {where} implies {total} "
                           "(a BOS string in the prompt text parsed as a special token, or a backend adding one)",
                           row)


def _check_sentinel(spec: ModelSpec, tok: PromptTokenizer, rows: list[dict]) -> None:
    """Rule (b), probe: the user's text survives the template."""
    decoded = tok.decode(render_ids(spec, tok, PROBE_TEXT, True))
    if SENTINEL not in decoded:
        raise _Failure(f"the template ({chat_template_source(spec, True)}) drops the user's message: a probe's "
                       f"sentinel {SENTINEL!r} is not in the rendered prompt {decoded[:START_CHARS]!r}", rows[0])


def _check_question(spec: ModelSpec, tok: PromptTokenizer, rows: list[dict], prompts: dict[str, tuple[str, str]],
                    verdict: GuardVerdict) -> None:
    """Rule (b), a real row: the first row whose instance's prompt holds its question verbatim, re-rendered."""
    for row in rows:
        prompt, question = prompts.get(row["instance_id"], ("", ""))
        if not question.strip() or _normalized(question) not in _normalized(prompt):
            continue
        chat = row["chat_template_source"] != "none"
        decoded = tok.decode(render_ids(spec, tok, prompt, chat))
        if _normalized(question) not in _normalized(decoded):
            raise _Failure(f"the question of instance {row['instance_id']!r} is not in its rendered prompt: the "
                           f"template ({chat_template_source(spec, chat)}) drops or rewrites the user's message", row)
        verdict.question_checked = row["instance_id"]
        return
    if rows:
        verdict.notes.append("no row's instance holds its question verbatim in its prompt: the question was "
                             "checked with the probe only")


def _example(spec: ModelSpec, tok: PromptTokenizer, failure: _Failure, prompts: dict[str, tuple[str, str]]) -> dict:
    row = failure.row
    if row is None:
        return {"problem": failure.problem}
    example = {"instance_id": row["instance_id"], "generation_id": row["generation_id"],
               "bos_tokens": row["bos_tokens"], "chat_template_source": row["chat_template_source"],
               "problem": failure.problem}
    prompt = prompts.get(row["instance_id"], ("", ""))[0]
    if prompt:
        try:
            ids = render_ids(spec, tok, prompt, row["chat_template_source"] != "none")
            example["prompt_start"] = tok.decode(ids[:64])[:START_CHARS]
        except ValueError as exc:
            example["prompt_start"] = f"(cannot render: {exc})"
    return example


def _message(spec: ModelSpec, problem: str, example: dict) -> str:
    if "instance_id" not in example:
        return f"model {spec.slug!r}: {problem}"
    start = example.get("prompt_start")
    return (f"model {spec.slug!r}: {problem}; example row: instance_id {example['instance_id']!r} (generation "
            f"{example['generation_id']}, bos_tokens {example['bos_tokens']}, chat_template_source "
            f"{example['chat_template_source']!r})" + (f", rendered prompt starts {start!r}" if start else ""))
