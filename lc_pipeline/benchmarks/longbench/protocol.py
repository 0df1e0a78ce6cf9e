"""LongBench v1 / LongBench-E's official protocol: how the authors' ``LongBench/pred.py`` prompts, cuts and decodes.

Read from their files at the pinned commit (official_files.py), never copied here:

- **prompt**: ``dataset2prompt[task].format(**record)``, the released record's own fields (``context``,
  ``input``, ...): :func:`record_of` gives them back from a source item;
- **answer length**: ``dataset2maxlen[task]`` new tokens;
- **truncation**: the prompt, before any chat template, counted in the model's tokens as ``tokenizer(prompt)``
  counts it (special tokens added), cut in the middle to ``max_length`` when longer: the first and last
  ``int(max_length/2)`` tokens, each half decoded without special tokens and the two joined; then the chat
  template and nothing cut further (policy ``prompt_middle:longbench``, construct/truncation.py).
  ``max_length`` is ``model2maxlen[<model>]`` when the model's registry name is a key of ``model2maxlen.json``
  (exact match: register a model as e.g. ``llama2-7b-chat-4k`` to take its row), else the model's window minus
  :data:`WINDOW_RESERVE` (issue 30, fidelity review LB2: every row of ``model2maxlen`` is its model's window -
  500, 3,500 for a 4k model up to 31,500 for a 32k one);
- **chat template**: every task but :data:`PLAIN_PROMPT_TASKS` (``pred.py`` skips ``build_chat`` on them). Where
  ``pred.py`` calls ``build_chat`` (its own wrapper per model for its eight models), a model here gets its own
  chat template (or its registry entry's ``chat_template_file``);
- **decoding**: greedy, as every backend here decodes. Not reproduced: ``pred.py``'s samsum-only ``min_length``
  and newline EOS (our samsum task stops at its first line when scored), and its ``post_process`` of xgen /
  internlm replies.

LongBench-E (``pred.py --e``) uses the same tables; its configs name the same benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from lc_pipeline.benchmarks.longbench import official_files
from lc_pipeline.config import OfficialProtocol, files_found_here, format_prompt
from lc_pipeline.construct.truncation import (
    PROMPT_MIDDLE,
    PromptBudget,
    register_prompt_budget,
)

BUDGET = "longbench"
TRUNCATION = f"{PROMPT_MIDDLE}:{BUDGET}"
WINDOW_RESERVE = 500
# pred.py: `if dataset not in [...]: prompt = build_chat(...)` ("chat models are better off without build prompts
# on these tasks").
# How the paper reports LongBench-E (both protocols): one table per length bucket (0-4k, 4-8k, 8k+), never their
# mean. score/benchmark_scores.benchmark_leaderboard reads it (PER_LENGTH_HOOK): a config with several length
# partitions gets one leaderboard row per partition (metric "longbench/<table>@<length>"; fidelity review LB5).
LEADERBOARD_PER_LENGTH = True
PLAIN_PROMPT_TASKS = frozenset({"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"})
# The files the protocol reads; "found" means every one of them is on this machine.
READS = (official_files.DATASET2PROMPT, official_files.DATASET2MAXLEN, official_files.MODEL2MAXLEN)


@cache
def budget() -> PromptBudget:
    """The prompt budget of ``prompt_middle:longbench`` (model2maxlen, else window - 500)."""
    return PromptBudget(by_model=official_files.model_max_lengths(), window_reserve=WINDOW_RESERVE,
                        source=f"{official_files.REPO} {official_files.MODEL2MAXLEN.path}@{official_files.COMMIT[:7]}"
                               f" for the models it lists, else the window - {WINDOW_RESERVE}")


register_prompt_budget(BUDGET, budget)


def record_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The released record's fields, as ``pred.py`` hands them to ``str.format``, from a ``source_items`` row
    (sources.py keeps ``context`` and ``input`` verbatim, ``_id``, ``dataset`` and ``length``).
    Fields the adapter does not keep as released (``language`` of code records) are left out, so a template naming
    one fails naming it rather than filling in another value."""
    fields = json.loads(item.get("record_fields") or "{}")
    record: dict[str, Any] = {"context": item["context"], "input": item["question"], "answers": list(item["answers"]),
                              "all_classes": list(item.get("all_classes") or []) or None, "_id": item["record_id"]}
    for key in ("dataset", "length"):
        if key in fields:
            record[key] = fields[key]
    return record


def official_protocol(fetch: bool) -> OfficialProtocol | None:
    """LongBench's :class:`OfficialProtocol` from the authors' files. ``fetch``: find them as
    lc_pipeline/official.py does (fetching when online; missing is an error naming what to provide); otherwise
    None when they are not on this machine (config.files_found_here)."""
    if not fetch and not files_found_here(READS):
        return None
    source = f"{official_files.REPO} {official_files.DATASET2PROMPT.path}@{official_files.COMMIT[:7]}"
    templates = official_files.dataset_prompts()
    budget()  # read (and verify) model2maxlen now: a run that cannot fit a prompt fails before it starts
    return OfficialProtocol(
        benchmark="longbench", commit=official_files.COMMIT,
        prompt=lambda task, item: format_prompt(templates, task, record_of(item), source),
        max_new_tokens=official_files.dataset_max_new_tokens(), truncation=TRUNCATION,
        plain_prompt_tasks=PLAIN_PROMPT_TASKS,
    )
