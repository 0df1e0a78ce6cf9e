"""Tasks as data: ``TaskSpec`` (spec.py), the task files and their catalog (catalog.py), and the
registries of builders, metrics and rubrics by name (registry.py). See docs/tasks.md."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lc_pipeline.tasks.catalog import TaskCatalog, TaskFileError, catalog_for, load_catalog
    from lc_pipeline.tasks.spec import TaskSpec

# Imported on first use (PEP 562): importing lc_pipeline.tasks.registry (generation backends by name, which every
# `lcp` command lists) must not import pydantic and the task-file reader (issue 29).
_EXPORTS = {"TaskCatalog": "catalog", "TaskFileError": "catalog", "catalog_for": "catalog",
            "load_catalog": "catalog", "TaskSpec": "spec"}

__all__ = ["TaskCatalog", "TaskFileError", "TaskSpec", "catalog_for", "load_catalog"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
