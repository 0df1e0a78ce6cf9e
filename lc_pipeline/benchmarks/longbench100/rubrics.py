"""100-LongBench's judge rubrics under ``protocol: ours`` (100longbench.md §5), our own wording; ``judging.py`` holds
the authors' versions (``protocol: official``).

================  ========================================================================
lb100_qa          QA: fluency 0-2 x correctness 0-3 / 6, asked once per gold answer, max taken.
lb100_summ        summary: fluency 0/1 x precision / sentence_count (0 when the summary has
                  no sentence); the summary prompts are the generic ones of score/judge.py.
================  ========================================================================
"""

from __future__ import annotations

from lc_pipeline.score.judge import (
    OK,
    OUT_OF_RANGE,
    SUMM_FLUENCY_PROMPT,
    SUMM_PRECISION_PROMPT,
    JudgeInput,
    Rubric,
    int_fields,
    last_json_object,
    worst_status,
)

LB100_QA_PROMPT = """You are grading an answer to a question about a long text. You do not see the text; instead you get a reference answer that would earn full marks. Grade the given answer against it.

Fluency:
- 0: incoherent.
- 1: coherent and grammatical, but repetitive.
- 2: coherent, not repetitive, fluent and grammatical.

Correctness:
- 0: disagrees with the reference answer.
- 1: partly agrees with it (for instance, the date is right but the person is wrong).
- 2: fully agrees with it but also says clearly unrelated things (relevant extra details are fine).
- 3: fully agrees with it and says nothing unrelated.

Think step by step and explain your grade first. Then end with the grade as JSON, like {{"fluency": 2, "correctness": 3}}.

Question: {question}
Reference answer: {answers}
Answer to grade: {output}"""

def _lb100_qa_prompts(inp: JudgeInput) -> dict[str, str]:
    # 100-LongBench asks once per gold answer and keeps the best grade; the first line is graded.
    out = inp.output.lstrip("\n").split("\n")[0]
    return {f"gold{i}": LB100_QA_PROMPT.format(question=inp.question, answers=g, output=out)
            for i, g in enumerate(inp.answers[:5])}


def _lb100_qa_combine(inp, replies):
    best, statuses, fields = None, [], {}
    for aspect, reply in sorted(replies.items()):
        p = int_fields(last_json_object(reply), {"fluency": (0, 2), "correctness": (0, 3)})
        statuses.append(p.status)
        if p.status == OK and (best is None or p.fields["fluency"] * p.fields["correctness"] > best):
            best, fields = p.fields["fluency"] * p.fields["correctness"], p.fields
    if best is None:
        return worst_status(statuses), None, None, {}, None
    return OK, float(best), best / 6, fields, None


def _lb100_summ_prompts(inp: JudgeInput) -> dict[str, str]:
    out = inp.output.lstrip("\n").split("\n")[0]
    return {"fluency": SUMM_FLUENCY_PROMPT.format(summary=out),
            "precision": SUMM_PRECISION_PROMPT.format(reference=inp.answers[0], summary=out)}


def _lb100_summ_combine(inp, replies):
    flu = int_fields(last_json_object(replies["fluency"]), {"fluency": (0, 1)})
    pre = int_fields(last_json_object(replies["precision"]), {"precision": (0, None), "sentence_count": (0, None)})
    fields = {**flu.fields, **pre.fields}
    status = worst_status([flu.status, pre.status])
    if status == OK and pre.fields["precision"] > pre.fields["sentence_count"]:
        status = OUT_OF_RANGE
    if status != OK:
        return status, None, None, fields, None
    ratio = pre.fields["precision"] / pre.fields["sentence_count"] if pre.fields["sentence_count"] else 0.0
    value = flu.fields["fluency"] * ratio
    return OK, value, value, fields, None


LB100_QA = Rubric("lb100_qa", "1", "fluency (0-2) x correctness (0-3), 0-6", _lb100_qa_prompts, _lb100_qa_combine,
                  texts=(LB100_QA_PROMPT,))
LB100_SUMM = Rubric("lb100_summ", "1", "fluency (0/1) x supported sentences / sentences, 0-1", _lb100_summ_prompts,
                    _lb100_summ_combine, texts=(SUMM_FLUENCY_PROMPT, SUMM_PRECISION_PROMPT))
