"""LV-Eval's official protocol: how the authors' ``prediction.py`` (with ``utils.py``) prompts, cuts and decodes.

Read from their ``config.py`` at the pinned commit (official_files.py, parsed as data), never copied here:

- **prompt**: ``DATASET_PROMPT[dataset].format(**record)``, the released record's own fields (``context``,
  ``input``, ...): :func:`record_of` gives them back from a source item;
- **answer length**: ``DATASET_MAXGEN[dataset]`` new tokens (64, factrecall 16);
- **truncation**: ``utils.truncate_prompt``, LongBench's cut ("following LongBench"): the prompt, before any chat
  template, counted as ``tokenizer(prompt)`` counts it, cut in the middle to ``--model-max-length`` (the first and
  last ``int(max_length/2)`` tokens, each half decoded without special tokens, joined). The budget is a
  command-line argument there (default 15,500 for a 16k model), so here it is the model's window minus
  :data:`WINDOW_RESERVE` (issue 30, fidelity review LV2), policy ``prompt_middle:lveval``;
- **chat template**: ``build_chat`` wraps every dataset's prompt after the cut (its own wrapper per model family);
  a model here gets its own chat template on every task (no task goes without it);
- **decoding**: greedy, as ``prediction.py`` decodes local models. API models (the ``openai`` backend) as their
  ``prediction_gpt.py`` sends them (fidelity review LV3, :func:`official_api_decoding`): no ``max_tokens`` and no
  ``temperature`` (the API's defaults), and a system turn before the prompt, its text read from that file at run
  time (official_files.api_system_turn, only when a request goes to a server). The prompt is still cut to the
  budget below, as ``prediction_gpt.py`` cuts it (``--model-max-length``, tiktoken there, the model's tokenizer
  here). Not reproduced: ``model.chat`` for models that have one (ChatGLM), ``post_process``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from lc_pipeline.benchmarks.lveval import official_files
from lc_pipeline.config import OfficialProtocol, files_found_here, format_prompt
from lc_pipeline.construct.truncation import (
    PROMPT_MIDDLE,
    PromptBudget,
    register_prompt_budget,
)
from lc_pipeline.generate.base import ApiDecoding

BUDGET = "lveval"
TRUNCATION = f"{PROMPT_MIDDLE}:{BUDGET}"
WINDOW_RESERVE = 500
READS = (official_files.CONFIG,)  # DATASET_PROMPT and DATASET_MAXGEN
# How prediction_gpt.py calls an API model (LV3): chat.completions.create(model, messages) and nothing else, so the
# API's own max_tokens and temperature; its system turn read from the file when a request goes to a server.
API_DECODING = ApiDecoding(
    send_max_tokens=False, send_temperature=False, read_system=official_files.api_system_turn,
    source=f"{official_files.REPO} {official_files.PREDICTION_GPT.path}@{official_files.COMMIT[:7]}")


@cache
def budget() -> PromptBudget:
    """The prompt budget of ``prompt_middle:lveval``: the window - 500 (prediction.py's --model-max-length)."""
    return PromptBudget(window_reserve=WINDOW_RESERVE, source=f"{official_files.REPO} prediction.py "
                        f"--model-max-length, here the window - {WINDOW_RESERVE}")


register_prompt_budget(BUDGET, budget)


def official_api_decoding(task: str) -> ApiDecoding:
    """How the authors' API script sends every task's request (:data:`API_DECODING`; generate/partition.py)."""
    return API_DECODING


def record_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The released record's fields, as ``prediction.py`` hands them to ``str.format``, from a ``source_items`` row
    (sources.py keeps ``context`` and ``input`` verbatim, ``answers``, ``language``, ``length``; ``dataset``
    is the record's dataset with its level, e.g. ``cmrc_mixup_16k``, as in the release)."""
    fields = json.loads(item.get("record_fields") or "{}")
    record: dict[str, Any] = {"context": item["context"], "input": item["question"], "answers": list(item["answers"]),
                              "language": item["language"]}
    if "dataset" in fields:
        record["dataset"] = f"{fields['dataset']}_{fields['level']}" if fields.get("level") else fields["dataset"]
    if "length" in fields:
        record["length"] = fields["length"]
    return record


def official_protocol(fetch: bool) -> OfficialProtocol | None:
    """LV-Eval's :class:`OfficialProtocol` from the authors' ``config.py``. ``fetch``: find it as
    lc_pipeline/official.py does (fetching when online; missing is an error naming what to provide); otherwise
    None when it is not on this machine (config.files_found_here)."""
    if not fetch and not files_found_here(READS):
        return None
    source = f"{official_files.REPO} {official_files.CONFIG.path} DATASET_PROMPT@{official_files.COMMIT[:7]}"
    templates = official_files.dataset_prompts()
    return OfficialProtocol(
        benchmark="lveval", commit=official_files.COMMIT,
        prompt=lambda task, item: format_prompt(templates, task, record_of(item), source),
        max_new_tokens=official_files.dataset_max_new_tokens(), truncation=TRUNCATION,
    )
