"""The prior-knowledge filter (the config's ``prior_knowledge:`` section; spec 100longbench.md §5.4): which QA
items a model answers without their context, so that its scores can leave them out.

Each item's question is asked with no context (score/per_model.py plans the probe); an answer whose first line
says "unanswerable" is exempt, else it is scored (a metric on the first line, max over golds, or the judge's
verdict) and the item is dropped for that model when the score reaches the threshold. 100-LongBench introduced
it; any benchmark's QA tasks can be filtered. Pure functions (no Dagster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from lc_pipeline.schemas import PRIOR_KNOWLEDGE, conform
from lc_pipeline.score.metrics import ANSWER_METRICS, first_line


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
