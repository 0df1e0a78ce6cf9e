"""100-LongBench's per-task scores in the repo's "original metric" mode (spec 100longbench.md §5.2-§5.3).

Every task scores only the first line of the output (``first_line``); an empty line scores 0;
the item score is the max over gold answers.

* passage_retrieval, passage_count, counting_stars: the first integer in the prediction equals
  the gold string.
* kv_retrieval: the LAST UUID in the prediction equals the gold.
* single/multi-doc QA: LongBench token F1; single/multi-doc summarization: ROUGE-L F (the
  ``rouge`` package, as the repo's ``--original_metric`` mode; score/token_scores.py). The paper's LLM-judge
  scores for these four tasks belong to the judge stage (rubrics.py).

The prior-knowledge filter (which QA items a model answers without context) is the generic
score/prior_knowledge.py. Pure functions (no Dagster).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lc_pipeline.score.metrics import first_line
from lc_pipeline.score.task_metrics import Metric, answers_of
from lc_pipeline.score.token_scores import qa_f1_score, rouge_score

METRIC = "lb100"  # metric_scores.metric of these scores

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_INTEGER = re.compile(r"\d+")


def first_integer_score(prediction: str, gold: str) -> float:
    """Accuracy of passage retrieval / passage count / counting stars: the first run of digits == gold."""
    m = _INTEGER.search(prediction)
    return float(m is not None and m.group(0) == gold)


def kv_retrieval_score(prediction: str, gold: str) -> float:
    """KV retrieval accuracy: the last UUID in the prediction == gold."""
    found = _UUID.findall(prediction)
    return float(bool(found) and found[-1] == gold)


def first_line_parses(pattern: str, output: str) -> bool:
    """Whether the first line (as :func:`first_line_score` reads it) holds what the scorer parses: ``"integer"``
    (first_integer_score) or ``"uuid"`` (kv_retrieval_score); a row without one is unparsable (issue 21)."""
    regex = {"integer": _INTEGER, "uuid": _UUID}[pattern]
    return regex.search(first_line(output)) is not None


def first_line_score(scorer: Callable[[str, str], float], output: str, answers: Sequence[str]) -> float:
    """100-LongBench's rule for every task (spec §4.4): score the first line of the output (leading newlines
    dropped), max over the golds; an empty first line scores 0. Which scorer a task uses is declared in its
    task file (lc_pipeline/benchmarks/longbench100/task_files/longbench100.yaml; the LB100_* metrics below).

    >>> first_line_score(first_integer_score, "\\n12 unique paragraphs\\n13", ["12"])
    1.0
    """
    if isinstance(answers, str) or not list(answers):
        raise ValueError("field answers: expected a non-empty list of gold strings")
    pred = first_line(output)
    if not pred.strip():
        return 0.0
    return max(scorer(pred, gold) for gold in answers)


# --------------------------------------------------------------------------- the registered metrics (spec §4.4)


def _lb100(scorer: Callable[[str, str], float]) -> Callable[..., float]:
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return first_line_score(scorer, output, answers_of(instance))
    return score


LB100_KV_RETRIEVAL = Metric("lb100", _lb100(kv_retrieval_score), "last UUID of the first line",
                            parses=lambda o, i, t: first_line_parses("uuid", o))
LB100_FIRST_INTEGER = Metric("lb100", _lb100(first_integer_score), "first integer of the first line",
                             parses=lambda o, i, t: first_line_parses("integer", o))
LB100_QA_F1 = Metric("lb100", _lb100(qa_f1_score), "token F1 of the first line")
LB100_ROUGE = Metric("lb100", _lb100(rouge_score), "ROUGE-L of the first line")
