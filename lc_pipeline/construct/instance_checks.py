"""The quality checks of a level of ``instances``, run batch by batch as the level is built.

Six checks, each a list of problems (instance ids, or sentences naming the instance) that must
be empty (the asset makes each a blocking Dagster asset check of the same name, see
``assets/instances.py``):

* ``within_length_tolerance``: every row within the config's tolerance of its target length
  (:func:`length_violations`; LV-Eval's word levels in words / characters, spec ``lveval.md``
  §1.2; 100-LongBench's greedy fill, spec ``100longbench.md`` §11);
* ``contains_evidence``: the context holds each evidence document verbatim
  (:func:`evidence_violations`);
* ``answer_keywords_in_evidence``: every answer keyword occurs in the evidence
  (:func:`keyword_violations`);
* ``no_replaced_term_left``: after KPR no replaced term remains (spec ``lveval.md`` §6.4);
* ``facts_at_recorded_offsets``: CFI rows hold their facts where they say (spec ``lveval.md`` §5.4);
* ``helmet_rag_gold_at_depths``: HELMET RAG's gold passage at each depth (spec ``helmet.md`` §2.2).

LV-Eval variant rows are checked with their variant undone (``construct/lveval_variants.py``).
Pure code, no Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.construct import lveval_variants
from lc_pipeline.construct.helmet import SUITE as HELMET_SUITE
from lc_pipeline.construct.helmet import gold_depth_violations
from lc_pipeline.construct.longbench100 import LABEL_TOKENS
from lc_pipeline.construct.longbench100 import SUITE as LB100_SUITE
from lc_pipeline.construct.replacement import rules_by_item
from lc_pipeline.construct.variants import kpr_problems
from lc_pipeline.construct.word_levels import count_units
from lc_pipeline.tasks.catalog import catalog_for

CHECK_LENGTH = "within_length_tolerance"
CHECK_EVIDENCE = "contains_evidence"
CHECK_KEYWORDS = "answer_keywords_in_evidence"
CHECK_KPR = "no_replaced_term_left"
CHECK_INSERTIONS = "facts_at_recorded_offsets"
CHECK_RAG_DEPTHS = "helmet_rag_gold_at_depths"

# Name -> what it asserts, in the order the checks are declared and reported.
CHECKS = {
    CHECK_LENGTH: "every instance is within the config's tolerance of its target length",
    CHECK_EVIDENCE: "every instance's context contains its evidence documents verbatim",
    CHECK_KEYWORDS: "every answer keyword occurs in the instance's evidence documents",
    CHECK_KPR: "after KPR no replaced term remains in question, answers, keywords, context or prompt",
    CHECK_INSERTIONS: "every CFI row holds its confusing facts at the recorded offsets",
    CHECK_RAG_DEPTHS: "HELMET RAG: the gold passage sits at each of the evenly spaced depths",
}


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: it passes when ``problems`` is empty; ``extra`` is more metadata."""

    name: str
    problems: list[str]
    extra: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems


def length_violations(instances: pl.DataFrame, tolerance: float) -> pl.DataFrame:
    """Rows off their target length.

    QA-suite rows must be within ``tolerance`` of the target: prompt tokens, or for LV-Eval's
    word levels (``length_unit`` words / characters) the context's words without inserted
    facts (``context_units_without_facts`` when the frame has it). 100-LongBench
    rows follow the paper's greedy fill, which budgets raw document tokens strictly under
    the target and leaves labels unbudgeted: their context must stay under
    ``target + blocks * LABEL_TOKENS`` (spec 100longbench.md §11).
    """
    words = pl.col("length_unit").is_in(["words", "characters"]) if "length_unit" in instances.columns else pl.lit(False)
    units = (pl.col("context_units_without_facts") if "context_units_without_facts" in instances.columns
             else pl.col("context_units") if "context_units" in instances.columns else pl.lit(None))
    err = pl.when(words).then((units - pl.col("target_units")).abs() / pl.col("target_units")).otherwise(
        (pl.col("input_tokens") - pl.col("target_tokens")).abs() / pl.col("target_tokens"))
    lb100_limit = pl.col("target_tokens") + pl.col("context_doc_ids").list.len() * LABEL_TOKENS
    bad = pl.when(pl.col("suite") == LB100_SUITE).then(pl.col("context_tokens") >= lb100_limit).otherwise(
        pl.col("rel_error") > tolerance
    )
    return instances.with_columns(rel_error=err).filter(bad)


def _variant_rows(instances: pl.DataFrame) -> pl.DataFrame:
    return instances.filter(pl.col("variant") != "plain") if "variant" in instances.columns else instances.clear()


def evidence_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances whose context lacks the (whitespace-trimmed) text of one of their evidence documents.

    LV-Eval variant rows are checked with their variant undone (facts taken out, the item's
    ``rules`` applied to the evidence; see construct/lveval_variants.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = _variant_rows(instances)
    return [
        iid
        for iid, ev, ctx in instances.filter(~pl.col("instance_id").is_in(variants["instance_id"].implode()))
        .select("instance_id", "evidence_doc_ids", "context").iter_rows()
        if any(text[d].strip() not in ctx for d in ev)
    ] + (lveval_variants.evidence_problems(variants, documents, rules)[0] if variants.height else [])


def keyword_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances with an answer keyword that their evidence does not contain.

    The evidence is the evidence documents' text, or the context when the answer lives in
    inserted needles (100-LongBench KV retrieval: no evidence documents). LV-Eval KPR rows:
    keywords and evidence rewritten by the item's ``rules`` (construct/lveval_variants.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = _variant_rows(instances)
    bad = lveval_variants.evidence_problems(variants, documents, rules)[1] if variants.height else []
    plain = instances.filter(~pl.col("instance_id").is_in(variants["instance_id"].implode()))
    for iid, ev, kws, ctx in plain.select("instance_id", "evidence_doc_ids", "answer_keywords", "context").iter_rows():
        evidence = (" ".join(text[d] for d in ev) if ev else ctx).casefold()
        if any(k.casefold() not in evidence for k in kws):
            bad.append(iid)
    return bad


class InstanceChecks:
    """The checks of one level, fed batch by batch (:meth:`add`); violations accumulate across
    batches and :meth:`results` gives one :class:`CheckResult` per check, in :data:`CHECKS` order.

    ``config`` is the BenchmarkConfig, ``documents`` SOURCE_DOCUMENTS of the configured sources,
    ``facts`` and ``rules`` the ``confusing_facts`` and ``replacement_rules`` tables.
    """

    def __init__(self, config, documents: pl.DataFrame, facts: pl.DataFrame, rules: pl.DataFrame) -> None:
        self.config, self.documents, self.facts, self.rules = config, documents, facts, rules
        self.rules_by_item = rules_by_item(rules)
        self.too_far: list[str] = []
        # Plain and variant rows apart: the checks list them in the same order whatever the batches.
        self.missing: dict[bool, list[str]] = {False: [], True: []}  # by "is a variant row"
        self.bad_keywords: dict[bool, list[str]] = {False: [], True: []}
        self.kpr: list[str] = []
        self.spans: list[str] = []
        self.rag: list[pl.DataFrame] = []  # HELMET RAG rows' ids and block ids: the depth check spans rows
        # Every task HELMET's builder makes with kind rag (a user's copy too), by its task files.
        self.rag_tasks = sorted({t.name for t in catalog_for(config)
                                 if t.builder.name == HELMET_SUITE and t.builder.options.get("kind") == "rag"})
        # HELMET's per-dataset tasks take the spec's count of passages / shots per level (builder.options.per_level)
        # or cut their document to the level less a buffer and the answer (builder.options.buffer: ∞Bench Sum at 8k
        # keeps 8192 - 1400 tokens), not a fill to the target: their length is the table's (over the target is the
        # builder's own error).
        self.fixed_size_tasks = sorted({t.name for t in catalog_for(config) if t.builder.name == HELMET_SUITE
                                        and {"per_level", "buffer"} & set(t.builder.options)})

    def add(self, out: pl.DataFrame, fact_tokens: pl.Series) -> None:
        """Check one batch of INSTANCES rows (length units filled); ``fact_tokens``: per row, the
        tokens of its inserted facts (``lveval_variants.inserted_tokens``)."""
        # Word-level CFI rows are measured without their facts (only they: contexts are large to copy out).
        units = out["context_units"].to_list()
        for i, ctx, ins, lang in out.with_row_index("i").filter(
            (pl.col("length_unit") != "tokens") & (pl.col("insertions").list.len() > 0)
        ).select("i", "context", "insertions", "language").iter_rows():
            units[i] = count_units(lveval_variants.without_insertions(ctx, ins, lang),
                                   lang if lang in ("en", "zh") else "en")
        without_facts = pl.Series(units, dtype=pl.Int64)
        sized = ~((out["suite"] == HELMET_SUITE) & out["task"].is_in(self.fixed_size_tasks))
        self.too_far += length_violations(
            out.filter(sized).with_columns(input_tokens=pl.col("input_tokens") - fact_tokens.filter(sized),
                                           context_units_without_facts=without_facts.filter(sized)),
            self.config.length_tolerance)["instance_id"].to_list()
        whole_docs = out.filter(pl.col("suite") != HELMET_SUITE)  # HELMET holds passages, cut documents, pairs
        for variant_rows in (False, True):
            rows = whole_docs.filter((pl.col("variant") != "plain") == variant_rows)
            self.missing[variant_rows] += evidence_violations(rows, self.documents, self.rules)
            self.bad_keywords[variant_rows] += keyword_violations(rows, self.documents, self.rules)
        self.kpr += kpr_problems(out.filter(pl.col("variant").str.contains("kpr")).iter_rows(named=True),
                                 self.rules_by_item)
        self.spans += lveval_variants.insertion_problems(out, self.facts, self.rules)
        self.rag.append(out.filter((pl.col("suite") == HELMET_SUITE) & pl.col("task").is_in(self.rag_tasks)).select(
            "instance_id", "item_id", "suite", "task", "depth", "target_tokens", "evidence_doc_ids", "context_doc_ids"))

    def results(self) -> list[CheckResult]:
        rag = pl.concat(self.rag)
        return [
            CheckResult(CHECK_LENGTH, self.too_far, {"tolerance": self.config.length_tolerance}),
            CheckResult(CHECK_EVIDENCE, self.missing[False] + self.missing[True]),
            CheckResult(CHECK_KEYWORDS, self.bad_keywords[True] + self.bad_keywords[False]),
            CheckResult(CHECK_KPR, self.kpr),
            CheckResult(CHECK_INSERTIONS, self.spans),
            CheckResult(CHECK_RAG_DEPTHS, gold_depth_violations(rag, self.config.helmet.n_depths, self.rag_tasks),
                        {"rag_instances": rag.height}),
        ]
