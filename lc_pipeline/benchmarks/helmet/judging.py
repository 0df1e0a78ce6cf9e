"""HELMET's judges as its authors run them (``protocol: official``; fidelity audit HE4, X2).

Prompts are theirs, read from ``scripts/eval_gpt4_longqa.py`` and ``scripts/eval_gpt4_summ.py``
(:mod:`lc_pipeline.benchmarks.helmet.official_files`), filled as those scripts fill them:

- ``helmet_longqa``: ``judge_prompt.format(question=..., correct_answers=<the answers list, str() of it>,
  parsed_output=parse_output(output))`` (:func:`parse_output`: the rest of the line after ``Answer:``, else the
  first line, newlines flattened first). Verdict: the last ``{...}`` of the reply, parsed as JSON (no other
  candidate tried), with ``fluency`` and ``correctness``; value fluency x correctness, score value / 3. A reply
  without them is left out.
- ``helmet_summ``: three questions, ``fluency_prompt`` (``text``), ``recall_prompt`` (``keypoints``: "1. ...\\n2.
  ..."; ``summary``), ``precision_prompt`` (``expert_summary``, ``summary``), the summary being ``output.strip()``.
  ∞Bench Sum (a task whose name contains :data:`BOOK_TASK_MARK`, as the authors pick by the results file's name)
  gets the ``_book`` variants and its gold summary as the expert summary; every other summarization task gets
  the Multi-LexSum (civil lawsuit) prompts and its long summary (``record_fields.reference_summary``). Key points
  are the released ones (``record_fields.key_points``); there is no stand-in. Verdicts: the last ``{...}``, else
  the last fenced json block; recall = found / key points, precision = supported / sentences (0 when a count is
  0), score = fluency x F1. An item with any reply unread is left out.

The call (``model_utils.OpenAIModel`` as the scripts make it): one user turn, no system message, temperature 0.1,
top_p 0.9, seed 42, ``max_tokens`` 2048 (LongQA, the class default) or 4096 (Summ); a failed request is retried
5 times; no reply is asked again for its content.
"""

from __future__ import annotations

import re

from lc_pipeline.benchmarks.helmet.official_files import (
    COMMIT,
    longqa_judge_prompt,
    summ_judge_prompts,
)
from lc_pipeline.score.judge import (
    MISSING_FIELD,
    NO_SCORE,
    OK,
    JudgeInput,
    JudgeSettings,
    Rubric,
    last_braces_json,
    last_braces_or_fenced_json,
)
from lc_pipeline.settings import Settings

OFFICIAL_RUBRICS = ("helmet_longqa", "helmet_summ")
LABEL = f"official@{COMMIT[:7]}"
VERSION = f"{LABEL}/v1"  # v<n>: our filling of their prompts; bumped when that code changes

_CALL = {"temperature": 0.1, "top_p": 0.9, "seed": 42, "system": None, "api_retries": 5,
         "model": "gpt-4o-2024-05-13", "unparsed_score": None, "tries": 1}
LONGQA_SETTINGS = JudgeSettings(max_tokens=2048, **_CALL)
SUMM_SETTINGS = JudgeSettings(max_tokens=4096, **_CALL)

BOOK_TASK_MARK = "infbench"  # eval_gpt4_summ.py: `"infbench" in results_file` picks the _book prompts
ANSWER_PREFIX = "Answer:"


def parse_output(output: str, prefix: str = ANSWER_PREFIX) -> str:
    """HELMET's ``parse_output`` of the judged answer: newlines become spaces; the text after the first
    ``prefix`` (case-insensitive) else the whole (first) line, stripped, one leading ``prefix`` removed, stripped."""
    flat = output.replace("\n", " ")
    found = re.search(f"(?:{re.escape(prefix)})(.*)(?:\n|$)", flat, flags=re.IGNORECASE)
    text = (found or re.search(r"(?:^)(.*)(?:\n|$)", flat))[1].strip()
    return re.sub(f"^{re.escape(prefix)}", "", text, flags=re.IGNORECASE).strip()


def longqa_verdict(reply: str):
    """``eval_gpt4_longqa.parse_json``: the last ``{...}`` as JSON, else None (score.judge.last_braces_json)."""
    return last_braces_json(reply)


def summ_verdict(reply: str):
    """``eval_gpt4_summ.parse_json``: the last ``{...}`` as JSON; if that is not JSON, the last fenced json block;
    else None (score.judge.last_braces_or_fenced_json)."""
    return last_braces_or_fenced_json(reply)


def _number(obj, name: str) -> float | None:
    value = obj.get(name) if isinstance(obj, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def is_book(task: str) -> bool:
    return BOOK_TASK_MARK in task


def longqa_rubric(template: str, label: str = LABEL, version: str = VERSION) -> Rubric:
    def prompts(inp: JudgeInput) -> dict[str, str]:
        return {"qa": template.format(question=inp.question, correct_answers=str(list(inp.answers)),
                                      parsed_output=parse_output(inp.output))}

    def combine(inp: JudgeInput, replies: dict[str, str]):
        obj = longqa_verdict(replies["qa"])
        if obj is None:
            return NO_SCORE, None, None, {}, None
        fluency, correctness = _number(obj, "fluency"), _number(obj, "correctness")
        if fluency is None or correctness is None:
            return MISSING_FIELD, None, None, {k: obj[k] for k in ("fluency", "correctness") if k in obj}, None
        value = fluency * correctness
        return OK, value, value / 3, {"fluency": fluency, "correctness": correctness}, None

    return Rubric("helmet_longqa", version, "fluency x correctness (the authors' rubric), 0-3", prompts, combine,
                  protocol=label, settings=LONGQA_SETTINGS)


def _key_points(inp: JudgeInput) -> list:
    points = inp.record_fields.get("key_points")
    if not isinstance(points, list) or not points:
        raise ValueError("field record_fields.key_points: missing or empty; HELMET's summarization judge reads the "
                         "released key points (∞Bench Sum's keypoints file, Multi-LexSum's summary/short_keypoints)")
    return points


def _expert_summary(inp: JudgeInput) -> str:
    if is_book(inp.task):
        return inp.answers[0]
    reference = inp.record_fields.get("reference_summary")
    if not isinstance(reference, str) or not reference:
        raise ValueError("field record_fields.reference_summary: missing; HELMET's Multi-LexSum precision judge "
                         "reads the case's long summary (summary/long)")
    return reference


def summ_rubric(templates: dict[str, str], label: str = LABEL, version: str = VERSION) -> Rubric:
    """``templates``: the six prompts by the authors' variable names (``fluency_prompt``, ``..._book``, ...)."""

    def prompts(inp: JudgeInput) -> dict[str, str]:
        suffix = "_book" if is_book(inp.task) else ""
        summary = inp.output.strip()
        points = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(_key_points(inp)))
        return {
            "fluency": templates[f"fluency_prompt{suffix}"].format(text=summary),
            "recall": templates[f"recall_prompt{suffix}"].format(keypoints=points, summary=summary),
            "precision": templates[f"precision_prompt{suffix}"].format(expert_summary=_expert_summary(inp),
                                                                       summary=summary),
        }

    def combine(inp: JudgeInput, replies: dict[str, str]):
        verdicts = {a: summ_verdict(replies[a]) for a in ("fluency", "recall", "precision")}
        if any(v is None for v in verdicts.values()):
            return NO_SCORE, None, None, {"unread": sorted(a for a, v in verdicts.items() if v is None)}, None
        fluency = _number(verdicts["fluency"], "fluency")
        found = _number(verdicts["recall"], "recall")
        supported = _number(verdicts["precision"], "precision")
        sentences = _number(verdicts["precision"], "sentence_count")
        fields = {"fluency": fluency, "recall": found, "precision": supported, "sentence_count": sentences}
        if None in fields.values():
            return MISSING_FIELD, None, None, {k: v for k, v in fields.items() if v is not None}, None
        n_points = len(_key_points(inp))
        recall = found / n_points if n_points > 0 else 0
        precision = supported / sentences if sentences > 0 else 0
        f1 = fluency * 2 * (recall * precision) / (recall + precision) if recall + precision > 0 else 0
        return OK, f1, f1, {**fields, "key_points": n_points, "recall_ratio": recall, "precision_ratio": precision,
                            "f1": f1, "variant": "book" if is_book(inp.task) else "lawsuit"}, None

    return Rubric("helmet_summ", version, "fluency x F1(key-point recall, sentence precision) (the authors'), 0-1",
                  prompts, combine, protocol=label, settings=SUMM_SETTINGS)


def official_rubric(name: str, *, settings: Settings | None = None) -> Rubric:
    if name == "helmet_longqa":
        return longqa_rubric(longqa_judge_prompt(settings=settings))
    if name == "helmet_summ":
        return summ_rubric(summ_judge_prompts(settings=settings))
    raise ValueError(f"HELMET declares no official rubric {name!r} (only {', '.join(OFFICIAL_RUBRICS)})")
