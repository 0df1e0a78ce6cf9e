"""``TaskSpec``: everything about one benchmark task that changes its numbers, as data.

A task is declared once, in a YAML task file (``lc_pipeline/benchmarks/<benchmark>/task_files/*.yaml`` or a
user's own file named by the config's ``task_files``): which builder makes its instances (a
registered name with options), its prompt template, whether an instruct model gets it through its
chat template, the answer prefix its metric parses after, ``max_new_tokens``, stop sequences, the
truncation policy, its metrics and judge rubric (registered names), and the group the benchmark's
headline averages it into. The pipeline never branches on a task or benchmark name: it reads the
spec. Model after lm-evaluation-harness's task YAML and inspect_ai's Task (dataset + solver +
scorer bound in one object).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

TRUNCATION_POLICIES = ("middle", "end_of_context", "drop_documents", "skip")  # construct/truncation.py
PROMPT_FILE_FORMATS = ("longbench", "json", "text")
# The largest answer budget: the instances and generations tables hold it as Int32 (issue 31 D19: 10**12 crashed the
# instances step with a polars error).
MAX_NEW_TOKENS = 2**31 - 1
PLACEHOLDERS = ("context", "question", "options", "demos")  # builders may define more (e.g. RULER's {kind})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BuilderRef(_Strict):
    """The registered builder that makes the task's instances (``tasks.registry.BUILDERS``) and its options."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class MetricRef(_Strict):
    """A registered metric (``tasks.registry.METRICS``) with its options; YAML may give just the name."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class PromptFile(_Strict):
    """A prompt read from a file in another project's format, e.g. LongBench's ``config/dataset2prompt.json``.

    ``format``: ``longbench`` (a JSON object task -> template with ``{context}`` and ``{input}``; ``{input}``
    is our ``{question}``), ``json`` (the same with our placeholders) or ``text`` (the whole file is the
    template). ``key``: the entry to read (default: the task's name). A relative ``path`` is relative to
    the task file that names it.
    """

    path: str
    format: Literal["longbench", "json", "text"] = "text"
    key: str | None = None


class Aggregation(_Strict):
    """Where the task sits in its benchmark's headline: task -> ``group`` (a category) -> overall.

    ``table`` separates tables a paper reports apart (LongBench's English and Chinese tables);
    ``weight`` is the task's weight within its group (1 = plain mean).
    """

    group: str
    table: str = "all"
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)  # .inf made the tables NaN (issue 31 D9)
    # The task's score: its first declared metric (``first_metric``), or the mean of all its metrics
    # (``mean_of_metrics``: HELMET's Cite, helmet.md §6, "the mean of the 6 numbers" = per dataset the mean of
    # correctness, citation recall and citation precision; an instance counts once it has every metric).
    score: Literal["first_metric", "mean_of_metrics"] = "first_metric"


class Headline(_Strict):
    """How a benchmark's headline number is aggregated from its tasks (a task file's ``headline:``).

    ``overall``: ``mean_of_groups`` (task scores -> group means -> their mean; HELMET, LongBench per table),
    ``mean_of_tasks`` (the unweighted mean of the task scores; LV-Eval's level score) or ``mean_of_instances``
    (every scored instance weighs the same; Loong's overall).

    ``source``: where a task that declares a ``rubric`` gets its cells. ``metric`` (default): from its first
    declared metric, the judge being a side table; ``judge``: from ``judge_scores`` (the rubric's score in
    [0, 1] x ``scale``), as Loong reports its 1-100 judge score (spec loong.md §7) and HELMET its NarrativeQA and
    summarization judges (helmet.md §6). A task with a rubric and no metric is judge-scored either way; a task
    without a rubric keeps its metric.

    ``breakdown``: fields of the released records (``instances.record_fields``) whose values each get the
    overall again, computed on the instances of that value (LongBench v2: ``[difficulty, length]`` gives easy,
    hard, short, medium and long beside the overall; spec released_benchmarks.md).

    ``round``: decimals a task's score (x ``scale``) is rounded to before its group and the overall average it,
    as the authors' scorers do (LongBench ``eval.py``, LV-Eval ``evaluation.py``: ``round(100 * mean, 2)`` per
    task and length); None (default): not rounded. Group and overall rows are means of the rounded task scores,
    not rounded themselves; intervals are of the unrounded scores.

    ``across_lengths``: the benchmark's number over all its length partitions. ``mean_of_lengths`` (default):
    the leaderboard's mean of the per-length overalls. ``micro_over_items``: benchmark_scores also has rows of
    length ``[all]`` (each task, group and the overall over every item of every length, aggregated as
    ``overall`` says: Loong's Table 3 and its overall over all items, as its ``step4_cal_metric`` computes
    them), and the leaderboard's number is that overall.

    A group or overall row is null when a task or group it averages has no score; the row names them
    (benchmark_scores ``missing_groups``, score/benchmark_scores.py).
    """

    overall: Literal["mean_of_groups", "mean_of_tasks", "mean_of_instances"] = "mean_of_groups"
    # Scores are in [0, 1]; the paper's tables show them times this (finite and positive: issue 31 D9).
    scale: float = Field(default=100.0, gt=0, allow_inf_nan=False)
    source: Literal["metric", "judge"] = "metric"
    breakdown: tuple[str, ...] = ()
    round: int | None = Field(default=None, ge=0)
    across_lengths: Literal["mean_of_lengths", "micro_over_items"] = "mean_of_lengths"


class Followup(_Strict):
    """A second call, given the first call's reply: chain of thought (spec released_benchmarks.md "LongBench v2":
    a first call of 1,024 new tokens produces the reasoning, a second call of 128 is given it and asked for the
    answer). generate/followup.py runs it.

    ``prompt`` is the second call's user message: ``{reasoning}`` (required) is the first call's reply and
    ``{prompt}`` the first call's prompt (the instance's); no other placeholder is filled, so any other brace is
    literal text. The second call is cut by the task's truncation policy like the first.

    ``fill`` (a benchmark's official protocol: LongBench v2's ``0shot_cot_ans.txt``) fills the prompt as an
    authors' harness fills its template instead: ``(placeholder, value)`` pairs, each placeholder replaced
    (``str.replace``, every occurrence) in the order given by its value: ``reasoning`` (the first call's reply),
    ``prompt`` (the first call's prompt) or ``record.<field>`` (a field of the instance's released record, as its
    benchmark's protocol module reads it: ``lc_pipeline.benchmarks.<benchmark>.protocol.record_of``). One pair
    must give the reasoning; ``{reasoning}`` is then not required. ``strip``: each value is stripped first.
    """

    prompt: str = Field(min_length=1)
    max_new_tokens: int = Field(ge=1, le=MAX_NEW_TOKENS)
    fill: tuple[tuple[str, str], ...] = ()
    strip: bool = False

    @field_validator("fill")
    @classmethod
    def _fill_values(cls, value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        for placeholder, source in value:
            if not placeholder:
                raise ValueError("followup.fill: a placeholder must not be empty")
            if source not in ("reasoning", "prompt") and not (source.startswith("record.") and len(source) > 7):
                raise ValueError(f"followup.fill: value {source!r} of {placeholder!r} is not reasoning, prompt or "
                                 "record.<field>")
        return value

    @model_validator(mode="after")
    def _has_reasoning(self) -> Followup:
        if self.fill:
            if not any(source == "reasoning" for _, source in self.fill):
                raise ValueError("followup.fill must give the reasoning (a pair whose value is reasoning)")
        elif "{reasoning}" not in self.prompt:
            raise ValueError("followup.prompt must contain {reasoning} (the first call's reply)")
        return self

    @model_serializer(mode="wrap")
    def _as_declared(self, handler: Any) -> Any:
        # fill and strip were added later: dumped (and so hashed: TaskSpec.content_hash) only when set, so the
        # hashes and ids of existing followups stay.
        dump = handler(self)
        if isinstance(dump, dict):
            if not self.fill:
                dump.pop("fill", None)
            if not self.strip:
                dump.pop("strip", None)
        return dump


class TaskSpec(_Strict):
    name: str = Field(min_length=1)
    benchmark: str = Field(min_length=1)
    category: str
    language: str = "en"  # "en", "zh", or "any" (the items' own)
    description: str = ""
    builder: BuilderRef
    # The user message; placeholders {context} {question} {options} {demos} (and builder-specific ones).
    # None: the builder's own wording (e.g. synthetic tasks whose prompt is generated per instance).
    prompt: str | None = None
    prompt_file: PromptFile | None = None
    chat_template: bool = True  # instruct models get the prompt through their chat template
    answer_prefix: str | None = None  # the text the answer follows; metrics also score the part after it
    max_new_tokens: int | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS)  # None: the config's max_new_tokens
    stop: tuple[str, ...] = ()
    # A second call given the first call's reply (chain of thought); None: one call. The instance's prompt and
    # max_new_tokens are the first call's; the generations row's output is the second call's reply.
    followup: Followup | None = None
    truncation: Literal["middle", "end_of_context", "drop_documents", "skip"]
    metrics: tuple[MetricRef, ...] = ()
    rubric: str | None = None  # registered judge rubric; None: not judged
    aggregation: Aggregation
    # Where it was declared (packaged file or the user's) and where its prompt was read from
    # (a prompt_file, resolved when the catalog loads); neither is part of the task's content.
    declared_in: str = Field(default="", exclude=True)
    prompt_source: str = Field(default="", exclude=True)
    # Mixed into the ids of the task's instances: "" for a packaged task as shipped (its wording is versioned
    # with the code, so ids stay stable), its content hash once a user file adds or changes it, so a changed
    # prompt or option yields new rows, never a silent reuse of old ones. Set by the catalog.
    instance_salt: str = Field(default="", exclude=True)

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("expected a list of metric names")
        return [{"name": v} if isinstance(v, str) else v for v in (value or [])]

    @model_validator(mode="after")
    def _one_prompt(self) -> TaskSpec:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("give either prompt or prompt_file, not both")
        return self

    @property
    def qualified_name(self) -> str:
        return f"{self.benchmark}/{self.name}"

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def content_hash(self) -> str:
        """Short hash of everything that can change the task's instances or scores (not where it was declared)."""
        dump = self.model_dump(mode="json")
        if dump["followup"] is None:  # a field added later: hashed only when set, so existing hashes stay
            del dump["followup"]
        if dump["aggregation"]["score"] == "first_metric":  # likewise
            del dump["aggregation"]["score"]
        blob = json.dumps(dump, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
