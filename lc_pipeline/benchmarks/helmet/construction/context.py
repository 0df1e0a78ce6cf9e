"""What every HELMET builder shares: the build context of one task at one level (its ``TaskSpec``,
the pools, the config) and the row a builder hands back, finished into an INSTANCES row.

The task's ``TaskSpec`` (lc_pipeline/benchmarks/helmet/task_files/helmet.yaml) gives the row its task name,
category, prompt template, ``max_new_tokens`` and the answer prefix its demonstrations use
(spec helmet.md §5); ids mix in the spec's ``instance_salt`` only when it is non-empty, so a
packaged task as shipped keeps the ids it always had.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from lc_pipeline.benchmarks.helmet.construction.pools import Pools
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.construct.assembly import instance_id
from lc_pipeline.construct.rows import instance_row
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import short_id
from lc_pipeline.tasks.spec import TaskSpec
from lc_pipeline.text import fill_template

SUITE = "helmet"  # INSTANCES.suite of rows built here
CONSTRUCTION_VERSION = "helmet-1"


@dataclass
class Row:
    """What a builder measures for one instance; :meth:`BuildContext.finish` makes the INSTANCES row."""

    item_id: str
    source: str
    language: str
    question: str
    answers: list[str]
    answer_keywords: list[str]
    evidence_doc_ids: list[str]
    blocks: list[tuple[str, str]]  # (block id, text) in context order
    separator: str
    gold_blocks: list[int]  # indices of the gold blocks (first = depth)
    depth: float | None  # configured depth; None: the measured position of the first gold block
    variant_key: str  # depth or permutation index: part of the instance id
    n_hard_negatives: int
    n_filler: int
    prompt_fields: dict[str, Any]
    # INSTANCES.record_fields of the row: what its metrics or judge read besides the answers (ALCE's QA pairs and
    # passages, ∞Bench MC's options, Multi-LexSum's key points); {} for most kinds.
    record_fields: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class BuildContext:
    """One level's inputs and settings; :meth:`for_task` binds the task being built."""

    pools: Pools
    cfg: HelmetConfig
    level: str
    target: int
    seed: int
    tolerance: float
    fingerprint: str  # construction version, seed, config and tokenizer: part of every instance id
    spec: TaskSpec | None = None

    def for_task(self, spec: TaskSpec) -> BuildContext:
        """The context of ``spec``: its pools restricted to ``builder.options.source`` when it names one."""
        source = spec.builder.options.get("source")
        if source is None:
            return dataclasses.replace(self, spec=spec)
        if not isinstance(source, str):
            raise ValueError(f"task {spec.qualified_name!r}: field 'builder.options.source': expected a source "
                             f"name, got {source!r}")
        return dataclasses.replace(self, spec=spec, pools=self.pools.of_source(source, spec.qualified_name))

    @property
    def counter(self) -> TokenCounter:
        return self.pools.counter

    @property
    def task(self) -> str:
        """The task's name: the rows' ``task`` and the name its random draws are seeded with."""
        return self._spec.name

    @property
    def options(self) -> dict[str, Any]:
        return self._spec.builder.options

    @property
    def _spec(self) -> TaskSpec:
        if self.spec is None:
            raise RuntimeError("BuildContext: no task bound (use for_task)")
        return self.spec

    def render(self, **fields: Any) -> str:
        """The task's prompt template filled with ``fields``, literally (placeholders checked by ``suite.check_spec``;
        text.fill_template)."""
        return fill_template(self._spec.prompt, fields)

    def answer_line(self, answer: str) -> str:
        """A demonstration's answer, after the task's answer prefix (``Answer: …``)."""
        return f"{self._spec.answer_prefix} {answer}"

    def finish(self, r: Row, prompt: str | None = None, stored_context: str | None = None) -> dict:
        """The INSTANCES row of ``r``: exact token counts, evidence depths, id.

        ``prompt``: the rendered prompt when the builder has it already (else rendered from the
        blocks). ``stored_context``: the context to store when it is not the joined blocks (JSON KV
        keeps the object's braces; depths are still measured in the joined blocks).
        """
        spec = self._spec
        context = r.separator.join(t for _, t in r.blocks)
        if prompt is None:
            prompt = self.render(context=context, **r.prompt_fields)
        starts, pos = [], 0
        for _, t in r.blocks:
            starts.append(pos)
            pos += len(t) + len(r.separator)
        counts = self.counter.count_many([context, prompt] + [context[: starts[i]] for i in r.gold_blocks])
        context_tokens, input_tokens, ev = counts[0], counts[1], counts[2:]
        ev_depths = [c / context_tokens if context_tokens else 0.0 for c in ev]
        depth = r.depth if r.depth is not None else (ev_depths[0] if ev_depths else 0.0)
        if stored_context is not None:
            context, context_tokens = stored_context, self.counter.count(stored_context)
        salt = (spec.instance_salt,) if spec.instance_salt else ()
        return instance_row(
            instance_id=instance_id(r.item_id, self.level, self.target, float(depth), "plain",
                                    short_id(self.fingerprint, spec.name, r.variant_key, *salt, length=16)),
            item_id=r.item_id,
            source=r.source,
            suite=SUITE,
            task=spec.name,
            category=spec.category,
            language=r.language,
            depth=float(depth),
            evidence_depths=ev_depths,
            question=r.question,
            answers=r.answers,
            answer_keywords=r.answer_keywords,
            evidence_doc_ids=r.evidence_doc_ids,
            context_doc_ids=[b for b, _ in r.blocks],
            n_hard_negatives=r.n_hard_negatives,
            n_filler_documents=r.n_filler,
            context=context,
            prompt=prompt,
            tokenizer=self.counter.name,
            target_tokens=self.target,
            input_tokens=input_tokens,
            context_tokens=context_tokens,
            max_new_tokens=spec.max_new_tokens,
            record_fields=json.dumps(r.record_fields, ensure_ascii=False, sort_keys=True) if r.record_fields else "{}",
        )
