"""100-LongBench's sections of the config: ``longbench100:`` (its tasks built beside the QA suite) and
``prior_knowledge:`` (its QA filter), registered by the package (config.ConfigSection)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import StrictBool, StrictInt, StrictStr, field_validator, model_validator

from lc_pipeline.config import ConfigError, ConfigSection, Number, section_tasks


class LongBench100Config(ConfigSection):
    """100-LongBench instances built beside the QA suite (``tasks: all`` or a list)."""

    TASK_BENCHMARK: ClassVar[str | None] = "longbench100"

    tasks: tuple[StrictStr, ...] = ()
    n_per_task: StrictInt = 2

    @field_validator("tasks", mode="before")
    @classmethod
    def _all_tasks(cls, value: Any) -> Any:
        return section_tasks(value, "longbench100", "longbench100")

    @model_validator(mode="after")
    def _check(self) -> LongBench100Config:
        # Task names are checked against the task files by BenchmarkConfig (a user file may add some).
        if self.n_per_task < 1:
            raise ConfigError("longbench100.n_per_task must be >= 1")
        return self


class PriorKnowledgeConfig(ConfigSection):
    """100-LongBench's QA filter: ask each model the question without context and leave out,
    for that model, the items it answers with score >= ``threshold`` (paper code: 0.5)."""

    tasks: tuple[StrictStr, ...] = ("single_doc_qa", "multi_doc_qa")
    threshold: Number = 0.5
    metric: StrictStr = "f1"  # scorer of the no-context answer (first line, max over golds)
    max_new_tokens: StrictInt = 256  # the paper code's QA generation length
    enabled: StrictBool = True
    # "metric": the no-context answer scored by `metric`; "judge": by the configured LLM judge with the
    # task's rubric (100-LongBench's headline setting). Hashed only when not "metric" (ids stay as they were).
    scorer: StrictStr = "metric"

    @model_validator(mode="after")
    def _check(self) -> PriorKnowledgeConfig:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"prior_knowledge.threshold {self.threshold} is outside [0, 1]")
        if self.max_new_tokens < 1:
            raise ConfigError("prior_knowledge.max_new_tokens must be >= 1")
        if self.scorer not in ("metric", "judge"):
            raise ConfigError(f"prior_knowledge.scorer {self.scorer!r}: expected 'metric' or 'judge'")
        return self

    def fingerprint_data(self) -> Any:
        data = self.model_dump()
        if data["scorer"] == "metric":  # added later: hashed only when set otherwise
            del data["scorer"]
        return data
