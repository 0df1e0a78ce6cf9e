"""What the generic checks and metadata need to know about a variant row (CFI / KPR, construct/variants.py), and
how to undo it (spec ``lveval.md`` §3, §5.4, §6.4):

* a CFI row's context is the plain context plus the inserted facts, so removing the recorded
  spans gives the plain context back, evidence documents verbatim;
* a KPR row's evidence is the evidence documents with the item's rules applied, and its answer
  keywords are rewritten the same way;
* a CFI row is longer than its level by the facts' own tokens: LV-Eval inserts the facts after
  mixing and treats levels as nominal (spec §1.3), so the length check measures a CFI row
  without them (:func:`inserted_tokens`), and the extra tokens are reported in metadata.

Used by the instance checks (``construct/instance_checks.py``) and the level's metadata. Pure functions, no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from lc_pipeline.construct.replacement import apply_rules, rules_by_item


def _lead(language: str) -> str:
    return " " if language == "en" else ""  # insert_facts puts one space before an English fact


def without_insertions(context: str, insertions: Sequence[Mapping], language: str) -> str:
    """The context with its inserted facts (and the space put before each) taken out again."""
    lead = _lead(language)
    for ins in sorted(insertions, key=lambda i: i["char_offset"], reverse=True):
        start = ins["char_offset"] - len(lead)
        context = context[:start] + context[ins["char_offset"] + ins["char_length"]:]
    return context


def inserted_tokens(frame: pl.DataFrame, counter) -> pl.Series:
    """Per row, the tokens of its inserted facts (0 without CFI)."""
    spans = [[ctx[i["char_offset"]: i["char_offset"] + i["char_length"]] for i in ins]
             for ctx, ins in frame.select("context", "insertions").iter_rows()]
    flat = counter.count_many([s for row in spans for s in row]) if any(spans) else []
    out, k = [], 0
    for row in spans:
        out.append(sum(flat[k: k + len(row)]))
        k += len(row)
    return pl.Series("inserted_tokens", out, dtype=pl.Int64)


def variant_metadata(out: pl.DataFrame, fact_tokens: pl.Series) -> dict:
    """Rows per variant and what the confusing facts add to CFI rows."""
    counts = dict(out.group_by("variant").len().iter_rows())
    meta = {f"instances_variant_{v}": counts[v] for v in ("plain", "cfi", "kpr", "cfi_kpr") if v in counts}
    if counts.keys() - {"plain"}:
        cfi = fact_tokens.filter(out["insertions"].list.len() > 0)
        meta["cfi_fact_tokens_max"] = int(cfi.max()) if cfi.len() else 0
        meta["cfi_fact_tokens_mean"] = float(cfi.mean()) if cfi.len() else 0.0
    return meta


def evidence_problems(
    frame: pl.DataFrame, documents: pl.DataFrame, rules: pl.DataFrame | None
) -> tuple[list[str], list[str]]:
    """(instances missing an evidence document, instances with an answer keyword not in their
    evidence) among variant rows, with the variant undone as the module docstring says."""
    text = dict(documents.select("doc_id", "text").iter_rows())
    by_rule = rules_by_item(rules) if rules is not None else {}
    missing, bad_keywords = [], []
    for row in frame.filter(pl.col("variant") != "plain").iter_rows(named=True):
        context = without_insertions(row["context"], row["insertions"], row["language"])
        evidence = [text[d] for d in row["evidence_doc_ids"]]
        if row["replacement_rule_ids"]:
            evidence = apply_rules({"evidence": evidence}, by_rule.get(row["item_id"], []))[0]["evidence"]
        if any(e.strip() not in context for e in evidence):
            missing.append(row["instance_id"])
        # No evidence documents (factrecall's needle is a sentence): the answer lives in the context.
        joined = (" ".join(evidence) if evidence else context).casefold()
        if any(k.casefold() not in joined for k in row["answer_keywords"] or []):
            bad_keywords.append(row["instance_id"])
    return missing, bad_keywords


def insertion_problems(frame: pl.DataFrame, facts: pl.DataFrame, rules: pl.DataFrame) -> list[str]:
    """CFI rows whose recorded spans do not hold their facts (rewritten by the rules in cfi_kpr rows)."""
    fact_text = dict(facts.select("fact_id", "text").iter_rows())
    by_rule = rules_by_item(rules)
    problems = []
    for row in frame.filter(pl.col("insertions").list.len() > 0).iter_rows(named=True):
        for ins in row["insertions"]:
            want = fact_text.get(ins["fact_id"])
            if want is None:
                problems.append(f"instance {row['instance_id']}: fact {ins['fact_id']} is not in confusing_facts")
                continue
            if row["replacement_rule_ids"]:
                want = apply_rules({"f": want}, by_rule.get(row["item_id"], []))[0]["f"]
            got = row["context"][ins["char_offset"]: ins["char_offset"] + ins["char_length"]]
            if got.rstrip(".。") != want.rstrip(".。"):  # insertion ends a fact like a sentence
                problems.append(f"instance {row['instance_id']}: fact {ins['fact_id']} is not at offset "
                                f"{ins['char_offset']} (found {got[:60]!r})")
    return problems
