"""One Polars schema per table: the contracts between pipeline stages.

Partition columns (``length``, ``model``, ``source``) are *not* part of the stored
files: the hive path carries them, and the IO manager adds them back when several
partitions are loaded as one frame.
"""

from __future__ import annotations

import polars as pl

Str = pl.String
StrList = pl.List(pl.String)

SOURCE_DOCUMENTS = pl.Schema(
    {
        "doc_id": Str,  # unique within the source
        "source": Str,  # e.g. "demo", "longbench/hotpotqa"
        "title": Str,
        "text": Str,
        "language": Str,  # "en", "zh"
        "domain": Str,  # same-domain distractors are drawn by this
        "entity_type": Str,  # person / place / organisation / work (demo); "" when unknown
    }
)

SOURCE_ITEMS = pl.Schema(
    {
        "item_id": Str,
        "source": Str,
        "task": Str,  # e.g. "single_hop_qa", "multi_hop_qa"
        "category": Str,  # e.g. "single-doc QA", "multi-doc QA"
        "language": Str,
        "question": Str,
        "answers": StrList,  # gold answers; a record scores the max over them
        "answer_keywords": StrList,  # LV-Eval style keywords that must appear in a correct answer
        "evidence_doc_ids": StrList,  # documents that together contain the answer
        "hops": pl.Int32,
        "all_classes": StrList,  # label set of classification tasks (LongBench trec, lsht); [] otherwise
        "confusing_facts": StrList,  # facts a source shipped (LV-Eval records); [] otherwise
    }
)

# Records an adapter refused (config `on_error: reject`), each with the reason: never a silent skip.
REJECTED_RECORDS = pl.Schema(
    {
        "source": Str,
        "file": Str,
        "record_index": pl.Int64,  # null when the problem concerns the whole file
        "record_id": Str,
        "field": Str,
        "reason": Str,
    }
)

PASSAGES = pl.Schema(
    {
        "passage_id": Str,  # f"{doc_id}#{position}"
        "doc_id": Str,
        "source": Str,
        "title": Str,
        "text": Str,
        "position": pl.Int32,  # chunk index within the document
        "n_words": pl.Int32,
        "n_tokens": pl.Int32,  # cl100k_base
    }
)

# Row i of the FAISS index file is passage_ids[i]; the vectors are kept here as well so
# the index can be rebuilt (or moved to a GPU) without re-embedding.
PASSAGE_INDEX = pl.Schema(
    {
        "row": pl.Int64,
        "passage_id": Str,
        "embedding": pl.List(pl.Float32),
        "embedding_model": Str,
    }
)

HARD_NEGATIVES = pl.Schema(
    {
        "item_id": Str,
        "rank": pl.Int32,  # 0 = most similar passage that contains no gold answer
        "passage_id": Str,
        "doc_id": Str,
        "score": pl.Float32,  # inner product of normalized embeddings (cosine)
        "retrieval_rank": pl.Int32,  # rank before answer-bearing passages were dropped
    }
)

# One inserted confusing fact (construct/confusing_facts.py): its id, the number of context
# sentences before it, and its span in the row's own context.
INSERTIONS = pl.List(
    pl.Struct({"fact_id": Str, "sentence_index": pl.Int32, "char_offset": pl.Int64, "char_length": pl.Int64})
)

INSTANCES = pl.Schema(
    {
        "instance_id": Str,  # hash of (item, length, depth, variant, seed, construction config)
        "item_id": Str,
        "source": Str,
        "suite": Str,  # how it was built: "qa" (evidence + hard negatives + fillers) | "longbench100"
        "benchmark": Str,  # the task's benchmark (its task file): with `task` it names the TaskSpec
        "task": Str,
        "category": Str,
        "language": Str,
        "variant": Str,  # "plain" | LV-Eval's "cfi" | "kpr" | "cfi_kpr" (derived from the plain row)
        "insertions": INSERTIONS,  # CFI: where each confusing fact sits in `context`; [] otherwise
        "replacement_rule_ids": StrList,  # KPR: REPLACEMENT_RULES.rule_id applied to this row; [] otherwise
        "depth": pl.Float64,  # configured relative position of the first evidence document
        "evidence_depths": pl.List(pl.Float64),  # measured token offset / context tokens, per evidence doc
        "question": Str,
        "answers": StrList,
        "answer_keywords": StrList,
        "all_classes": StrList,  # label set of classification tasks (LongBench trec, lsht), for their metric; [] otherwise
        "evidence_doc_ids": StrList,
        "context_doc_ids": StrList,  # block ids in context order (doc ids and passage ids)
        "n_hard_negatives": pl.Int32,
        "n_filler_documents": pl.Int32,
        "context": Str,
        "prompt": Str,  # the user message: instruction + context + question
        "tokenizer": Str,  # name of the tokenizer that measured the lengths below
        "target_tokens": pl.Int64,
        "input_tokens": pl.Int64,  # exact token count of `prompt`
        "context_tokens": pl.Int64,  # exact token count of `context`
        "max_new_tokens": pl.Int32,
        # The level's own unit: "tokens" (target_tokens above), or LV-Eval's "words" / "characters"
        # (Chinese), where target_tokens is null; context_units is the context measured in it.
        "length_unit": Str,
        "target_units": pl.Int64,
        "context_units": pl.Int64,
    }
)

# Same row from every backend (transformers, llamacpp, openai, vllm).
GENERATIONS = pl.Schema(
    {
        "generation_id": Str,  # hash of (instance_id, model slug + settings, sampling params)
        "instance_id": Str,
        "output": Str,
        "prompt_tokens": pl.Int64,  # model tokens actually fed (after truncation, chat template included)
        "original_prompt_tokens": pl.Int64,  # model tokens before truncation
        "truncated": pl.Boolean,  # whether truncation_policy cut anything
        "truncation_policy": Str,  # "middle" | "end_of_context" | "drop_documents", chosen per task
        "completion_tokens": pl.Int64,
        "finish_reason": Str,  # "stop" | "length"
        "latency_s": pl.Float64,  # the request's wall time (batching backends: batch time / batch size)
        "backend": Str,
        "model_id": Str,
        "sampling_params": Str,  # JSON
        "sampling_params_hash": Str,
        "cache_key": Str,  # hash of (prompt, max_new_tokens, policy, model settings, sampling params)
    }
)

METRIC_SCORES = pl.Schema(
    {
        "score_id": Str,
        "generation_id": Str,
        "instance_id": Str,
        "item_id": Str,
        "task": Str,
        "category": Str,
        "depth": pl.Float64,
        "metric": Str,  # "subem" | "em" | "f1"
        "score": pl.Float64,  # in [0, 1]
    }
)

PRIOR_KNOWLEDGE = pl.Schema(
    {
        # 100-LongBench's QA filter, one row per (model, QA item): the model answers without context.
        "item_id": Str,
        "task": Str,
        "question": Str,
        "answers": StrList,
        "prompt": Str,  # the no-context prompt sent
        "output": Str,
        "metric": Str,  # scorer of the first line of `output` (max over golds)
        "score": pl.Float64,  # in [0, 1]
        "said_unanswerable": pl.Boolean,  # the first line says "unanswerable": never dropped
        "threshold": pl.Float64,
        "dropped": pl.Boolean,  # left out of this model's scores at every length
        "completion_tokens": pl.Int64,
        "finish_reason": Str,
    }
)

LONG_SCORES = pl.Schema(
    {
        "task": Str,  # a task name or "overall"
        "base_lengths": StrList,  # lengths averaged into Base Ability
        "base_ability": pl.Float64,  # 0-100
        "length_level": Str,  # a long length, or "avg"
        "score": pl.Float64,  # S_l, 0-100 (for "avg": the old metric, mean over long lengths)
        "long_score": pl.Float64,  # 100 * (S_l - Base) / Base (for "avg": mean over long lengths)
        "metric": Str,
        "n_instances": pl.Int64,
    }
)

LEADERBOARD = pl.Schema(
    {
        "model": Str,
        "metric": Str,
        "base_ability": pl.Float64,
        "old_metric": pl.Float64,  # mean raw score over the long lengths
        "long_score": pl.Float64,  # mean LongScore over the long lengths
        "rank_old_metric": pl.Int32,
        "rank_long_score": pl.Int32,
        "scores_by_length": Str,  # JSON {length: score}
        "n_instances": pl.Int64,
    }
)

# LV-Eval confusing-fact insertion (CFI): every candidate fact with its verdict; only accepted
# facts are inserted, rejected ones keep the reason (nothing is dropped silently).
CONFUSING_FACTS = pl.Schema(
    {
        "fact_id": Str,  # hash of (item, generator, text)
        "item_id": Str,
        "fact_index": pl.Int32,  # 0, 1, ... among the item's accepted facts; null when rejected
        "text": Str,
        "subject": Str,  # the entity the fact is about ("" when the generator did not say)
        "generator": Str,  # "knowledge_base" | "llm:<backend>:<model id>:<prompt version>"
        "attempt": pl.Int32,  # 1-based generation round
        "accepted": pl.Boolean,
        "reason": Str,  # why it was rejected; "" when accepted
    }
)

# LV-Eval keyword and phrase replacement (KPR): per item, old term -> new term.
REPLACEMENT_RULES = pl.Schema(
    {
        "rule_id": Str,  # hash of (item, old, new)
        "item_id": Str,
        "rule_index": pl.Int32,  # order within the item
        "old": Str,
        "new": Str,
        "origin": Str,  # "user" (a rules file) | "auto" (proposed substitutes)
    }
)

# MiniLongBench (score/minilongbench.py): the selected samples with their IRT parameters.
MINILONGBENCH_SUBSET = pl.Schema(
    {
        "sample_id": Str,  # LongBench global sample index (as text) or our instance_id
        "task": Str,
        "category": Str,
        "cluster_group": Str,  # the K-Means group the sample was chosen in (its category)
        "cluster": pl.Int64,
        "cluster_weight": pl.Float64,  # summed balance weight of the sample's cluster
        "alpha": pl.List(pl.Float64),  # IRT discrimination (d dims)
        "beta": pl.Float64,  # IRT difficulty (enters the logit as d * beta)
    }
)

# One model's estimated full-benchmark scores from its scores on the subset (partitioned by model).
MINILONGBENCH_ESTIMATES = pl.Schema(
    {
        "mode": Str,  # "predict" (IRT ability, predicted remainder) | "direct" (subset mean) | "weighted" | "blend"
        "scope": Str,  # "overall" | "category" | "task"
        "name": Str,  # "overall", a category or a task
        "estimate": pl.Float64,  # in [0, 1]: mean of category means of task means
        "n_observed": pl.Int64,  # subset samples this model has a score on
        "n_subset": pl.Int64,
        "in_training": pl.Boolean,  # the model was one of the training models (an in-sample estimate)
    }
)

# LV-Eval's CFI/KPR ablation of one model (partitioned by model): keyword-recall scores of the
# same items per length level and variant (score/keyword_recall.py::ablation_table).
LVEVAL_ABLATION = pl.Schema(
    {
        "length_level": Str,
        "variant": Str,  # "plain" | "cfi" | "kpr" | "cfi_kpr"
        "task": Str,  # a task, or "all": the level score (unweighted mean over the tasks)
        "score": pl.Float64,  # 0-100, 2 decimals per task
        "n_instances": pl.Int64,
        "metric_variant": Str,  # "code" (released scorer) | "paper"
    }
)

# One LLM-judge verdict per (generation, rubric) (score/judge.py); partitioned by length x model.
JUDGE_SCORES = pl.Schema(
    {
        "judgment_id": Str,  # hash of (generation, rubric, rubric version, judge model)
        "generation_id": Str,
        "instance_id": Str,
        "item_id": Str,
        "suite": Str,
        "task": Str,
        "category": Str,
        "depth": pl.Float64,
        "rubric": Str,  # helmet_longqa | helmet_summ | loong | lb100_qa | lb100_summ
        "rubric_version": Str,
        "judge_model": Str,  # the model name the server was asked for (never its key)
        "raw": Str,  # the judge's reply; JSON {aspect: reply} when the rubric asks several questions
        "parsed_fields": Str,  # JSON of what was read from the reply, e.g. {"fluency": 1, "correctness": 3}
        "value": pl.Float64,  # on the rubric's own scale (Loong 1-100, HELMET QA 0-3, ...); null if unparsed
        "score": pl.Float64,  # value mapped to [0, 1]; null if unparsed
        "parse_status": Str,  # ok | no_score | missing_field | out_of_range
        "perfect": pl.Boolean,  # Loong: the score is 100; null for other rubrics
        "judge_calls": pl.Int32,  # questions this verdict took (cached replies count too)
    }
)

TABLES: dict[str, pl.Schema] = {
    "source_documents": SOURCE_DOCUMENTS,
    "source_items": SOURCE_ITEMS,
    "rejected_records": REJECTED_RECORDS,
    "passages": PASSAGES,
    "passage_index": PASSAGE_INDEX,
    "hard_negatives": HARD_NEGATIVES,
    "instances": INSTANCES,
    "generations": GENERATIONS,
    "metric_scores": METRIC_SCORES,
    "prior_knowledge": PRIOR_KNOWLEDGE,
    "long_scores": LONG_SCORES,
    "leaderboard": LEADERBOARD,
    "confusing_facts": CONFUSING_FACTS,
    "replacement_rules": REPLACEMENT_RULES,
    "lveval_ablation": LVEVAL_ABLATION,
    "judge_scores": JUDGE_SCORES,
    "minilongbench_subset": MINILONGBENCH_SUBSET,
    "minilongbench_estimates": MINILONGBENCH_ESTIMATES,
}


class SchemaError(ValueError):
    """A frame does not match its table's contract."""


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Return ``df`` with exactly the table's columns, in order, cast to its types.

    Missing columns, extra columns and failed casts raise :class:`SchemaError` naming the
    table and the column, so a stage never writes a frame its readers cannot trust.
    """
    schema = TABLES[table]
    missing = [c for c in schema if c not in df.columns]
    extra = [c for c in df.columns if c not in schema]
    if missing or extra:
        raise SchemaError(f"table {table!r}: missing columns {missing}, unexpected columns {extra}")
    out = []
    for name, dtype in schema.items():
        col = df.get_column(name)
        if col.dtype != dtype:
            try:
                col = col.cast(dtype, strict=True)
            except Exception as exc:  # polars raises several error types for bad casts
                raise SchemaError(
                    f"table {table!r}, column {name!r}: cannot cast {col.dtype} to {dtype}: {exc}"
                ) from exc
        out.append(col)
    return pl.DataFrame(out)


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=TABLES[table])
