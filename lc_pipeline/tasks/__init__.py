"""Tasks as data: ``TaskSpec`` (spec.py), the task files and their catalog (catalog.py), and the
registries of builders, metrics and rubrics by name (registry.py). See docs/tasks.md."""

from lc_pipeline.tasks.catalog import TaskCatalog, TaskFileError, catalog_for, load_catalog
from lc_pipeline.tasks.spec import TaskSpec

__all__ = ["TaskCatalog", "TaskFileError", "TaskSpec", "catalog_for", "load_catalog"]
