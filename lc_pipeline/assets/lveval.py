"""LV-Eval's variants in the pipeline: confusing_facts, replacement_rules, the CFI / KPR rows of
instances, and lveval_ablation (spec lveval.md §5, §6, §9).

The paper's order is mixing, then confusing-fact insertion (CFI), then keyword and phrase
replacement (KPR). Here mixing is the QA suite's assembly (one ``plain`` row per item, level
and depth); ``confusing_facts`` and ``replacement_rules`` are made once, for the items that
suite selects (the same items at every level), and ``instances`` derives the ``cfi``, ``kpr``
and ``cfi_kpr`` rows from each plain row with :func:`add_variants`. The algorithms live in
``construct/confusing_facts.py``, ``construct/replacement.py`` and ``construct/variants.py``;
this module only wires them to Dagster and holds the checks' bookkeeping.

What the instance checks need to know about a variant row (:func:`evidence_problems`):

* a CFI row's context is the plain context plus the inserted facts, so removing the recorded
  spans gives the plain context back, evidence documents verbatim;
* a KPR row's evidence is the evidence documents with the item's rules applied, and its answer
  keywords are rewritten the same way;
* a CFI row is longer than its level by the facts' own tokens: LV-Eval inserts the facts after
  mixing and treats levels as nominal (spec §1.3), so the length check measures a CFI row
  without them (:func:`inserted_tokens`), and the extra tokens are reported in metadata.
"""

import re
from collections import Counter
from collections.abc import Mapping, Sequence

import dagster as dg
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.assets.retrieval import ALL_SOURCES, configured_sources
from lc_pipeline.config import KNOWLEDGE_BASE_FACTS, BenchmarkConfig, level_tokens
from lc_pipeline.construct.assembly import derive_seed, fitting_items, select_items
from lc_pipeline.construct.lveval_levels import factrecall_needles, word_level_items
from lc_pipeline.construct.confusing_facts import (
    CandidateFact,
    fact_problems,
    facts_frame,
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
    rules_frame,
)
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import BenchmarkResource, ModelsResource, TokenizerResource
from lc_pipeline.score.keyword_recall import ablation_table

CHECK_FACTS = "facts_never_contain_a_gold_answer"
CHECK_RULES = "rules_are_consistent"
METRIC = "lveval"  # METRIC_SCORES.metric of the keyword-recall scores (score/metrics.py)


# --------------------------------------------------------------------------- shared bookkeeping


def selected_qa_items(items: pl.DataFrame, documents: pl.DataFrame, config: BenchmarkConfig, counter) -> pl.DataFrame:
    """The items the QA suite builds instances for, chosen exactly as ``instances`` chooses them
    (evidence fits the smallest level, then a seeded choice): the same items at every level."""
    if not config.items_per_length or items.is_empty():
        return items.clear()
    if config.length_unit == "words":
        try:
            chosen, _ = word_level_items(items, documents, config)
        except ValueError:  # too few fit: instances fails and says so
            chosen = items.clear()
    else:
        smallest = min(level_tokens(lv) for lv in config.lengths)
        eligible, _ = fitting_items(items, documents, counter, smallest)
        # Too few eligible items: instances fails and says so; facts for what there is cost nothing extra.
        chosen = select_items(eligible, min(config.items_per_length, eligible.height), config.seed)
    if config.lveval.factrecall_positions:  # LV-Eval applies CFI and KPR to factrecall too
        try:
            needles = [item["item_id"] for item, _ in factrecall_needles(items, documents, config)]
        except ValueError:
            needles = []
        chosen = pl.concat([chosen, items.filter(pl.col("item_id").is_in(needles)
                                                 & ~pl.col("item_id").is_in(chosen["item_id"].implode()))])
    return chosen


def facts_fingerprint(stage: str, config: BenchmarkConfig, models: ModelsResource) -> str:
    """The stage fingerprint of confusing_facts / replacement_rules: an LLM fact generator's own
    settings count too (rules are proposed against the facts' words)."""
    generator = config.lveval.fact_generator
    model = "" if not config.lveval.wants_cfi or generator == KNOWLEDGE_BASE_FACTS else models.spec(generator).fingerprint()
    return stage_fingerprint(stage, config, model or None)


def _source_frames(config, source_items, source_documents):
    items = configured_sources(source_items, config, "source_items").select(schemas.SOURCE_ITEMS.names())
    documents = configured_sources(source_documents, config, "source_documents").select(
        schemas.SOURCE_DOCUMENTS.names()
    )
    return items, documents


def _evidence_texts(items: pl.DataFrame, documents: pl.DataFrame) -> dict[str, list[str]]:
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


def make_facts(items, documents, chosen: pl.DataFrame, config: BenchmarkConfig, models: ModelsResource,
               log=None) -> list[CandidateFact]:
    """Candidate facts (accepted and rejected) for the chosen items, from the configured generator."""
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
    generator = models.generator(lv.fact_generator)  # unknown slug: the registry names it
    if log is not None:
        log.info(f"confusing facts for {chosen.height} items from {lv.fact_generator} "
                 f"({lv.n_facts} per item, up to {lv.fact_attempts} rounds)")
    return llm_facts(chosen.iter_rows(named=True), _evidence_texts(chosen, documents), generator,
                     n_facts=lv.n_facts, max_attempts=lv.fact_attempts)


def facts_metadata(out: pl.DataFrame, chosen: pl.DataFrame) -> dict:
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
        "items_without_facts_examples": dg.MetadataValue.json(short[:10]),
        "rejection_reasons": dg.MetadataValue.json(dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))),
        "generators": dg.MetadataValue.json(sorted(set(out["generator"]))),
        "preview": preview(out.select("item_id", "accepted", "subject", "text", "reason"), n=10),
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
    """The rules file's rules for the chosen items, then proposals for the items it does not cover."""
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
        evidence = _evidence_texts(chosen, documents)
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


# --------------------------------------------------------------------------- instances


# --------------------------------------------------------------------------- assets


def build(parts: Partitions) -> list:
    @dg.asset(
        ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
        group_name="lveval",
        kinds={"parquet"},
        description=(
            "LV-Eval CFI: per QA-suite item, facts that read like its evidence but are about another subject "
            "(knowledge-base siblings or an LLM), each candidate with its verdict and rejection reason"
        ),
        check_specs=[dg.AssetCheckSpec(CHECK_FACTS, asset="confusing_facts", blocking=True,
                                       description="no accepted fact contains a gold answer or scores when copied")],
    )
    def confusing_facts(
        context: dg.AssetExecutionContext,
        source_items: pl.DataFrame,
        source_documents: pl.DataFrame,
        benchmark: BenchmarkResource,
        tokenizer: TokenizerResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        items, documents = _source_frames(config, source_items, source_documents)
        chosen = items.clear()
        out = schemas.empty("confusing_facts")
        if config.lveval.wants_cfi:
            chosen = selected_qa_items(items, documents, config, tokenizer.counter())
            try:
                out = facts_frame(make_facts(items, documents, chosen, config, models, context.log))
            except ValueError as exc:
                raise dg.Failure(f"confusing_facts: {exc}", allow_retries=False) from exc
        yield dg.Output(out, metadata={
            FINGERPRINT_KEY: facts_fingerprint("confusing_facts", config, models),
            "enabled": config.lveval.wants_cfi,
            "generator": config.lveval.fact_generator,
            **facts_metadata(out, chosen),
        })
        problems = fact_problems(out, chosen)
        yield dg.AssetCheckResult(check_name=CHECK_FACTS, passed=not problems,
                                  metadata={"violations": len(problems), "examples": dg.MetadataValue.json(problems[:5])})

    @dg.asset(
        ins={"source_items": ALL_SOURCES, "source_documents": ALL_SOURCES},
        group_name="lveval",
        kinds={"parquet"},
        description=(
            "LV-Eval KPR: per QA-suite item, old term -> invented new term (a rules file and/or proposals for the "
            "names in answer, question and evidence); applied to question, answers, keywords, context and facts"
        ),
        check_specs=[dg.AssetCheckSpec(CHECK_RULES, asset="replacement_rules", blocking=True,
                                       description="rules are consistent (no two olds to one new, no chains), "
                                       "belong to the suite's items, and no new term already occurs in the corpus")],
    )
    def replacement_rules(
        context: dg.AssetExecutionContext,
        source_items: pl.DataFrame,
        source_documents: pl.DataFrame,
        confusing_facts: pl.DataFrame,
        benchmark: BenchmarkResource,
        tokenizer: TokenizerResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        items, documents = _source_frames(config, source_items, source_documents)
        chosen = items.clear()
        out, meta = schemas.empty("replacement_rules"), {}
        if config.lveval.wants_kpr:
            chosen = selected_qa_items(items, documents, config, tokenizer.counter())
            try:
                rules, meta = make_rules(items, documents, chosen, confusing_facts, config)
            except ValueError as exc:
                raise dg.Failure(f"replacement_rules: {exc}", allow_retries=False) from exc
            out = rules_frame(rules)
        per_item = dict(out.group_by("item_id").len().iter_rows())
        without = [i for i in sorted(chosen["item_id"]) if not per_item.get(i)]
        yield dg.Output(out, metadata={
            FINGERPRINT_KEY: facts_fingerprint("replacement_rules", config, models),
            "enabled": config.lveval.wants_kpr,
            "items": chosen.height,
            "rules": out.height,
            **meta,
            "items_without_rules": len(without),
            "items_without_rules_examples": dg.MetadataValue.json(without[:10]),
            "preview": preview(out.select("item_id", "old", "new", "origin"), n=10),
        })
        problems = (rule_problems(out, chosen, corpus_texts(items, documents, confusing_facts))
                    if out.height else [])
        yield dg.AssetCheckResult(check_name=CHECK_RULES, passed=not problems,
                                  metadata={"violations": len(problems), "examples": dg.MetadataValue.json(problems[:5])})

    @dg.asset(
        partitions_def=parts.model,
        ins={
            "metric_scores": dg.AssetIn(
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=MODEL_DIM),
                metadata={"allow_missing_partitions": True},
            ),
            "instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping(),
                                    metadata={"allow_missing_partitions": True}),
        },
        group_name="scoring",
        kinds={"parquet"},
        description=(
            "LV-Eval's ablation (its Tables 8-9) per model and level: keyword-recall scores on plain vs CFI vs KPR "
            "vs CFI+KPR instances of the same items, per task and as the level score (task = 'all')"
        ),
    )
    def lveval_ablation(
        context: dg.AssetExecutionContext,
        metric_scores: pl.DataFrame,
        instances: pl.DataFrame,
        benchmark: BenchmarkResource,
        models: ModelsResource,
    ):
        config = benchmark.load()
        slug = context.partition_key
        out = ablation_frame(metric_scores, instances, config.lveval.metric_variant)
        level = out.filter(pl.col("task") == "all")
        return dg.Output(out, metadata={
            FINGERPRINT_KEY: stage_fingerprint("lveval_ablation", config, models.spec(slug).fingerprint()),
            "metric_variant": config.lveval.metric_variant,
            "rows": out.height,
            **{f"score_{lv}_{v}": float(s) for lv, v, s in level.select("length_level", "variant", "score").iter_rows()},
            "table": preview(level.select("length_level", "variant", "score", "n_instances"), n=40),
        })

    return [confusing_facts, replacement_rules, lveval_ablation]


def ablation_frame(metric_scores: pl.DataFrame, instances: pl.DataFrame, metric_variant: str) -> pl.DataFrame:
    """LVEVAL_ABLATION rows from one model's ``lveval`` scores joined with their instances' variants."""
    scores = metric_scores.filter(pl.col("metric") == METRIC)
    if scores.is_empty():
        return schemas.empty("lveval_ablation")
    joined = scores.select("instance_id", "length", "task", "item_id", "score").join(
        instances.select("instance_id", "variant"), on="instance_id", how="left"
    )
    lost = joined.filter(pl.col("variant").is_null())
    if lost.height:
        raise dg.Failure(f"lveval_ablation: {lost.height} scores have no instance (e.g. instance_id "
                         f"{lost['instance_id'][0]!r}); rebuild metric_scores", allow_retries=False)
    table = ablation_table(joined.with_columns(model=pl.lit("m")))
    return schemas.conform(
        table.drop("model").rename({"length": "length_level"}).with_columns(metric_variant=pl.lit(metric_variant)),
        "lveval_ablation",
    )
