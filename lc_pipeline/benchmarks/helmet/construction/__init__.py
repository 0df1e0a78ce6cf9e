"""HELMET instance construction at controllable length (pure logic, no Dagster).

Spec: ``shared/specs/helmet.md`` (§2 categories, §5 prompts, §9 what must be right). Each task is a
``TaskSpec`` (``lc_pipeline/benchmarks/helmet/task_files/helmet.yaml``): its name, category, prompt, answer
prefix and ``max_new_tokens`` are the spec's; its ``builder.options.kind`` picks the construction.
The length lever is the number of passages / pairs / needles (RAG, re-rank, synthetic recall) or
the cut of one long document (LongQA, summarization); every prompt is filled to just under the
level's target (cl100k_base, exact count on every row).

================================================  ================  =========================================
``builder.options``                               packaged tasks    module
================================================  ================  =========================================
``kind: rag``                                     rag               ``rag``: one gold passage at ``n_depths``
``kind: rag_multi``                               rag_multi         ``rag``: two golds, shuffled orders
``kind: rerank``                                  rerank            ``rerank``: graded candidates, NDCG@10
``kind: json_kv``                                 json_kv           ``synthetic``: JSON object of UUID pairs
``kind: multikey, key: word|uuid,                 ruler_mk_needle,  ``synthetic``: RULER MK, all needles
value: number|uuid``                              ruler_mk_uuid
``kind: multivalue``                              ruler_mv          ``synthetic``: RULER MV, 4 values
``kind: long_document, items: qa|summarization``  longqa, summ      ``long_document``: cut from the end
``kind: long_document, items: qa|choice|``        narrativeqa,      ``long_document`` with ``buffer``: cut to
``summarization, buffer, demos, placeholder``     infbench_*,       level - buffer - answer, placeholder demos
                                                  multi_lexsum
``kind: cite``                                    asqa, qampari,    ``cite``: top-k passages (``per_level``),
                                                  cite              IDs 1..k, two cited demonstrations
``kind: icl``                                     trec_coarse, ...  ``icl``: seeded label -> integer mapping,
                                                  clinc150, icl     balanced rounds of ``per_level`` shots
================================================  ================  =========================================

Every kind takes ``source`` (only that configured source's items: HELMET's per-dataset tasks) and the
per-dataset rag / rag_multi / rerank / cite / icl tasks take ``per_level`` (HELMET's passages or
demonstrations per level, spec §2 table) instead of filling to the level's budget.

Other modules: ``pools`` (items, documents, passages, hard negatives; gold passages), ``fitting``
(depths, the exact-count search, cutting), ``context`` (one task's build context and its rows),
``suite`` (``build_helmet``; each spec checked first by ``construct.spec_checks``), ``checks``
(``gold_depth_violations``; ``HelmetRows``, what the instance checks know of HELMET's rows).

A task's random draws are seeded by its name, and its name is part of its instance ids: a copy of a
packaged task under another name (its own prompt, say) draws its own sample and gets its own ids.

Deviations, each for a reason we can name:

* Retrieval: our passages and our dense retriever (``construct.retrieval``), not KILT with
  gte-large (the paper's retrieval code was never released, spec §10.1). Gold passages stand
  in for KILT provenance (``pools``).
* Re-rank grades of the any-corpus ``rerank`` come from our items; ``msmarco`` reads TREC DL qrels (``rerank``).
* Lengths are prompt lengths in cl100k tokens (the pipeline's convention; generation comes on
  top), not Llama-2 tokens including the generation budget; ``k`` follows from the budget.
* LongQA / summarization take items whose document is longer than the level's budget (HELMET
  keeps only > 128k-token books); the same items are used at every level where they qualify.
* Prompts are our own wording of HELMET's instructions; formats (``Document (Title: …)``,
  ``[ID: …]``, ``Key: … / Corresponding value:``, RULER's needle sentence) and the per-task
  generation caps (spec §5.1) are kept.
"""

from collections.abc import Iterator

import polars as pl

from lc_pipeline.benchmarks.helmet.construction.checks import gold_depth_violations
from lc_pipeline.benchmarks.helmet.construction.context import (
    CONSTRUCTION_VERSION,
    SUITE,
    BuildContext,
    Row,
)
from lc_pipeline.benchmarks.helmet.construction.fitting import (
    cut_to_tokens,
    depth_position,
    evenly_spaced_depths,
)
from lc_pipeline.benchmarks.helmet.construction.long_document import (
    DEMO_PLACEHOLDER,
    OMITTED,
)
from lc_pipeline.benchmarks.helmet.construction.pools import (
    Passage,
    Pools,
    format_passage,
    format_ranked_passage,
    gold_passages,
)
from lc_pipeline.benchmarks.helmet.construction.rerank import rerank_qrels
from lc_pipeline.benchmarks.helmet.construction.suite import (
    KINDS,
    build_helmet,
    check_spec,
)
from lc_pipeline.benchmarks.helmet.construction.synthetic import NEEDLE
from lc_pipeline.construct.build_request import BuildError, BuildRequest

__all__ = [
    "CONSTRUCTION_VERSION",
    "DEMO_PLACEHOLDER",
    "KINDS",
    "NEEDLE",
    "OMITTED",
    "SUITE",
    "BuildContext",
    "Passage",
    "Pools",
    "Row",
    "build",
    "build_helmet",
    "check_spec",
    "configured_tasks",
    "cut_to_tokens",
    "depth_position",
    "evenly_spaced_depths",
    "format_passage",
    "format_ranked_passage",
    "gold_depth_violations",
    "gold_passages",
    "rerank_qrels",
]


def build(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """Builder ``helmet``: HELMET's categories, passages, demonstrations or pairs counted to the level."""
    i = request.inputs
    try:
        yield build_helmet(i.documents, i.items, i.passages, i.hard_negatives, level=i.level, config=i.config.helmet,
                           seed=i.config.seed, counter=i.counter, length_tolerance=i.config.length_tolerance,
                           tasks=request.tasks)
    except ValueError as exc:
        raise BuildError(f"HELMET instances at {i.level}: {exc}") from exc


def configured_tasks(config, catalog) -> list:
    """The tasks of config section ``helmet.tasks``."""
    return [catalog.get(f"helmet/{t}", "config helmet.tasks") for t in config.helmet.tasks]
