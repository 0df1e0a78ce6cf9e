"""Deterministic answer metrics: SubEM, EM and token F1, plus HELMET-style output parsing.

Pure functions (no Dagster). Definitions follow the specs:

* ``exact_match`` / ``substring_exact_match``: HELMET §3 (SQuAD normalization, max over golds).
* ``token_f1``: LongBench v1 ``qa_f1_score`` (English), max over golds.
* ``parse_answer``: HELMET ``parse_output``; ``score_qa`` keeps, per metric, the max of the
  raw output and the parsed output (HELMET's default QA post-processing).

Which metrics a task uses is declared in its task file; ``score/task_metrics.py`` wraps these as the generic
metrics (each benchmark package's ``metrics.py`` its own), registered by name, and ``score/metric_scores.py``
builds the table.

All normalization goes through :func:`lc_pipeline.text.normalize_answer`, the same function
construction uses to decide that a distractor "contains no gold answer".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from lc_pipeline.text import normalize_answer

__all__ = [
    "ANSWER_METRICS",
    "KNOWN_METRICS",
    "exact_match",
    "substring_exact_match",
    "token_f1",
    "first_line",
    "parse_answer",
    "score_qa",
]


def _golds(answers: Sequence[str]) -> list[str]:
    # A bare string would be iterated character by character and score nonsense.
    if isinstance(answers, str):
        raise TypeError("answers must be a sequence of gold strings, not a single str")
    golds = list(answers)
    if not golds:
        # The official scorers take max() over golds and would crash; say so clearly instead.
        raise ValueError("answers is empty: a record needs at least one gold answer")
    return golds


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals any normalized gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) == pred for g in _golds(answers)))


def substring_exact_match(prediction: str, answers: Sequence[str]) -> float:
    """SubEM: 1.0 when any normalized gold answer is a substring of the normalized prediction.

    A gold that normalizes to "" (e.g. "The.") never matches: "" is a substring of every
    string and would credit any output.
    """
    pred = normalize_answer(prediction)
    return float(any(ng and ng in pred for ng in map(normalize_answer, _golds(answers))))


def _f1_tokens(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    # Same arithmetic as LongBench's f1_score so per-record values agree to the last bit.
    precision = 1.0 * num_same / len(pred_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """LongBench ``qa_f1_score``: multiset token F1 after English normalization, max over golds."""
    pred_tokens = normalize_answer(prediction).split()
    return max(_f1_tokens(pred_tokens, normalize_answer(g).split()) for g in _golds(answers))


def first_line(prediction: str) -> str:
    """LongBench's few-shot rule (trec, triviaqa, samsum, lsht) and 100-LongBench's rule for
    every task: drop leading newlines, keep the text before the next newline."""
    return prediction.lstrip("\n").split("\n")[0]


def parse_answer(output: str, prefix: str = "Answer:") -> str:
    """HELMET ``parse_output``: the rest of the line after the first ``prefix`` (case-insensitive),
    otherwise the first line; whitespace and leading repeats of ``prefix`` are stripped.

    Example: ``parse_answer("Answer: Paris\\nmore text")`` -> ``"Paris"``.
    """
    # `.` does not cross newlines, so the group ends at the end of the line.
    m = re.search(f"(?:{re.escape(prefix)})(.*)(?:\n|$)", output, flags=re.IGNORECASE)
    if m is None:
        m = re.search(r"(?:^)(.*)(?:\n|$)", output)  # always matches (possibly "")
    parsed = m.group(1).strip()
    lead = re.compile(f"^{re.escape(prefix)}", flags=re.IGNORECASE)
    # Models sometimes echo the prefix ("Answer: Answer: Paris").
    while prefix and lead.match(parsed):
        parsed = lead.sub("", parsed, count=1).strip()
    return parsed


ANSWER_METRICS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "subem": substring_exact_match,
    "em": exact_match,
    "f1": token_f1,
}
KNOWN_METRICS: tuple[str, ...] = tuple(ANSWER_METRICS)


def _check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    if isinstance(metrics, str):
        raise TypeError(f"metrics must be a sequence of names, e.g. ({metrics!r},), not a single str")
    names = tuple(metrics)
    unknown = [m for m in names if m not in ANSWER_METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known metrics are {list(KNOWN_METRICS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate metric names in {list(names)}")
    return names


def score_qa(
    output: str,
    answers: Sequence[str],
    metrics: Sequence[str] = ("subem", "em", "f1"),
) -> dict[str, float]:
    """Score one model output against its gold answers.

    Each metric is the max of its value on the raw output and on ``parse_answer(output)``:
    the raw output rescues answers without the "Answer:" prefix, the parsed one rescues EM/F1
    when the model adds a second line of chatter.
    """
    names = _check_metrics(metrics)
    golds = _golds(answers)
    parsed = parse_answer(output)
    return {m: max(ANSWER_METRICS[m](output, golds), ANSWER_METRICS[m](parsed, golds)) for m in names}
