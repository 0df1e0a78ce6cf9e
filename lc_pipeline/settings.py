"""Where things live, from the environment (with project-relative defaults).

LCP_CONFIG   benchmark config: packaged name (demo, default) or YAML path   [demo]
LCP_LAKE     Parquet lake directory                                        [./data_lake]
LCP_MODELS   model registry file (models added with `lcp add-model`)        [./models.yaml]
DAGSTER_HOME Dagster instance directory (SQLite storage)                    [./.dagster]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    project_dir: Path
    config: str
    lake_dir: Path
    models_file: Path
    dagster_home: Path

    @classmethod
    def from_env(cls, project_dir: str | Path | None = None) -> Settings:
        root = Path(project_dir or os.environ.get("LCP_PROJECT_DIR") or Path.cwd()).resolve()
        env = os.environ.get

        def path(var: str, default: str) -> Path:
            p = Path(env(var) or default)
            return (p if p.is_absolute() else root / p).resolve()

        return cls(
            project_dir=root,
            config=env("LCP_CONFIG") or "demo",
            lake_dir=path("LCP_LAKE", "data_lake"),
            models_file=path("LCP_MODELS", "models.yaml"),
            dagster_home=path("DAGSTER_HOME", ".dagster"),
        )
