"""LV-Eval's two inputs to the QA suite's variants: confusing facts (CFI, spec ``lveval.md`` §5)
and replacement rules (KPR, spec ``lveval.md`` §6), made once for the items the QA suite uses
(``benchmarks/qa/items.py``: the same items at every level), with their metadata and checks.

The algorithms live in ``construct/confusing_facts.py`` and ``construct/replacement.py``; this
module picks what they run on (which items, which evidence, which corpus a new term must be new
to) and reports on the result. ``instances`` then derives the ``cfi``, ``kpr`` and ``cfi_kpr``
rows (``benchmarks/lveval/variants.py``). Pure, no Dagster: the assets (``assets/lveval.py``) wrap
the metadata's lists and dicts and turn check results into asset checks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

import polars as pl

from lc_pipeline.benchmarks.lveval.config import KNOWLEDGE_BASE_FACTS
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.construct.confusing_facts import (
    CandidateFact,
    knowledge_base_facts,
    llm_facts,
)
from lc_pipeline.construct.replacement import (
    ReplacementRule,
    TermIndex,
    check_rules,
    load_rules,
    propose_rules,
    rules_by_item,
)

CHECK_FACTS = "facts_never_contain_a_gold_answer"
CHECK_RULES = "rules_are_consistent"
FACTS_CHECK_DESCRIPTION = "no accepted fact contains a gold answer or scores when copied"
RULES_CHECK_DESCRIPTION = ("rules are consistent (no two olds to one new, no chains), belong to the suite's items, "
                           "and no new term already occurs in the corpus")


def evidence_texts(items: pl.DataFrame, documents: pl.DataFrame) -> dict[str, list[str]]:
    """item_id -> the text of each of its evidence documents (an unknown document is a ValueError)."""
    text = dict(documents.select("doc_id", "text").iter_rows())
    out = {}
    for r in items.select("item_id", "evidence_doc_ids").iter_rows(named=True):
        unknown = [d for d in r["evidence_doc_ids"] if d not in text]
        if unknown:
            raise ValueError(f"item {r['item_id']!r}: field 'evidence_doc_ids' names unknown documents {unknown}")
        out[r["item_id"]] = [text[d] for d in r["evidence_doc_ids"]]
    return out


def _reason_kind(reason: str) -> str:
    # "contains the gold answer 'Lytoford'" -> "contains the gold answer": countable reasons.
    return re.split(r"\s*[('\"{]|\s+\d", reason, maxsplit=1)[0].rstrip(" :") or reason


# --------------------------------------------------------------------------- facts


def make_facts(items: pl.DataFrame, documents: pl.DataFrame, chosen: pl.DataFrame, config: BenchmarkConfig,
               generator=None, log=None) -> list[CandidateFact]:
    """Candidate facts (accepted and rejected) for the chosen items, from the configured generator:
    LV-Eval's knowledge-base siblings, or ``generator`` (the ``lveval.fact_generator`` model's
    Generator) asked for descriptions close to the evidence (spec §5.2, §5.4)."""
    lv = config.lveval
    chosen_ids = set(chosen["item_id"])
    if lv.fact_generator == KNOWLEDGE_BASE_FACTS:
        english = items.filter(pl.col("language") == "en")
        # Siblings come from every item of the corpus, facts are kept for the chosen ones.
        out = [c for c in knowledge_base_facts(documents, english, n_facts=lv.n_facts, seed=config.seed)
               if c.item_id in chosen_ids]
        out += [CandidateFact(r["item_id"], "", "", KNOWLEDGE_BASE_FACTS, 1, False,
                              f"the knowledge-base generator writes English facts; the item is {r['language']!r}")
                for r in chosen.filter(pl.col("language") != "en").sort("item_id").iter_rows(named=True)]
        return out
    if log is not None:
        log.info(f"confusing facts for {chosen.height} items from {lv.fact_generator} "
                 f"({lv.n_facts} per item, up to {lv.fact_attempts} rounds)")
    return llm_facts(chosen.iter_rows(named=True), evidence_texts(chosen, documents), generator,
                     n_facts=lv.n_facts, max_attempts=lv.fact_attempts)


def facts_metadata(out: pl.DataFrame, chosen: pl.DataFrame) -> dict:
    """Counts of candidates, verdicts and rejection reasons, and the items left without facts."""
    accepted = out.filter(pl.col("accepted"))
    per_item = dict(accepted.group_by("item_id").len().iter_rows())
    short = [i for i in sorted(chosen["item_id"]) if not per_item.get(i)]
    reasons = Counter(_reason_kind(r) for r in out.filter(~pl.col("accepted"))["reason"])
    return {
        "items": chosen.height,
        "candidates": out.height,
        "accepted": accepted.height,
        "rejected": out.height - accepted.height,
        "items_without_facts": len(short),
        "items_without_facts_examples": short[:10],
        "rejection_reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "generators": sorted(set(out["generator"])),
    }


# --------------------------------------------------------------------------- rules


def corpus_texts(items: pl.DataFrame, documents: pl.DataFrame, facts: pl.DataFrame) -> dict[str, list[str]]:
    """Per language, everything a context can contain: documents, titles, questions, answers,
    accepted facts. A substitute must be new to all of it."""
    out: dict[str, list[str]] = {}
    for language in sorted(set(items["language"]) | set(documents["language"])):
        docs = documents.filter(pl.col("language") == language)
        its = items.filter(pl.col("language") == language)
        fact_items = set(its["item_id"])
        out[language] = [*docs["text"], *docs["title"], *its["question"],
                         *(a for answers in its["answers"] for a in answers),
                         *facts.filter(pl.col("accepted") & pl.col("item_id").is_in(list(fact_items)))["text"]]
    return out


def make_rules(items, documents, chosen: pl.DataFrame, facts: pl.DataFrame, config: BenchmarkConfig
               ) -> tuple[list[ReplacementRule], dict]:
    """The rules file's rules for the chosen items, then proposals for the items it does not cover
    (spec §6.4). Returns the rules and counts for the metadata."""
    lv = config.lveval
    chosen_ids = set(chosen["item_id"])
    known_ids = set(items["item_id"])
    user = load_rules(lv.rules_file) if lv.rules_file else []
    unknown = sorted({r.item_id for r in user} - known_ids)
    if unknown:  # a typo in an item id would otherwise do nothing, silently
        raise ValueError(f"{lv.rules_file}: field 'item_id': {unknown[:5]} are not items of the configured sources")
    by_item: dict[str, list[ReplacementRule]] = {}
    for r in user:
        if r.item_id in chosen_ids:
            by_item.setdefault(r.item_id, []).append(r)
    meta = {"rules_from_file": sum(len(v) for v in by_item.values()),
            "file_rules_for_unselected_items": sum(r.item_id not in chosen_ids for r in user)}
    proposed = 0
    if lv.auto_rules:
        texts = corpus_texts(items, documents, facts)
        evidence = evidence_texts(chosen, documents)
        indexes: dict[str, TermIndex] = {}
        for item in chosen.sort("item_id").iter_rows(named=True):  # fixed order: substitutes are handed out in turn
            if item["item_id"] in by_item:
                continue
            language = item["language"]
            if language not in indexes:
                indexes[language] = TermIndex(texts.get(language, []), language)
                for r in user:  # a file's substitutes are taken too
                    indexes[language].add(r.new)
            rules = propose_rules(item, evidence[item["item_id"]], indexes[language],
                                  seed=derive_seed(config.seed, "kpr", item["item_id"]), max_rules=lv.max_rules)
            if rules:
                by_item[item["item_id"]] = rules
                proposed += len(rules)
    meta["rules_proposed"] = proposed
    return [r for item_id in sorted(by_item) for r in by_item[item_id]], meta


def rules_metadata(out: pl.DataFrame, chosen: pl.DataFrame, meta: dict) -> dict:
    """Counts of rules (from the file, proposed) and the items left without rules."""
    per_item = dict(out.group_by("item_id").len().iter_rows())
    without = [i for i in sorted(chosen["item_id"]) if not per_item.get(i)]
    return {
        "items": chosen.height,
        "rules": out.height,
        **meta,
        "items_without_rules": len(without),
        "items_without_rules_examples": without[:10],
    }


def rule_problems(rules: pl.DataFrame, chosen: pl.DataFrame, texts: Mapping[str, Sequence[str]]) -> list[str]:
    """For the rules check: an inconsistent rule set, a rule for an item the suite does not use,
    or a new term that already occurs in the corpus (replacing A by an existing B merges two things)."""
    problems = []
    parsed = [r for rs in rules_by_item(rules).values() for r in rs]
    try:
        check_rules(parsed)
    except ValueError as exc:
        problems.append(str(exc))
    language = dict(chosen.select("item_id", "language").iter_rows())
    indexes: dict[str, TermIndex] = {}
    for r in parsed:
        if r.item_id not in language:
            problems.append(f"rule {r.old!r} -> {r.new!r}: item {r.item_id!r} is not one of the suite's items")
            continue
        lang = language[r.item_id]
        if lang not in indexes:
            indexes[lang] = TermIndex(texts.get(lang, []), lang)
        if indexes[lang].contains(r.new):
            problems.append(f"item {r.item_id!r}, rule {r.old!r} -> {r.new!r}: the new term already occurs in the corpus")
    return problems
