"""Loong's judge as its authors run it (``protocol: official``; fidelity audit LO2, LO3, X2).

The prompt is theirs, read from ``src/utils/prompt.py`` (:func:`~lc_pipeline.benchmarks.loong.official_files.
judge_prompt`), and filled as ``get_evaluate_prompts`` fills it: ``prompt.format(question, answer, predict)``
where

- ``question`` is the item's ``prompt_template`` with ``{docs}`` removed (kept, unfilled, for ``paper`` items),
  then ``{question}`` and ``{instruction}`` replaced by the item's own (``str.replace``, in that order);
- ``answer`` is the released answer as Python's ``str()`` renders it (a list or dict as its repr, keys in the
  file's order, LO3): the instance's ``record_fields.answer``, which must hold that rendering as a string (made
  when the record is read: record_fields are stored with sorted keys, so a dict kept as a dict would lose its
  order);
- ``predict`` is the model's output as it is.

The call (``src/utils/generate.py``): one user turn, no system message, temperature 0 (gpt-4-turbo, audit LO2), no
``max_tokens``, top_p or seed sent; a request that fails or comes back empty is asked again, 5 tries in all. The
verdict is ``extract_number`` (``src/utils/metric.py``): the first ``[[n]]``, else the first ``[n]``; a reply
without one is left out of every average (``cal_metric`` counts only the effective samples).
"""

from __future__ import annotations

from lc_pipeline.benchmarks.loong.official_files import COMMIT, judge_prompt
from lc_pipeline.score.judge import (
    NO_SCORE,
    OK,
    JudgeInput,
    JudgeSettings,
    Rubric,
    bracket_score,
)
from lc_pipeline.settings import Settings

OFFICIAL_RUBRICS = ("loong",)
LABEL = f"official@{COMMIT[:7]}"
VERSION = f"{LABEL}/v1"  # v<n>: our filling of their prompt; bumped when that code changes

SETTINGS = JudgeSettings(temperature=0.0, system=None, tries=5, api_retries=4, unparsed_score=None, model="gpt-4-turbo")

# What the judge prompt reads from the instance's record_fields.
FIELDS = ("type", "prompt_template", "question", "instruction", "answer")


def judge_question(fields: dict) -> str:
    """The question the authors' judge sees: the item's template without its documents, question and instruction
    filled in."""
    template = fields["prompt_template"]
    if fields["type"] != "paper":
        template = template.replace("{docs}", "")
    return template.replace("{question}", fields["question"]).replace("{instruction}", fields["instruction"])


def _fields(inp: JudgeInput) -> dict:
    missing = [f for f in FIELDS if f not in inp.record_fields or inp.record_fields[f] is None]
    if missing:
        raise ValueError(f"field record_fields.{missing[0]}: missing; the authors' Loong judge prompt needs the "
                         f"released item's {', '.join(missing)} in record_fields (build the instances from "
                         "loong.jsonl with the loong source)")
    wrong = [f for f in FIELDS if not isinstance(inp.record_fields[f], str)]
    if wrong:
        raise ValueError(f"field record_fields.{wrong[0]}: expected a string (answer: str() of the released "
                         f"answer), got {type(inp.record_fields[wrong[0]]).__name__}")
    return inp.record_fields


def rubric(template: str, label: str = LABEL, version: str = VERSION) -> Rubric:
    """The official Loong rubric around the authors' ``template`` (three positional ``{}``)."""

    def prompts(inp: JudgeInput) -> dict[str, str]:
        fields = _fields(inp)
        return {"score": template.format(judge_question(fields), fields["answer"], inp.output)}

    def combine(inp: JudgeInput, replies: dict[str, str]):
        n = bracket_score(replies["score"])
        if n is None:
            return NO_SCORE, None, None, {}, None
        return OK, n, n / 100, {"score": n}, n == 100

    return Rubric("loong", version, "overall score 1-100 (the authors' [[n]])", prompts, combine, json_reply=False,
                  protocol=label, settings=SETTINGS, accept=lambda aspect, reply: bool(reply))


def official_rubric(name: str, *, settings: Settings | None = None) -> Rubric:
    if name not in OFFICIAL_RUBRICS:
        raise ValueError(f"Loong declares no official rubric {name!r} (only {', '.join(OFFICIAL_RUBRICS)})")
    return rubric(judge_prompt(settings=settings))
