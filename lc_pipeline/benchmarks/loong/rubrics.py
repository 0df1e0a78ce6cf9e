"""Loong's judge rubric under ``protocol: ours`` (loong.md §7): one score 1-100 read from ``[[n]]`` (``[n]`` as the
fallback); score = n / 100, ``perfect`` when n = 100. Our own wording; ``judging.py`` holds the authors' version.
"""

from __future__ import annotations

import json

from lc_pipeline.score.judge import (
    NO_SCORE,
    OK,
    OUT_OF_RANGE,
    JudgeInput,
    Rubric,
    bracket_score,
)

LOONG_PROMPT = """[Question]
{question}

[Gold answer]
{answers}

[Start of the assistant's answer]
{output}
[End of the assistant's answer]

[Instructions]
Grade the assistant's answer to the question above against the gold answer, which is correct.
- Accuracy and hallucination: the answer must agree with the gold answer in meaning; numbers and their order must be exact, and nothing may be made up.
- Completeness: the answer must contain every key point of the gold answer; it need not explain them further.
Give one overall score from 1 to 100, higher being better. An answer that fully meets both criteria gets 100.
First explain your grade briefly and without bias (at most 100 words). Then write the score on its own line in exactly this format, for example "Rating: [[100]]":
Evaluation evidence: <your explanation>
Rating: [[score]]"""


def _loong_prompts(inp: JudgeInput) -> dict[str, str]:
    gold = inp.answers[0] if len(inp.answers) == 1 else json.dumps(list(inp.answers), ensure_ascii=False)
    return {"score": LOONG_PROMPT.format(question=inp.question, answers=gold, output=inp.output)}


def _loong_combine(inp, replies):
    n = bracket_score(replies["score"])
    if n is None:
        return NO_SCORE, None, None, {}, None
    if not 0 <= n <= 100:  # the prompt says 1-100, the paper's text 0-100: accept both ends
        return OUT_OF_RANGE, None, None, {"score": n}, None
    return OK, n, n / 100, {"score": n}, n == 100


LOONG = Rubric("loong", "1", "overall score 1-100", _loong_prompts, _loong_combine, json_reply=False,
               texts=(LOONG_PROMPT,))
