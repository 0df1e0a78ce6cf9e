"""HELMET's section of the config (``helmet:``), registered by the package (config.ConfigSection)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import StrictInt, StrictStr, field_validator, model_validator

from lc_pipeline.config import ConfigError, ConfigSection, section_tasks


class HelmetConfig(ConfigSection):
    """HELMET instances built beside the QA suite (``tasks: all`` or a list; spec helmet.md)."""

    TASK_BENCHMARK: ClassVar[str | None] = "helmet"

    tasks: tuple[StrictStr, ...] = ()
    n_per_task: StrictInt = 2  # items (or synthetic queries) per task; the paper samples 100
    shots: StrictInt = 2  # HELMET's 2-shot demonstrations (0 = none); RULER tasks never have any
    n_depths: StrictInt = 6  # evenly spaced gold positions (RAG, JSON KV)
    n_permutations: StrictInt = 3  # shuffled orders (multi-gold RAG, re-rank)

    @field_validator("tasks", mode="before")
    @classmethod
    def _all_tasks(cls, value: Any) -> Any:
        return section_tasks(value, "helmet", "helmet")

    @model_validator(mode="after")
    def _check(self) -> HelmetConfig:
        if self.n_per_task < 1 or self.n_depths < 1 or self.n_permutations < 1 or self.shots < 0:
            raise ConfigError("helmet: n_per_task, n_depths and n_permutations must be >= 1, shots >= 0")
        return self
