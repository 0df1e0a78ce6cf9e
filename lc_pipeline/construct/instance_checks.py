"""The quality checks of a level of ``instances``, run batch by batch as the level is built.

Six checks, each a list of problems (instance ids, or sentences naming the instance) that must
be empty (the asset makes each a blocking Dagster asset check of the same name, see
``assets/instances.py``):

* ``within_length_tolerance``: every row within the config's tolerance of its target length
  (:func:`length_violations`; word levels in words / characters, a suite's own length rule);
* ``contains_evidence``: the context holds each evidence document verbatim
  (:func:`evidence_violations`);
* ``answer_keywords_in_evidence``: every answer keyword occurs in the evidence
  (:func:`keyword_violations`);
* ``no_replaced_term_left``: after KPR no replaced term remains (spec ``lveval.md`` §6.4);
* ``facts_at_recorded_offsets``: CFI rows hold their facts where they say (spec ``lveval.md`` §5.4);
* and the checks a benchmark adds for its own rows (HELMET RAG's gold passage at each depth).

A benchmark whose builder's rows follow other rules says so once, by its rows' suite
(:class:`SuiteRules`, registered in ``tasks.registry.SUITE_RULES``): a length rule of its own,
tasks of a fixed size, rows that hold no whole documents, checks of its own.
Variant rows are checked with their variant undone (``construct/variant_rows.py``).
Pure code, no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl

from lc_pipeline.construct.replacement import rules_by_item
from lc_pipeline.construct.variant_rows import (
    evidence_problems,
    insertion_problems,
    without_insertions,
)
from lc_pipeline.construct.variants import kpr_problems
from lc_pipeline.construct.word_levels import count_units
from lc_pipeline.tasks.registry import SUITE_RULES

CHECK_LENGTH = "within_length_tolerance"
CHECK_EVIDENCE = "contains_evidence"
CHECK_KEYWORDS = "answer_keywords_in_evidence"
CHECK_KPR = "no_replaced_term_left"
CHECK_INSERTIONS = "facts_at_recorded_offsets"

# Name -> what it asserts, in the order the checks are declared and reported; the suites' own checks follow
# (:func:`check_descriptions`).
GENERIC_CHECKS = {
    CHECK_LENGTH: "every instance is within the config's tolerance of its target length",
    CHECK_EVIDENCE: "every instance's context contains its evidence documents verbatim",
    CHECK_KEYWORDS: "every answer keyword occurs in the instance's evidence documents",
    CHECK_KPR: "after KPR no replaced term remains in question, answers, keywords, context or prompt",
    CHECK_INSERTIONS: "every CFI row holds its confusing facts at the recorded offsets",
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


class SuiteCheck:
    """A check a suite adds for its own rows, over a whole level: fed batch by batch (:meth:`add`), then judged."""

    def add(self, out: pl.DataFrame) -> None:
        raise NotImplementedError

    def result(self) -> CheckResult:
        raise NotImplementedError


class SuiteRules:
    """What a builder tells the instance checks about its rows (their ``INSTANCES.suite``), registered by the suite's
    name in ``tasks.registry.SUITE_RULES``. The defaults are the generic rules: a row within the config's tolerance
    of its target, whole evidence documents in its context, no checks of its own."""

    holds_whole_documents = True  # False: its contexts hold passages, cut documents or pairs (no evidence checks)
    # its own checks: name -> what it asserts (:meth:`level_checks` makes them)
    checks: ClassVar[Mapping[str, str]] = {}

    def too_far(self) -> pl.Expr | None:
        """Its rows that are off their length, in place of "relative error over the tolerance" (None: that rule)."""
        return None

    def fixed_size_tasks(self, config) -> set[str]:
        """Its tasks whose rows have a size of their own, not a fill to the level (no length check)."""
        return set()

    def level_checks(self, config) -> list[SuiteCheck]:
        """One :class:`SuiteCheck` per name of :attr:`checks`, in that order, for one level of ``config``."""
        return []


def suite_rules() -> dict[str, SuiteRules]:
    """suite -> its registered :class:`SuiteRules`, by suite name."""
    return {suite: SUITE_RULES.get(suite) for suite in SUITE_RULES.names()}


def check_descriptions() -> dict[str, str]:
    """Every check of a level (name -> what it asserts), in the order they are declared and reported: the generic
    ones, then each suite's own (by suite name)."""
    return {**GENERIC_CHECKS, **{name: description for rules in suite_rules().values()
                                 for name, description in rules.checks.items()}}


def length_violations(instances: pl.DataFrame, tolerance: float) -> pl.DataFrame:
    """Rows off their target length.

    Rows must be within ``tolerance`` of the target: prompt tokens, or for word levels
    (``length_unit`` words / characters) the context's words without inserted
    facts (``context_units_without_facts`` when the frame has it). A suite with a length rule of
    its own (:meth:`SuiteRules.too_far`) is judged by it instead.
    """
    words = pl.col("length_unit").is_in(["words", "characters"]) if "length_unit" in instances.columns else pl.lit(False)
    units = (pl.col("context_units_without_facts") if "context_units_without_facts" in instances.columns
             else pl.col("context_units") if "context_units" in instances.columns else pl.lit(None))
    err = pl.when(words).then((units - pl.col("target_units")).abs() / pl.col("target_units")).otherwise(
        (pl.col("input_tokens") - pl.col("target_tokens")).abs() / pl.col("target_tokens"))
    bad = pl.col("rel_error") > tolerance
    for suite, rules in suite_rules().items():
        own = rules.too_far()
        if own is not None:
            bad = pl.when(pl.col("suite") == suite).then(own).otherwise(bad)
    return instances.with_columns(rel_error=err).filter(bad)


def _variant_rows(instances: pl.DataFrame) -> pl.DataFrame:
    return instances.filter(pl.col("variant") != "plain") if "variant" in instances.columns else instances.clear()


def evidence_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances whose context lacks the (whitespace-trimmed) text of one of their evidence documents.

    Variant rows are checked with their variant undone (facts taken out, the item's
    ``rules`` applied to the evidence; see construct/variant_rows.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = _variant_rows(instances)
    return [
        iid
        for iid, ev, ctx in instances.filter(~pl.col("instance_id").is_in(variants["instance_id"].implode()))
        .select("instance_id", "evidence_doc_ids", "context").iter_rows()
        if any(text[d].strip() not in ctx for d in ev)
    ] + (evidence_problems(variants, documents, rules)[0] if variants.height else [])


def keyword_violations(
    instances: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None = None
) -> list[str]:
    """Instances with an answer keyword that their evidence does not contain.

    The evidence is the evidence documents' text, or the context when the answer lives in
    inserted needles (100-LongBench KV retrieval: no evidence documents). KPR rows:
    keywords and evidence rewritten by the item's ``rules`` (construct/variant_rows.py).
    """
    text = dict(documents.select("doc_id", "text").iter_rows())
    variants = _variant_rows(instances)
    bad = evidence_problems(variants, documents, rules)[1] if variants.height else []
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
        self.suite_rules = suite_rules()
        # Tasks whose rows have a size of their own, by suite (not a fill to the target: their length is the
        # builder's; over the target is the builder's own error).
        self.fixed_size_tasks = {suite: sorted(rules.fixed_size_tasks(config))
                                 for suite, rules in self.suite_rules.items()}
        self.no_whole_documents = sorted(s for s, rules in self.suite_rules.items() if not rules.holds_whole_documents)
        # The suites' own checks, by name (each spans the level's batches).
        self.suite_checks: dict[str, SuiteCheck] = {
            name: check for rules in self.suite_rules.values()
            for name, check in zip(rules.checks, rules.level_checks(config), strict=True)}

    def add(self, out: pl.DataFrame, fact_tokens: pl.Series) -> None:
        """Check one batch of INSTANCES rows (length units filled); ``fact_tokens``: per row, the
        tokens of its inserted facts (``variant_rows.inserted_tokens``)."""
        # Word-level CFI rows are measured without their facts (only they: contexts are large to copy out).
        units = out["context_units"].to_list()
        for i, ctx, ins, lang in out.with_row_index("i").filter(
            (pl.col("length_unit") != "tokens") & (pl.col("insertions").list.len() > 0)
        ).select("i", "context", "insertions", "language").iter_rows():
            units[i] = count_units(without_insertions(ctx, ins, lang),
                                   lang if lang in ("en", "zh") else "en")
        without_facts = pl.Series(units, dtype=pl.Int64)
        sized = pl.Series([True] * out.height, dtype=pl.Boolean)
        for suite, tasks in self.fixed_size_tasks.items():
            sized = sized & ~((out["suite"] == suite) & out["task"].is_in(tasks))
        self.too_far += length_violations(
            out.filter(sized).with_columns(input_tokens=pl.col("input_tokens") - fact_tokens.filter(sized),
                                           context_units_without_facts=without_facts.filter(sized)),
            self.config.length_tolerance)["instance_id"].to_list()
        whole_docs = out.filter(~pl.col("suite").is_in(self.no_whole_documents))  # passages, cut documents, pairs
        for variant_rows in (False, True):
            rows = whole_docs.filter((pl.col("variant") != "plain") == variant_rows)
            self.missing[variant_rows] += evidence_violations(rows, self.documents, self.rules)
            self.bad_keywords[variant_rows] += keyword_violations(rows, self.documents, self.rules)
        self.kpr += kpr_problems(out.filter(pl.col("variant").str.contains("kpr")).iter_rows(named=True),
                                 self.rules_by_item)
        self.spans += insertion_problems(out, self.facts, self.rules)
        for check in self.suite_checks.values():
            check.add(out)

    def results(self) -> list[CheckResult]:
        return [
            CheckResult(CHECK_LENGTH, self.too_far, {"tolerance": self.config.length_tolerance}),
            CheckResult(CHECK_EVIDENCE, self.missing[False] + self.missing[True]),
            CheckResult(CHECK_KEYWORDS, self.bad_keywords[True] + self.bad_keywords[False]),
            CheckResult(CHECK_KPR, self.kpr),
            CheckResult(CHECK_INSERTIONS, self.spans),
            *(check.result() for check in self.suite_checks.values()),
        ]
