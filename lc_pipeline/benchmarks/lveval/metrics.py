"""LV-Eval's metric as a task names it (``lveval``, spec lveval.md §7): keyword recall gates token F1, each dataset
by its own rule. The scorer itself (the rules, both variants, tokens and blacklists) is score/keyword_recall.py:
the construction checks of CFI (construct/confusing_facts.py) and the variant rows of any corpus score with it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lc_pipeline.score.keyword_recall import DEFAULT_VARIANT, dataset_rule, keyword_recall_score
from lc_pipeline.score.task_metrics import Metric


def lveval_rule(task: str, language: str) -> str:
    """The LV-Eval rule of an instance: its dataset's own rule when the task is an LV-Eval dataset
    (cmrc, dureader, factrecall ... differ), else keyword-recall F1 in its language."""
    try:
        return dataset_rule(task or "").name
    except ValueError:
        return f"keyword_recall_{language if language in ('en', 'zh') else 'en'}"


def _lveval(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    rule = options.get("rule") or lveval_rule(instance.get("task") or "", instance.get("language") or "en")
    return keyword_recall_score(rule, output, instance.get("answers") or [], instance.get("answer_keywords") or [],
                        options.get("variant", DEFAULT_VARIANT))


LVEVAL = Metric("lveval", _lveval, "keyword-recall gate, then F1 (the dataset's own rule)")
