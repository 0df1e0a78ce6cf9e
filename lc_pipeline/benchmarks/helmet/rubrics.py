"""HELMET's judge rubrics under ``protocol: ours`` (spec helmet.md §4): our own wording of the paper's scales, asked
with the judge resource's settings (score/judge.py). ``judging.py`` holds the authors' versions (``protocol: official``).

================  ========================================================================
helmet_longqa     long-document QA (§4.1): fluency 0/1 x correctness 0-3, score = f * c / 3.
                  Reply: a JSON object, the last one counts.
helmet_summ       summarization (§4.2): three questions: fluency 0/1; key-point recall (key
                  points present / key points); sentence precision (supported sentences /
                  sentences). score = fluency * F1(recall, precision).
================  ========================================================================

Key points for ``helmet_summ`` (spec helmet.md §4.2, §9.9, §10.7-10.8): HELMET had GPT-4o split each
gold summary into atomic claims with an unpublished prompt and ships them (∞Bench Sum's key-points
file, Multi-LexSum's ``summary/short_keypoints``); an instance carries them in its ``record_fields``
as ``key_points``. Without them we use the gold summary's sentences (a deterministic stand-in).
Precision is judged against ``record_fields.reference_summary`` when present (Multi-LexSum's long
summary), else against the gold answer (∞Bench Sum's summary). The row's ``parsed_fields`` record
which were used: ``key_points_from`` (``record_fields`` / ``gold_sentences``), ``key_points`` (their
number) and ``reference_from`` (``reference_summary`` / ``gold_answer``).
"""

from __future__ import annotations

import json

from lc_pipeline.score.judge import (
    OK,
    OUT_OF_RANGE,
    SUMM_FLUENCY_PROMPT,
    SUMM_PRECISION_PROMPT,
    JudgeInput,
    Rubric,
    int_fields,
    last_json_object,
    split_sentences,
    worst_status,
)
from lc_pipeline.score.metrics import parse_answer

HELMET_QA_PROMPT = """You are grading an answer to a question about a long text. You do not see the text; instead you get reference answers that would earn full marks. Grade the given answer against them.

Fluency:
- 0: incoherent, repetitive (even in different words), incomplete, or gibberish. A coherent answer that repeats itself or breaks off still gets 0.
- 1: coherent, not repetitive, fluent and grammatical.

Correctness:
- 0: disagrees with every reference answer.
- 1: partly agrees with a reference answer (for instance, the date is right but the person is wrong).
- 2: fully agrees with a reference answer but also says clearly unrelated things. Extra details that are relevant to the question do not count as unrelated.
- 3: fully agrees with a reference answer and says nothing unrelated. A longer answer is fine if all of it is relevant: for the reference "the North Pole", the answer "They are headed for the North Pole" earns 3.

Think step by step and explain your grade first. Then end with the grade as JSON, like {{"fluency": 1, "correctness": 3}}.

Question: {question}
Reference answers: {answers}
Answer to grade: {output}"""

SUMM_RECALL_PROMPT = """You are checking a summary against a numbered list of key points taken from an expert summary. A key point counts as present when its facts are well supported by the summary.

Think step by step about each key point first. Then end with JSON giving the numbers of the key points present and how many there are, like {{"supported_key_points": [1, 3], "recall": 2}}.

Key points:
{key_points}

Summary: "{summary}\""""


def _helmet_qa_prompts(inp: JudgeInput) -> dict[str, str]:
    # HELMET grades the parsed answer line, newlines flattened (spec §4.1).
    return {"qa": HELMET_QA_PROMPT.format(question=inp.question, answers=json.dumps(list(inp.answers)),
                                          output=parse_answer(inp.output.replace("\n", " "), "Answer:"))}


def _helmet_qa_combine(inp, replies):
    p = int_fields(last_json_object(replies["qa"]), {"fluency": (0, 1), "correctness": (0, 3)})
    if p.status != OK:
        return p.status, None, None, p.fields, None
    value = p.fields["fluency"] * p.fields["correctness"]
    return OK, float(value), value / 3, p.fields, None


def summ_key_points(inp: JudgeInput) -> tuple[list[str], str]:
    """(key points, where from): the instance's ``record_fields.key_points`` when it has a non-empty
    list of them (HELMET's extracted key points), else the gold summary's sentences."""
    given = inp.record_fields.get("key_points")
    if isinstance(given, list) and any(isinstance(k, str) and k.strip() for k in given):
        return [k.strip() for k in given if isinstance(k, str) and k.strip()], "record_fields"
    return split_sentences(inp.answers[0]), "gold_sentences"


def summ_reference(inp: JudgeInput) -> tuple[str, str]:
    """(expert summary for precision, where from): ``record_fields.reference_summary`` (Multi-LexSum's
    long summary, spec §4.2 step 4) when present, else the gold answer."""
    given = inp.record_fields.get("reference_summary")
    if isinstance(given, str) and given.strip():
        return given, "reference_summary"
    return inp.answers[0], "gold_answer"


def _summ_prompts(inp: JudgeInput) -> dict[str, str]:
    summary = inp.output.strip()
    points, _ = summ_key_points(inp)
    reference, _ = summ_reference(inp)
    return {
        "fluency": SUMM_FLUENCY_PROMPT.format(summary=summary),
        "recall": SUMM_RECALL_PROMPT.format(
            key_points="\n".join(f"{i}. {kp}" for i, kp in enumerate(points, 1)), summary=summary),
        "precision": SUMM_PRECISION_PROMPT.format(reference=reference, summary=summary),
    }


def _summ_combine(inp, replies):
    points, points_from = summ_key_points(inp)
    n_points = len(points)
    flu = int_fields(last_json_object(replies["fluency"]), {"fluency": (0, 1)})
    rec = int_fields(last_json_object(replies["recall"]), {"recall": (0, n_points)})
    pre = int_fields(last_json_object(replies["precision"]), {"precision": (0, None), "sentence_count": (0, None)})
    fields = {**flu.fields, **rec.fields, **pre.fields, "key_points": n_points, "key_points_from": points_from,
              "reference_from": summ_reference(inp)[1]}
    status = worst_status([flu.status, rec.status, pre.status])
    if status == OK and pre.fields["precision"] > pre.fields["sentence_count"]:
        status = OUT_OF_RANGE
    if status != OK:
        return status, None, None, fields, None
    recall = rec.fields["recall"] / n_points if n_points else 0.0
    precision = pre.fields["precision"] / pre.fields["sentence_count"] if pre.fields["sentence_count"] else 0.0
    f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    value = flu.fields["fluency"] * f1
    return OK, value, value, {**fields, "recall_ratio": recall, "precision_ratio": precision, "f1": f1}, None


HELMET_LONGQA = Rubric("helmet_longqa", "1", "fluency (0/1) x correctness (0-3), 0-3", _helmet_qa_prompts,
                       _helmet_qa_combine, texts=(HELMET_QA_PROMPT,))
HELMET_SUMM = Rubric("helmet_summ", "2", "fluency (0/1) x F1(key-point recall, sentence precision), 0-1", _summ_prompts,
                     _summ_combine, texts=(SUMM_FLUENCY_PROMPT, SUMM_RECALL_PROMPT, SUMM_PRECISION_PROMPT))
