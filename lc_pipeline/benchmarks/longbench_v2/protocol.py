"""LongBench v2's official protocol: how the authors' ``pred.py`` prompts, cuts and decodes.

Read from their files at the pinned commit (official_files.py), never copied here:

- **prompts**: ``prompts/0shot.txt`` for the direct task (``longbench_v2``) and ``prompts/0shot_cot.txt`` for the
  chain-of-thought task (``cot``), each filled as ``pred.py`` fills it: ``template.replace('$DOC$',
  context.strip()).replace('$Q$', question.strip()).replace('$C_A$', choice_A.strip())`` .. ``$C_D$``, in that
  order (:func:`fill_prompt`), from the released record's own fields (:func:`record_of`);
- **the CoT answer call**: ``prompts/0shot_cot_ans.txt`` filled the same way, then ``$COT$`` replaced by the
  first call's reply stripped (a task ``followup`` with ``fill``, tasks/spec.py ``Followup``; generate/
  followup.py). That template has no ``$DOC$``: the document is not sent again, the template says it is
  omitted (fidelity review V2-1);
- **answer lengths** (:data:`MAX_NEW_TOKENS`, :data:`ANSWER_MAX_NEW_TOKENS`): 128 new tokens for the direct call,
  1,024 for the reasoning, 128 for the answer call (``query_llm(..., max_new_tokens=...)`` in ``pred.py``);
- **truncation** (policy ``prompt_middle:longbench_v2``, :func:`budget`): the prompt, before the chat template,
  counted as ``tokenizer.encode(prompt)`` counts it, cut when longer than ``max_len`` to ``ids[:max_len//2] +
  ids[-max_len//2:]`` and decoded as ONE sequence without special tokens (LongBench v1 decodes each half apart):
  ``PromptBudget.decode = "one_sequence"``. ``max_len`` is ``model2maxlen[<model>]`` when the model's registry name
  is a key of ``config/model2maxlen.json`` (120,000 for the authors' 128k models, 200,000 for Claude), else
  :data:`DEFAULT_BUDGET` (120,000), capped at the window minus :data:`WINDOW_RESERVE` for a model whose window is
  smaller than the authors' models' (not in their procedure: their models all have 128k windows). The answer
  call is cut by the same rule, as ``pred.py``'s ``query_llm`` cuts every prompt;
- **chat template**: every call goes through the chat template (``pred.py`` sends each prompt as one user message
  to a chat completions server);
- **decoding**: the authors sample at temperature 0.1 (:data:`TEMPERATURE`), every call (the CoT answer call too).
  :func:`official_temperature` gives it to generation (generate/partition.py): every request of an official
  instance samples at 0.1 with top_p 1, no top-k, seeded from its instance id (generate/base.py
  ``sampling_seed``: reruns draw the same), on every backend; its rows' ``sampling_params`` record it. ``pred.py``
  sets no seed (its server draws one), so one run of theirs is one draw, as ours is. Under ``ours``, greedy. Not
  reproduced: ``pred.py``'s five tries of a call that raises (a backend's own retry settings apply);
- **left out** (:func:`official_left_out`, fidelity review V2-4): ``pred.py`` writes no result for a reply that is
  exactly empty (``if output == '': continue``, also what ``query_llm`` returns after five failed tries), so
  ``result.py`` neither counts nor scores it. An official instance whose answer is empty gets no metric row
  (score/metric_scores.py) and is left out of every table's denominator, counted in the rows' ``status_counts``
  (``empty``) and in ``BenchmarkTable.left_out`` (score/benchmark_scores.py). Under ``ours`` it scores 0. A CoT
  chain's row holds its answer call: an empty reasoning call followed by a non-empty answer is not detected.

``protocol: ours`` (the task file's own wording, window fitting, the answer call given the whole first prompt)
is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from lc_pipeline.benchmarks.longbench_v2 import official_files
from lc_pipeline.benchmarks.longbench_v2.sources import LETTERS, released_question
from lc_pipeline.config import OfficialProtocol, files_found_here
from lc_pipeline.construct.truncation import (
    PROMPT_MIDDLE,
    PromptBudget,
    register_prompt_budget,
)
from lc_pipeline.generate.followup import fill_in_order
from lc_pipeline.tasks.spec import Followup

BUDGET = "longbench_v2"
TRUNCATION = f"{PROMPT_MIDDLE}:{BUDGET}"
DEFAULT_BUDGET = 120_000  # model2maxlen's budget of every 128k model it lists
# A model not in model2maxlen whose window is under DEFAULT_BUDGET + WINDOW_RESERVE: the prompt is cut to the window
# minus the reasoning call's 1,024 new tokens and 128 tokens for the chat template (our rule; see the docstring).
WINDOW_RESERVE = 1_152
# task -> the authors' template (prompts/<name>.txt) of its first call.
TASK_PROMPTS = {"longbench_v2": "0shot", "cot": "0shot_cot"}
ANSWER_PROMPT = "0shot_cot_ans"
# pred.py: query_llm(prompt, ..., temperature=0.1, max_new_tokens=1024 if args.cot else 128), then the answer call
# with max_new_tokens=128.
MAX_NEW_TOKENS = {"longbench_v2": 128, "cot": 1024}
ANSWER_MAX_NEW_TOKENS = 128
TEMPERATURE = 0.1
# The placeholders pred.py fills, in its order, and the record field each takes (every value stripped).
PLACEHOLDERS = (("$DOC$", "context"), ("$Q$", "question"), *((f"$C_{x}$", f"choice_{x}") for x in LETTERS))
REASONING_PLACEHOLDER = "$COT$"
# The files the protocol reads; "found" means every one of them is on this machine.
READS = (*(official_files.PROMPTS[n] for n in (*TASK_PROMPTS.values(), ANSWER_PROMPT)), official_files.MODEL2MAXLEN)


@cache
def budget() -> PromptBudget:
    """The prompt budget of ``prompt_middle:longbench_v2`` (model2maxlen, else 120,000 within the window)."""
    return PromptBudget(by_model=official_files.model_max_lengths(), fixed=DEFAULT_BUDGET,
                        window_reserve=WINDOW_RESERVE, decode="one_sequence",
                        source=f"{official_files.REPO} {official_files.MODEL2MAXLEN.path}@{official_files.COMMIT[:7]} "
                               f"for the models it lists, else {DEFAULT_BUDGET:,} (at most the window - "
                               f"{WINDOW_RESERVE:,})")


register_prompt_budget(BUDGET, budget)


def official_temperature(task: str) -> float | None:
    """The temperature ``pred.py`` samples every call of ``task`` at (the generation hook of generate/partition.py,
    read for instances of the official protocol only)."""
    return TEMPERATURE


def official_left_out(task: str, output: str) -> bool:
    """Whether ``pred.py`` leaves a reply of ``task`` out of its results (the scoring hook of score/metric_scores.py,
    read for instances of the official protocol only): an exactly empty reply, on either task."""
    return output == ""


def record_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The released record's fields ``pred.py`` fills its templates with (``context``, ``question``, ``choice_A`` ..
    ``choice_D``, each as released but stripped) and its table's fields, from a ``source_items`` or ``instances``
    row (sources.py: the context verbatim, the question and choices given back by
    ``released_question``)."""
    try:
        record: dict[str, Any] = released_question(item["question"], item.get("record_fields") or "{}")
    except ValueError as exc:
        raise ValueError(f"record {item.get('record_id') or '?'!r}: {exc}") from None
    record["context"] = item["context"]
    if item.get("record_id"):
        record["_id"] = item["record_id"]
    return record


def fill_prompt(template: str, record: Mapping[str, Any]) -> str:
    """``template`` filled as ``pred.py`` fills it: each placeholder of :data:`PLACEHOLDERS` in turn, by
    ``str.replace``, with the record's field stripped (``$COT$``, absent from the first calls' templates, stays)."""
    missing = [f for _, f in PLACEHOLDERS if f not in record]
    if missing:
        raise ValueError(f"the record has no field {missing[0]!r} (it has {sorted(record)})")
    return fill_in_order(template, [(p, str(record[f])) for p, f in PLACEHOLDERS], strip=True)


def answer_followup(template: str) -> Followup:
    """The CoT answer call: ``0shot_cot_ans.txt`` filled as ``pred.py`` fills it, the record's fields then the first
    call's reply (``$COT$``), every value stripped, 128 new tokens."""
    fill = (*((p, f"record.{f}") for p, f in PLACEHOLDERS), (REASONING_PLACEHOLDER, "reasoning"))
    return Followup(prompt=template, max_new_tokens=ANSWER_MAX_NEW_TOKENS, fill=fill, strip=True)


@dataclass(frozen=True)
class V2Protocol(OfficialProtocol):
    """:class:`OfficialProtocol` plus what LongBench v2's adds: the CoT task's answer call (``followups``: task ->
    its ``Followup``, set on the task by ``task_updates``) and the authors' sampling temperature (declared, not
    applied to every official request: :func:`official_temperature`)."""

    followups: Mapping[str, Followup] = field(default_factory=dict)
    temperature: float = TEMPERATURE

    def task_updates(self, task: str) -> dict[str, Any]:
        updates = super().task_updates(task)
        if task in self.followups:
            updates["followup"] = self.followups[task]
        return updates


def official_protocol(fetch: bool) -> V2Protocol | None:
    """LongBench v2's protocol from the authors' files. ``fetch``: find them as lc_pipeline/official.py does
    (fetching when online; missing is an error naming what to provide); otherwise None when they are not on this
    machine (config.files_found_here)."""
    if not fetch and not files_found_here(READS):
        return None
    templates = {task: official_files.prompt_template(name) for task, name in TASK_PROMPTS.items()}
    answer = answer_followup(official_files.prompt_template(ANSWER_PROMPT))
    budget()  # read (and verify) model2maxlen now: a run that cannot fit a prompt fails before it starts

    def prompt(task: str, item: Mapping[str, Any]) -> str:
        where = f"{official_files.REPO} prompts/@{official_files.COMMIT[:7]}"
        if task not in templates:
            raise ValueError(f"{where}: no prompt for task {task!r} (it has {sorted(templates)})")
        return fill_prompt(templates[task], record_of(item))

    return V2Protocol(
        benchmark="longbench_v2", commit=official_files.COMMIT, prompt=prompt, max_new_tokens=MAX_NEW_TOKENS,
        truncation=TRUNCATION, followups={"cot": answer},
    )
