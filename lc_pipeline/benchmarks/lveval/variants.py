"""LV-Eval's variant rows in a level of ``instances``: adding them to the QA suite's plain rows (spec ``lveval.md``
§3, §5.4, §6.4).

The paper's order is mixing, then confusing-fact insertion (CFI), then keyword and phrase
replacement (KPR). Here mixing is the QA suite's assembly (one ``plain`` row per item, level
and depth); :func:`add_variants` derives the ``cfi``, ``kpr`` and ``cfi_kpr`` rows from each
plain row with ``construct/variants.py``, from the items' accepted ``confusing_facts`` and
``replacement_rules``. What the instance checks need to know about a variant row, and how it is undone for them:
``construct/variant_rows.py``.

Pure functions, no Dagster.
"""
from __future__ import annotations

from collections import Counter

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.confusing_facts import accepted_facts
from lc_pipeline.construct.replacement import rules_by_item
from lc_pipeline.construct.rows import with_empty_variant_columns
from lc_pipeline.construct.variants import available_variants, derive_variants


def add_variants(qa: pl.DataFrame, facts: pl.DataFrame, rules: pl.DataFrame, config: BenchmarkConfig, counter
                 ) -> tuple[pl.DataFrame, dict]:
    """The QA suite's plain rows, each followed by the variants the config asks for and its item
    can have (CFI needs accepted facts, KPR rules); what could not be built is counted.

    Raises ``ValueError`` (naming the instance and field) for a variant that cannot be built."""
    wanted = [v for v in config.lveval.variants if v != "plain"]
    qa = with_empty_variant_columns(qa)
    if not wanted or qa.is_empty():
        return qa, {}
    by_fact, by_rule = accepted_facts(facts), rules_by_item(rules)
    rows: list[dict] = []
    unbuildable: Counter = Counter()
    for row in qa.iter_rows(named=True):
        rows.append(row)
        item_facts, item_rules = by_fact.get(row["item_id"], []), by_rule.get(row["item_id"], [])
        possible = [v for v in available_variants(len(item_facts), len(item_rules)) if v in wanted]
        unbuildable.update(v for v in wanted if v not in possible)
        if possible:
            rows += derive_variants(row, item_facts, item_rules, seed=config.seed, counter=counter, variants=possible)
    out = schemas.conform(pl.DataFrame(rows, schema=schemas.INSTANCES), "instances")
    return out, {f"variants_not_buildable_{v}": n for v, n in sorted(unbuildable.items())}
