"""LongBench (v1) official metrics for all 21 tasks, value for value.

Behaviour follows ``THUDM/LongBench`` ``metrics.py`` + ``eval.py`` (spec ``longbench_metrics.md``):

* a record scores the **max over its gold answers** (starting from 0.0);
* trec, triviaqa, samsum and lsht score only the first line of the prediction;
* QA F1 (en): ``normalize_answer`` tokens; QA F1 (zh): jieba tokens, each normalized;
* ROUGE-L F from the ``rouge`` package (1.0.1, as the official requirements), any exception -> 0
  (the official number, counted as a fallback zero: score/fallbacks.py);
  Chinese strings are jieba-tokenized and space-joined first (these four: score/token_scores.py, which other
  benchmarks' scorers share);
* classification, retrieval, count and code similarity as in the official code, quirks included
  (see each function).

Pure functions, no Dagster. Each metric takes one prediction and one gold answer; use
:func:`score_with` for the max over golds and the first-line rule, :func:`score_record` for a task
(its metric and rule as lc_pipeline/benchmarks/longbench/task_files/longbench.yaml declares them). The ``LONGBENCH_*`` objects at
the end are the metrics the package registers (``longbench.<metric>``, tasks.registry.METRICS).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lc_pipeline.score.task_metrics import Metric, answers_of
from lc_pipeline.score.token_scores import (
    qa_f1_score,
    qa_f1_zh_score,
    rouge_score,
    rouge_zh_score,
)

__all__ = [
    "METRICS",
    "classification_score",
    "code_sim_score",
    "count_score",
    "longbench_task_metric",
    "retrieval_score",
    "retrieval_zh_score",
    "score_record",
    "score_with",
    "tasks",
]

def classification_score(prediction: str, ground_truth: str, all_classes: Sequence[str]) -> float:
    """1/len(matches) when the gold label is among the class names found in the prediction.

    Class names that are a proper substring of the gold label are dropped, with the official
    loop's quirk kept on purpose: it removes from the list while iterating over it, so of two
    adjacent such names the second survives. (The official fallback to the most similar class
    never runs: it is guarded by ``list != 0``, which is always true.)
    """
    matches = [c for c in all_classes if c in prediction]
    for term in matches:  # mutating while iterating: LongBench's exact behaviour
        if term in ground_truth and term != ground_truth:
            matches.remove(term)
    return 1.0 / len(matches) if ground_truth in matches else 0.0


def _number_share(prediction: str, gold_number: str) -> float:
    numbers = re.findall(r"\d+", prediction)
    if not numbers:
        return 0.0
    return float(sum(n == gold_number for n in numbers) / len(numbers))


def _gold_paragraph(ground_truth: str, pattern: str) -> str:
    found = re.findall(pattern, ground_truth)
    if not found:
        raise ValueError(f"gold answer {ground_truth!r} names no paragraph (expected the pattern {pattern!r})")
    return found[0]


def retrieval_score(prediction: str, ground_truth: str) -> float:
    """Share of the numbers in the prediction that equal the gold ``Paragraph N``."""
    return _number_share(prediction, _gold_paragraph(ground_truth, r"Paragraph (\d+)"))


def retrieval_zh_score(prediction: str, ground_truth: str) -> float:
    """Share of the numbers in the prediction that equal the gold ``段落N``."""
    return _number_share(prediction, _gold_paragraph(ground_truth, r"段落(\d+)"))


def count_score(prediction: str, ground_truth: str) -> float:
    """Share of the numbers in the prediction that equal the gold count."""
    return _number_share(prediction, str(ground_truth))


def _fuzz_ratio(a: str, b: str) -> int:
    """fuzzywuzzy 0.18 ``fuzz.ratio`` without python-Levenshtein (LongBench's requirements).

    Equal strings give 100 before the empty-string check gives 0 (its decorator order).
    """
    if a == b:
        return 100
    if not a or not b:
        return 0
    return round(100 * difflib.SequenceMatcher(None, a, b).ratio())  # fuzzywuzzy intr(): int(round(x))


def code_sim_score(prediction: str, ground_truth: str) -> float:
    """fuzz.ratio/100 between the gold line and the prediction's first line with no `` ` ``, ``#``, ``//``."""
    line = ""
    for candidate in prediction.lstrip("\n").split("\n"):
        if "`" not in candidate and "#" not in candidate and "//" not in candidate:
            line = candidate
            break
    return _fuzz_ratio(line, ground_truth) / 100


_METRICS: dict[str, Callable[[str, str], float]] = {
    "qa_f1": qa_f1_score,
    "qa_f1_zh": qa_f1_zh_score,
    "rouge": rouge_score,
    "rouge_zh": rouge_zh_score,
    "retrieval": retrieval_score,
    "retrieval_zh": retrieval_zh_score,
    "count": count_score,
    "code_sim": code_sim_score,
}
METRICS: tuple[str, ...] = (*_METRICS, "classification")  # LongBench eval.py's metric functions


def score_with(
    metric: str,
    prediction: str,
    answers: Sequence[str],
    all_classes: Sequence[str] | None = None,
    *,
    first_line: bool = False,
) -> float:
    """One record's official score in [0, 1] under LongBench ``metric`` (qa_f1, rouge, classification, ...):
    max over gold answers; ``first_line``: the few-shot rule (leading newlines dropped, cut at the next one).

    Raises ``ValueError`` naming the field for a bare string or empty list of answers and a missing class
    list. Which metric and rule a task uses is declared in lc_pipeline/benchmarks/longbench/task_files/longbench.yaml.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown LongBench metric {metric!r}; known: {', '.join(METRICS)}")
    if not isinstance(prediction, str):
        raise ValueError(f"field 'prediction': expected a string, got {type(prediction).__name__}")
    if isinstance(answers, str) or not answers or not all(isinstance(a, str) for a in answers):
        raise ValueError(f"field 'answers': expected a non-empty list of strings, got {answers!r}")
    if first_line:
        prediction = prediction.lstrip("\n").split("\n")[0]
    if metric == "classification":
        if isinstance(all_classes, str) or not all_classes:
            raise ValueError(f"field 'all_classes': the classification metric needs the list of class names, "
                             f"got {all_classes!r}")
        return max([0.0] + [classification_score(prediction, g, all_classes) for g in answers])
    fn = _METRICS[metric]
    return max([0.0] + [fn(prediction, g) for g in answers])


def tasks() -> tuple[str, ...]:
    """LongBench v1's task names, as its task file declares them."""
    from lc_pipeline.tasks.catalog import load_catalog

    return tuple(s.name for s in load_catalog().tasks("longbench"))


def longbench_task_metric(task: Any) -> tuple[str, bool]:
    """(LongBench metric, first-line rule) of a task whose metrics name one ``longbench.*`` metric."""
    refs = [m for m in task.metrics if m.name.startswith("longbench.")]
    if len(refs) != 1:
        raise ValueError(f"task {task.qualified_name}: expected one longbench.* metric, got {list(task.metric_names)}")
    return refs[0].name.removeprefix("longbench."), bool(refs[0].options.get("first_line", False))


def score_record(
    task: str,
    prediction: str,
    answers: Sequence[str],
    all_classes: Sequence[str] | None = None,
) -> float:
    """One record's official score for LongBench ``task``: its metric and first-line rule as its task file
    declares them (``lcp score --metric longbench:<task>``; the pipeline scores instances the same way)."""
    from lc_pipeline.tasks.catalog import load_catalog

    catalog = load_catalog()
    if f"longbench/{task}" not in catalog:
        raise ValueError(f"unknown LongBench task {task!r}; known tasks: {', '.join(tasks())}")
    metric, first = longbench_task_metric(catalog.get(f"longbench/{task}"))
    return score_with(metric, prediction, answers, all_classes, first_line=first)


# --------------------------------------------------------------------------- the registered metrics


def _longbench(kind: str) -> Callable[..., float]:
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return score_with(kind, output, answers_of(instance), instance.get("all_classes"),
                          first_line=bool(options.get("first_line", False)))
    return score


LONGBENCH_QA_F1 = Metric("longbench", _longbench("qa_f1"), "QA F1 (English normalization)")
LONGBENCH_QA_F1_ZH = Metric("longbench", _longbench("qa_f1_zh"), "QA F1 on jieba tokens")
LONGBENCH_ROUGE = Metric("longbench", _longbench("rouge"), "ROUGE-L F (rouge package)")
LONGBENCH_ROUGE_ZH = Metric("longbench", _longbench("rouge_zh"), "ROUGE-L F on jieba tokens")
LONGBENCH_CLASSIFICATION = Metric("longbench", _longbench("classification"), "class names found, gold share")
LONGBENCH_RETRIEVAL = Metric("longbench", _longbench("retrieval"), "share of numbers equal to the gold paragraph")
LONGBENCH_RETRIEVAL_ZH = Metric("longbench", _longbench("retrieval_zh"), "the same, Chinese paragraph labels")
LONGBENCH_COUNT = Metric("longbench", _longbench("count"), "share of numbers equal to the gold count")
LONGBENCH_CODE_SIM = Metric("longbench", _longbench("code_sim"), "fuzz ratio of the first code line")
