"""The ``minilongbench:`` section of a benchmark config, typed (every key optional).

::

    minilongbench:
      scores: path            # imported matrix: model, task, category, global_sample, score (parquet/csv);
                              # absent -> train on our own metric_scores tables (every model in the lake)
      embeddings: path        # imported representations: global_sample, pc0, pc1, ...
      texts: path             # or texts to embed: global_sample, text (embedded with the embedder resource)
      estimate_scores: path   # new models' scores: model, global_sample, score (a partition's model is
                              # matched case-insensitively, as partition keys are lower-case slugs)
      train_models: [a, b]    # train on these models only (default: all in the matrix)
      metrics: [lb100, f1]    # own metric_scores: per instance, the first of these metrics it has
      representation: text    # own metric_scores: "text" (embed question + context) or "none"
      ratio: 0.95             # share of samples removed (K = int((1 - ratio) * n)), in [0, 1)
      irt: fit                # item parameters: "fit" (our 2PL fit on `scores`) or "released" (the authors'
                              # data/irt_model/best_parameters.json, read through $LCP_OFFICIAL or fetched at the
                              # pinned commit; needs a LongBench-indexed `scores` and released.subset)
      dims: 10
      seed: 42                # default: the config's seed
      epochs: 2000
      baseline_draws: 50      # random stratified subsets scored on the training models (metadata)
      subset_candidates: 8    # K-Means runs; keep the one that best recovers the training models (1 = paper)
      mode: predict           # the estimate minilongbench_estimates reports first (default: DEFAULT_MODE);
                              # every mode's rows are written whatever this says
      validation_splits: 2    # leave-models-out validation of every mode against its own random median
                              # (validation.py): fold splits (0 = skip), each fits the IRT model per fold
      validation_folds: 2     # folds per split (2: train on half the models, estimate the other half)
      validation_seeds: 2     # K-Means seeds per fold
      validation_draws: 20    # random stratified subsets per subset

Paths stay as written (the config's fingerprint hashes them so); ``$LCP_DATA`` is the released
benchmarks' data folder (sources/loader.py, as in source options); relative ones are resolved
against the config file's folder when used (:meth:`MiniLongBenchOptions.path`). Spec:
``shared/specs/minilongbench.md`` (§4.3 ratio and K, §4.1 dims, §7 the random baseline, §9.12 held-out
validation).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from lc_pipeline.settings import expand_data_dir

__all__ = ["DEFAULT_METRICS", "PATH_KEYS", "MiniLongBenchOptions"]

DEFAULT_METRICS = ("lb100", "f1")
PATH_KEYS = ("scores", "embeddings", "texts", "estimate_scores")


# Values are kept as written (no coercion: a YAML ``0`` stays ``0``, ``"10"`` is refused), so that
# ``model_dump(exclude_unset=True)`` gives back the mapping the config's fingerprint always hashed.
def _ratio(value: Any) -> float:
    """A number in [0, 1) (never a bool or a string), kept as written."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    if not 0 <= value < 1:
        raise PydanticCustomError("ratio_range", "the share of samples removed must be in [0, 1)")
    return value


Ratio = Annotated[float, PlainValidator(_ratio, json_schema_input_type=float)]


class MiniLongBenchOptions(BaseModel):
    """Options of the MiniLongBench assets; unknown keys are refused.

    A config loader keeps the section as given and hashes ``model_dump(exclude_unset=True)`` into
    the fingerprint: the keys written in the file, with their values as written.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    TASK_BENCHMARK: ClassVar[str | None] = None  # config.ConfigSection's: its own tasks are none

    scores: StrictStr | None = None
    embeddings: StrictStr | None = None
    texts: StrictStr | None = None
    estimate_scores: StrictStr | None = None
    train_models: tuple[StrictStr, ...] | None = None  # None or empty: every model of the matrix
    metrics: tuple[StrictStr, ...] = Field(DEFAULT_METRICS, min_length=1)
    representation: Literal["text", "none"] = "text"
    ratio: Ratio = 0.95
    irt: Literal["fit", "released"] = "fit"
    dims: StrictInt = Field(10, ge=1)
    seed: StrictInt | None = None  # None: the config's seed
    epochs: StrictInt = Field(2000, ge=1)
    baseline_draws: StrictInt = Field(50, ge=0)
    subset_candidates: StrictInt = Field(8, ge=1)
    mode: Literal["predict", "direct", "weighted", "blend"] | None = None  # None: model.DEFAULT_MODE
    validation_splits: StrictInt = Field(2, ge=0)
    validation_folds: StrictInt = Field(2, ge=2)
    validation_seeds: StrictInt = Field(2, ge=1)
    validation_draws: StrictInt = Field(20, ge=1)

    def fingerprint_data(self) -> Any:
        """The keys written in the config, with their values as written (what the old mapping gave)."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def parse(cls, section: MiniLongBenchOptions | Mapping | None, where: str = "minilongbench",
              ) -> MiniLongBenchOptions:
        """The options from a config section (a mapping, ``None`` or already typed); a bad or
        unknown key raises ``ValueError`` naming ``where`` (e.g. ``"config 'x': minilongbench"``),
        the key and, for unknown keys, the known ones."""
        if isinstance(section, cls):
            return section
        if section is None:
            section = {}
        try:
            return cls.model_validate(dict(section) if isinstance(section, Mapping) else section)
        except ValidationError as exc:
            problems, unknown = [], False
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"]) or "(section)"
                if err["type"] == "extra_forbidden":
                    problems.append(f"unknown key {key!r}")
                    unknown = True
                else:
                    problems.append(f"{key}: {err['msg']} (got {err.get('input')!r})")
            known = f"; known keys: {sorted(cls.model_fields)}" if unknown else ""
            raise ValueError(f"{where}: {'; '.join(problems)}{known}") from None

    def path(self, key: str, config_file: str | Path | None) -> Path:
        """The file named by option ``key``, ``$LCP_DATA`` and ``~`` expanded, a relative path taken from the folder
        of ``config_file`` (when that is a file); ``FileNotFoundError`` when it does not exist."""
        if key not in PATH_KEYS:
            raise KeyError(f"minilongbench.{key} is not a path option ({PATH_KEYS})")
        value = getattr(self, key)
        if value is None:
            raise KeyError(f"minilongbench.{key} is not set")
        p = Path(expand_data_dir(value)).expanduser()
        if not p.is_absolute() and config_file is not None:
            cfg = Path(config_file)
            if cfg.is_file():
                p = cfg.resolve().parent / p
        if not p.exists():
            raise FileNotFoundError(f"minilongbench: {value!r} not found (looked at {p})")
        return p
