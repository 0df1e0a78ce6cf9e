"""100-LongBench's per-task scores in the repo's "original metric" mode (spec 100longbench.md §5.2-§5.3).

Every task scores only the first line of the output (``first_line``); an empty line scores 0;
the item score is the max over gold answers.

* passage_retrieval, passage_count, counting_stars: the first integer in the prediction equals
  the gold string.
* kv_retrieval: the LAST UUID in the prediction equals the gold.
* single/multi-doc QA: LongBench token F1; single/multi-doc summarization: ROUGE-L F (the
  ``rouge`` package, as the repo's ``--original_metric`` mode). The paper's LLM-judge scores for
  these four tasks belong to the judge stage.

Pure functions (no Dagster).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import polars as pl

from lc_pipeline.schemas import PRIOR_KNOWLEDGE, conform
from lc_pipeline.score.metrics import ANSWER_METRICS, first_line

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
    task file (lc_pipeline/tasks/packaged/longbench100.yaml; metrics registered in score/task_metrics.py).

    >>> first_line_score(first_integer_score, "\\n12 unique paragraphs\\n13", ["12"])
    1.0
    """
    if isinstance(answers, str) or not list(answers):
        raise ValueError("field answers: expected a non-empty list of gold strings")
    pred = first_line(output)
    if not pred.strip():
        return 0.0
    return max(scorer(pred, gold) for gold in answers)


# --------------------------------------------------------------------------- QA prior-knowledge filter


def said_unanswerable(output: str, phrase: str = "unanswerable") -> bool:
    """The repo's exemption: the first line of the no-context answer contains "unanswerable"."""
    return phrase in first_line(output or "").lower()


def prior_knowledge_frame(
    items: pl.DataFrame,
    outputs: Sequence[dict],
    *,
    metric: str,
    threshold: float,
    judged: Mapping[str, tuple[str, float | None]] | None = None,
) -> pl.DataFrame:
    """PRIOR_KNOWLEDGE rows for one model (spec 100longbench.md §5.4).

    ``items``: ``item_id, task, question, answers, prompt`` (one row per QA item, the no-context
    prompt included); ``outputs``: per item, in the same order, ``output``,
    ``completion_tokens``, ``finish_reason``. An item is dropped when its answer is not
    "unanswerable" (first line) and its score is >= ``threshold`` (the repo's rule, threshold 0.5).

    The score: with ``judged`` (``prior_knowledge.scorer: judge``), the judge's, per item id
    ``(label, score)`` with label ``judge:<rubric>`` (the paper's setting: lb100_qa's fluency x
    correctness / 6 >= 0.5); an item the judge was not asked about (it said "unanswerable") or whose
    verdict could not be parsed has a null score and is kept. Else the first line scored with
    ``metric`` (max over golds).
    """
    scorer = None
    if judged is None:
        scorer = ANSWER_METRICS.get(metric)
        if scorer is None:
            raise ValueError(f"prior_knowledge.metric: {metric!r} is not one of {sorted(ANSWER_METRICS)}")
    if len(outputs) != items.height:
        raise ValueError(f"prior_knowledge: {len(outputs)} outputs for {items.height} items")
    rows = []
    for item, out in zip(items.iter_rows(named=True), outputs):
        if not item["answers"]:
            raise ValueError(f"item {item['item_id']!r}: field answers is empty")
        text = out["output"] or ""
        exempt = said_unanswerable(text)
        if scorer is not None:
            label, score = metric, scorer(first_line(text), list(item["answers"]))
        elif item["item_id"] in judged:
            label, score = judged[item["item_id"]]
        elif exempt:
            label, score = "judge", None
        else:
            raise ValueError(f"prior_knowledge: item {item['item_id']!r} has no judge verdict")
        rows.append({
            **{k: item[k] for k in ("item_id", "task", "question", "answers", "prompt")},
            "output": text,
            "metric": label,
            "score": score,
            "said_unanswerable": exempt,
            "threshold": threshold,
            "dropped": (not exempt) and score is not None and score >= threshold,
            "completion_tokens": out["completion_tokens"],
            "finish_reason": out["finish_reason"],
        })
    return conform(pl.DataFrame(rows, schema=PRIOR_KNOWLEDGE), "prior_knowledge")
