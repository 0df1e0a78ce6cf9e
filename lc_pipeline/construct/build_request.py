"""What an instance builder is called with and may raise: ``BuildRequest`` (a level's ``LevelInputs`` and the tasks
it builds) and ``BuildError``. The builders' protocol, below every builder (released.py, the
benchmark packages' builders) and the dispatcher that runs them (builders.py), so a builder raises ``BuildError``
without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.tasks.catalog import TaskCatalog
from lc_pipeline.tasks.spec import TaskSpec


class BuildError(ValueError):
    """A level that cannot be built from these inputs; the message names the level and the cause."""


@dataclass
class LevelInputs:
    """What every builder of one length level may read."""

    items: pl.DataFrame
    documents: pl.DataFrame
    passages: pl.DataFrame
    hard_negatives: pl.DataFrame
    facts: pl.DataFrame
    rules: pl.DataFrame
    level: str
    config: BenchmarkConfig
    counter: TokenCounter
    catalog: TaskCatalog
    meta: dict = field(default_factory=dict)  # builders add counts for the asset's metadata


@dataclass(frozen=True)
class BuildRequest:
    inputs: LevelInputs
    tasks: tuple[TaskSpec, ...]


Builder = Callable[[BuildRequest], Iterator[pl.DataFrame]]
