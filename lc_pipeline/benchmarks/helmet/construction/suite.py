"""``build_helmet``: the HELMET instances of one length level for the given ``TaskSpec``s.

Each spec's ``builder.options.kind`` picks the construction (``KINDS``); the spec gives the row's
task name, category, prompt template, ``max_new_tokens`` and the answer prefix of its
demonstrations. Every spec is checked before anything is built (``construct.spec_checks``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from lc_pipeline.benchmarks.helmet.construction.cite import build_cite
from lc_pipeline.benchmarks.helmet.construction.context import (
    CONSTRUCTION_VERSION,
    BuildContext,
)
from lc_pipeline.benchmarks.helmet.construction.fitting import COUNTS_SPECIAL_TOKENS
from lc_pipeline.benchmarks.helmet.construction.icl import build_icl
from lc_pipeline.benchmarks.helmet.construction.long_document import (
    ITEM_KINDS,
    OPTIONAL,
    build_long_document,
)
from lc_pipeline.benchmarks.helmet.construction.pools import Pools
from lc_pipeline.benchmarks.helmet.construction.rag import build_rag, build_rag_multi
from lc_pipeline.benchmarks.helmet.construction.rerank import build_rerank
from lc_pipeline.benchmarks.helmet.construction.synthetic import (
    KEY_DRAWS,
    VALUE_DRAWS,
    build_json_kv,
    build_multikey,
    build_multivalue,
)
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.config import level_tokens
from lc_pipeline.construct.rows import instances_frame
from lc_pipeline.construct.spec_checks import (
    check_builder,
    check_max_new_tokens,
    check_prompt,
    spec_error,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import short_id
from lc_pipeline.tasks.spec import TaskSpec

BUILDER = "helmet"  # TaskSpec.builder.name of the tasks built here
DOCUMENT_FIELDS = frozenset({"context", "question", "demos"})
RULER_FIELDS = frozenset({"context", "question", "kind"})  # {kind}: what the needles' values are
ICL_FIELDS = frozenset({"context", "question"})  # {context}: the demonstrations


@dataclass(frozen=True)
class Kind:
    build: Callable[[BuildContext], list[dict]]
    options: Mapping[str, Collection[str]]  # required options -> allowed values
    placeholders: frozenset[str]  # what its prompt template may name
    demos: bool  # its demonstrations end with the task's answer prefix
    # options it may omit -> allowed values (None: any value; the kind checks it). Every kind also takes
    # ``source``: only the items (and long documents) of that configured source (HELMET's per-dataset tasks).
    optional: Mapping[str, Collection[str] | None] = dataclasses.field(default_factory=dict)


COMMON_OPTIONS: dict[str, None] = {"source": None}  # every kind: restrict to one configured source (str)

KINDS: dict[str, Kind] = {
    "rag": Kind(build_rag, {}, DOCUMENT_FIELDS, True, {"per_level": None}),
    "rag_multi": Kind(build_rag_multi, {}, DOCUMENT_FIELDS, True, {"per_level": None}),
    "rerank": Kind(build_rerank, {}, DOCUMENT_FIELDS, True, {"per_level": None}),
    "json_kv": Kind(build_json_kv, {}, DOCUMENT_FIELDS, True),
    "multikey": Kind(build_multikey, {"key": tuple(KEY_DRAWS), "value": tuple(VALUE_DRAWS)}, RULER_FIELDS, False),
    "multivalue": Kind(build_multivalue, {}, RULER_FIELDS, False),
    "cite": Kind(build_cite, {}, DOCUMENT_FIELDS, True, {"per_level": None}),  # ALCE ASQA / QAMPARI
    "long_document": Kind(build_long_document, {"items": ITEM_KINDS}, DOCUMENT_FIELDS | {"options"}, True, OPTIONAL),
    "icl": Kind(build_icl, {}, ICL_FIELDS, True, {"per_level": None}),  # per_level: level -> shots
}


def check_spec(spec: TaskSpec, config: HelmetConfig) -> Kind:
    """The construction of ``spec``; a ValueError naming the task and the field when it cannot be built."""
    kind = KINDS[check_builder(spec, BUILDER, {k: v.options for k, v in KINDS.items()},
                               {k: {**COMMON_OPTIONS, **v.optional} for k, v in KINDS.items()})]
    check_prompt(spec, kind.placeholders)
    check_max_new_tokens(spec)
    if kind.demos and config.shots and spec.answer_prefix is None:
        raise spec_error(spec, "answer_prefix", f"missing; the task's {config.shots} demonstrations end with it")
    return kind


def build_helmet(
    documents: pl.DataFrame,
    items: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: HelmetConfig,
    seed: int,
    counter: TokenCounter,
    length_tolerance: float = 0.05,
    tasks: Sequence[TaskSpec],
) -> pl.DataFrame:
    """All HELMET instances of one length level for ``tasks`` (INSTANCES rows, suite "helmet"), in their order.

    ``config`` gives the sizes (``n_per_task``, ``shots``, ``n_depths``, ``n_permutations``) and is
    part of every instance id. A task that the sources cannot feed raises ValueError naming the
    task and what it lacks; a prompt that cannot be filled to within ``length_tolerance`` of the
    target raises too (never a silently short row).
    """
    names = [s.name for s in tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"build_helmet: tasks {twice} are given twice")
    kinds = [check_spec(spec, config) for spec in tasks]
    counter = counter.counting_special_tokens(COUNTS_SPECIAL_TOKENS)  # as HELMET counts (fitting.py)
    pools = Pools.build(items, documents, passages, hard_negatives, counter)
    ctx = BuildContext(pools, config, level, level_tokens(level), seed, length_tolerance,
                       short_id(CONSTRUCTION_VERSION, seed, config, counter.name, length=16))
    rows = [r for spec, kind in zip(tasks, kinds) for r in kind.build(ctx.for_task(spec))]
    over = [f"{r['task']} {r['instance_id']} ({r['input_tokens']} tokens)" for r in rows if r["input_tokens"] > ctx.target]
    if over:  # a construction bug, not bad input: say so loudly
        raise AssertionError(f"helmet instances over the {ctx.target}-token target: {over[:5]}")
    return instances_frame(rows)
