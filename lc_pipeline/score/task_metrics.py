"""The metrics a task names (``metrics:`` in its task file), registered by name in ``tasks.registry.METRICS``.

Each is a small public ``Metric``: a ``label`` (the ``metric_scores.metric`` value of its rows) and a
function ``(output, instance, task, options) -> float`` in [0, 1]. ``instance`` is the INSTANCES row
(``answers``, ``all_classes``, ``answer_keywords``, ``language``, ``task``); ``task`` its TaskSpec, whose
``answer_prefix`` is the one place a task's prefix is declared; ``options`` the metric's options from
the task file merged over the run's (e.g. a keyword-recall ``variant``). Families share a label so that a
benchmark's tables keep one metric column (each benchmark package's ``metrics.py`` gives its own metrics one
label). This module holds the ``Metric`` type, the generic metrics (``subem``, ``em``, ``f1``) and the helpers
the packages' metrics share; each benchmark's own metrics live in ``lc_pipeline/benchmarks/<name>/metrics.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lc_pipeline.score.metrics import (
    exact_match,
    parse_answer,
    substring_exact_match,
    token_f1,
)

DEFAULT_ANSWER_PREFIX = "Answer:"


@dataclass(frozen=True)
class Metric:
    label: str  # metric_scores.metric
    fn: Callable[[str, Mapping[str, Any], Any, Mapping[str, Any]], float]
    description: str = ""
    # What the metric needs besides the output and the instance: "" (nothing: metric_scores computes it) or
    # "nli" (an NLI judge: the citation_scores asset computes it, score/citations.py; metric_scores skips it).
    needs: str = ""
    # For a metric that parses an answer (an MC letter, a label integer, a ranking): ``(output, instance, task)
    # -> bool``, whether the output holds one. A row it finds none in is scored as the metric scores it (0) and
    # its metric_scores status says "unparsable", so invalid outputs are counted apart from wrong ones.
    parses: Callable[[str, Mapping[str, Any], Any], bool] | None = None

    def __call__(self, output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return self.fn(output, instance, task, options)


def answers_of(instance: Mapping[str, Any]) -> list[str]:
    """The instance's gold answers; a ValueError naming the field when they are missing or not a list."""
    answers = instance.get("answers")
    if answers is None or isinstance(answers, str) or len(answers) == 0:
        raise ValueError(f"field answers: expected a non-empty list of gold strings, got {answers!r}")
    return list(answers)


def answer_prefix_of(task: Any) -> str:
    """The task's answer prefix (``answer_prefix`` of its task file), else :data:`DEFAULT_ANSWER_PREFIX`."""
    return getattr(task, "answer_prefix", None) or DEFAULT_ANSWER_PREFIX


def _raw_or_parsed(fn: Callable[[str, Sequence[str]], float]) -> Callable[..., float]:
    """HELMET's QA post-processing: the better of the raw output and the text after the task's answer prefix."""
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        golds = answers_of(instance)
        return max(fn(output, golds), fn(parse_answer(output, answer_prefix_of(task)), golds))
    return score


SUBEM = Metric("subem", _raw_or_parsed(substring_exact_match), "SubEM (HELMET §3), raw or after the answer prefix")
EM = Metric("em", _raw_or_parsed(exact_match), "exact match (SQuAD normalization), raw or after the answer prefix")
F1 = Metric("f1", _raw_or_parsed(token_f1), "LongBench token F1, raw or after the answer prefix")

def official_instance(instance: Mapping[str, Any]) -> bool:
    """Whether the instance was built under a benchmark's official protocol (its ``record_fields.protocol``)."""
    raw = instance.get("record_fields") if hasattr(instance, "get") else None
    if not raw:
        return False
    fields = raw if isinstance(raw, Mapping) else json.loads(raw)
    return isinstance(fields, Mapping) and str(fields.get("protocol") or "").startswith("official")



# The key under which metric_scores.score_frame hands a metric the generation's ``chat_template_source``
# (GENERATIONS: "none" when the prompt went without a chat template), beside the instance's own fields.
FED_TEMPLATE = "chat_template_source"
NO_TEMPLATE = "none"


def completion_mode(instance: Mapping[str, Any], task: Any) -> bool:
    """Whether the output continues a plain prompt (HELMET's completion mode, ``use_chat_template`` False) rather
    than answering a chat turn: the generation's ``chat_template_source`` when the caller gave it (``"none"``: no
    template, e.g. a base model on a chat task), else the task's switch (``chat_template: false``)."""
    fed = instance.get(FED_TEMPLATE) if hasattr(instance, "get") else None
    if fed:
        return fed == NO_TEMPLATE
    return not bool(getattr(task, "chat_template", False))
