"""Things registered by name and imported on first use: builders, metrics, judge rubrics.

A task file names what it uses (``builder: helmet.rag``, ``metrics: [longbench.qa_f1]``,
``rubric: loong``); the registry turns a name into the object. Entries are ``"module:attribute"``
strings, imported only when looked up, so loading the task files never imports torch, rouge or
a model library, and no registry module imports the modules it names (no import cycles).
This is lm-evaluation-harness's "metrics register by name" without decorators scattered
through the code base: every registered name is listed here, in one place.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object, resolved lazily from a ``"package.module:attribute"`` target."""

    def __init__(self, kind: str, entries: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._targets: dict[str, str] = {}
        self._loaded: dict[str, T] = {}
        for name, target in (entries or {}).items():
            self.register(name, target)

    def register(self, name: str, target: str | Any) -> None:
        """Add ``name``: a ``"module:attribute"`` string (imported on first :meth:`get`) or the object itself."""
        if name in self._targets or name in self._loaded:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        if isinstance(target, str):
            if ":" not in target:
                raise ValueError(f"{self.kind} {name!r}: target {target!r} must look like 'package.module:attribute'")
            self._targets[name] = target
        else:
            self._loaded[name] = target

    def get(self, name: str, where: str = "") -> T:
        """The object registered as ``name``; an unknown name is a ValueError listing the known ones."""
        if name in self._loaded:
            return self._loaded[name]
        target = self._targets.get(name)
        if target is None:
            prefix = f"{where}: " if where else ""
            raise ValueError(f"{prefix}unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        module, _, attribute = target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        self._loaded[name] = obj
        return obj

    def __contains__(self, name: object) -> bool:
        return name in self._targets or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        return sorted({*self._targets, *self._loaded})


# Instance builders (construct/): callables ``build(request: BuildRequest) -> Iterator[pl.DataFrame]``.
BUILDERS: Registry = Registry("builder", {
    "qa.assemble": "lc_pipeline.construct.builders:qa_assemble",
    "lveval.factrecall": "lc_pipeline.construct.builders:lveval_factrecall",
    "longbench100": "lc_pipeline.construct.builders:longbench100",
    "helmet": "lc_pipeline.construct.builders:helmet",
    "released.records": "lc_pipeline.construct.released:released_records",  # a published benchmark as released
    "loong.released": "lc_pipeline.construct.loong_released:loong_released",  # Loong's items, documents assembled
    # HELMET on its released data: the released datasets' records, the others built as HELMET builds them
    "helmet.released": "lc_pipeline.benchmarks.helmet.released_build:helmet_released",
})

# The builders that fill a task's prompt as a named-field template (text.fill_template: ``{context}``, ``{{`` a literal
# brace): the catalog refuses, when it loads, a prompt of theirs with any other field (issue 31 D13). The QA-suite and
# released-records builders put ``{context}`` and ``{question}`` in literally and leave every other brace as written
# (construct/prompts.py QAPrompt).
NAMED_FIELD_BUILDERS = frozenset({"helmet", "longbench100", "helmet.released"})

# Metrics (score/task_metrics.py): ``Metric`` objects, each writing one ``metric_scores.metric`` label.
METRICS: Registry = Registry("metric", {
    name: f"lc_pipeline.score.task_metrics:{attr}"
    for name, attr in {
        "subem": "SUBEM", "em": "EM", "f1": "F1",
        "helmet.subem": "HELMET_SUBEM", "helmet.recall": "HELMET_RECALL", "helmet.ndcg10": "HELMET_NDCG10",
        "helmet.rougel": "HELMET_ROUGEL", "helmet.mc": "HELMET_MC",
        "helmet.label": "HELMET_LABEL",
        "lb100.kv_retrieval": "LB100_KV_RETRIEVAL", "lb100.first_integer": "LB100_FIRST_INTEGER",
        "lb100.qa_f1": "LB100_QA_F1", "lb100.rouge": "LB100_ROUGE",
        "longbench.qa_f1": "LONGBENCH_QA_F1", "longbench.qa_f1_zh": "LONGBENCH_QA_F1_ZH",
        "longbench.rouge": "LONGBENCH_ROUGE", "longbench.rouge_zh": "LONGBENCH_ROUGE_ZH",
        "longbench.classification": "LONGBENCH_CLASSIFICATION", "longbench.retrieval": "LONGBENCH_RETRIEVAL",
        "longbench.retrieval_zh": "LONGBENCH_RETRIEVAL_ZH", "longbench.count": "LONGBENCH_COUNT",
        "longbench.code_sim": "LONGBENCH_CODE_SIM",
        "lveval": "LVEVAL",
    }.items()
})
METRICS.register("longbench_v2.choice", "lc_pipeline.score.longbench_v2:CHOICE")
# ALCE citation recall / precision (options style: asqa|qampari): NLI-judged, computed by citation_scores.
METRICS.register("alce.citation_recall", "lc_pipeline.score.citations:CITATION_RECALL")
METRICS.register("alce.citation_precision", "lc_pipeline.score.citations:CITATION_PRECISION")
METRICS.register("helmet.str_em", "lc_pipeline.score.alce_correctness:STR_EM")  # ALCE ASQA
METRICS.register("helmet.qampari_rec5", "lc_pipeline.score.alce_correctness:QAMPARI_REC5")  # ALCE QAMPARI

# LLM-judge rubrics (score/judge.py).
RUBRICS: Registry = Registry("rubric", {
    name: f"lc_pipeline.score.judge:{attr}"
    for name, attr in {
        "helmet_longqa": "HELMET_LONGQA", "helmet_summ": "HELMET_SUMM", "loong": "LOONG",
        "lb100_qa": "LB100_QA", "lb100_summ": "LB100_SUMM",
    }.items()
})
