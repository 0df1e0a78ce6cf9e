"""One Polars schema per table: the contracts between pipeline stages.

Each table is written once, as ``column: (dtype, description)``; :data:`TABLES` holds the
schemas and :data:`DESCRIPTIONS` the column descriptions, which the Dagster UI shows in an
asset's Columns table (``dagster/column_schema``, attached by the IO manager and definitions.py).

Partition columns (``length``, ``model``, ``source``) are *not* part of the stored
files: the hive path carries them, and the IO manager adds them back when several
partitions are loaded as one frame.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

Str = pl.String
StrList = pl.List(pl.String)

# table -> column -> what the column holds (filled by table_schema, one entry per table of TABLES)
_DESCRIPTIONS: dict[str, dict[str, str]] = {}


def table_schema(name: str, columns: dict[str, tuple[pl.DataType, str]]) -> pl.Schema:
    """The schema of table ``name``; its column descriptions go to :data:`DESCRIPTIONS`."""
    _DESCRIPTIONS[name] = {column: description for column, (_, description) in columns.items()}
    return pl.Schema({column: dtype for column, (dtype, _) in columns.items()})


SOURCE_DOCUMENTS = table_schema("source_documents", {
    "doc_id": (Str, "Document id, unique within the source"),
    "source": (Str, 'The source the document came from, e.g. "demo", "longbench/hotpotqa"'),
    "title": (Str, "Document title"),
    "text": (Str, "Full document text"),
    "language": (Str, 'Language code: "en", "zh"'),
    "domain": (Str, "Topic domain; same-domain distractors are drawn by it"),
    "entity_type": (Str, 'person / place / organisation / work (demo corpus); "" when unknown'),
})

SOURCE_ITEMS = table_schema("source_items", {
    "item_id": (Str, "Item (question) id, unique within the source"),
    "source": (Str, "The source the item came from"),
    "task": (Str, 'Task of the item, e.g. "single_hop_qa", "multi_hop_qa"'),
    "category": (Str, 'Task category, e.g. "single-doc QA", "multi-doc QA"'),
    "language": (Str, 'Language code: "en", "zh"'),
    "question": (Str, "The question (or instruction) asked"),
    "answers": (StrList, "Gold answers; a record scores the max over them"),
    "answer_keywords": (StrList, "LV-Eval style keywords that must appear in a correct answer"),
    "evidence_doc_ids": (StrList, "Documents (source_documents.doc_id) that together contain the answer"),
    "hops": (pl.Int32, "Reasoning hops: the number of evidence documents needed"),
    "all_classes": (StrList, "Label set of classification tasks (LongBench trec, lsht); [] otherwise"),
    "confusing_facts": (StrList, "Confusing facts a source shipped (LV-Eval records); [] otherwise"),
    # A published benchmark run as released (config `released:`) keeps the record as the authors ship it.
    "record_id": (Str, "The released record's own id (LongBench `_id`, Loong `id`); \"\" when the source has none"),
    "context": (Str, "The released record's context, verbatim; \"\" when the source ships none (contexts are "
                     "assembled from the documents)"),
    "record_fields": (Str, "JSON object: the released record's other fields a run as released reads (LongBench-E "
                           "`length`, LV-Eval `level`, Loong `instruction`/`prompt_template`, v2 `difficulty`); {}"),
})

# The columns a source without released records fills with their defaults (sources/validation.py).
RECORD_COLUMN_DEFAULTS = {"record_id": "", "context": "", "record_fields": "{}"}

# Records an adapter refused (config `on_error: reject`), each with the reason: never a silent skip.
REJECTED_RECORDS = table_schema("rejected_records", {
    "source": (Str, "The source whose adapter refused the record"),
    "file": (Str, "The file the record was read from"),
    "record_index": (pl.Int64, "0-based position of the record in its file; null when the problem concerns the "
                               "whole file"),
    "record_id": (Str, "The record's own id, when it has one"),
    "field": (Str, "The field that was missing or invalid"),
    "reason": (Str, "Why the record was refused"),
})

PASSAGES = table_schema("passages", {
    "passage_id": (Str, 'Passage id: f"{doc_id}#{position}"'),
    "doc_id": (Str, "The document the passage was cut from"),
    "source": (Str, "The document's source"),
    "title": (Str, "The document's title"),
    "text": (Str, "Passage text (about config passage_words words)"),
    "position": (pl.Int32, "Chunk index within the document"),
    "n_words": (pl.Int32, "Words in the passage"),
    "n_tokens": (pl.Int32, "Tokens in the passage (cl100k_base)"),
})

# Row i of the FAISS index file is passage_ids[i]; the vectors are kept here as well so
# the index can be rebuilt (or moved to a GPU) without re-embedding.
PASSAGE_INDEX = table_schema("passage_index", {
    "row": (pl.Int64, "Row of the vector in the FAISS index file"),
    "passage_id": (Str, "The embedded passage (passages.passage_id)"),
    "embedding": (pl.List(pl.Float32), "Normalized embedding vector (kept to rebuild the index without "
                                       "re-embedding)"),
    "embedding_model": (Str, "The embedding model that made the vector"),
})

HARD_NEGATIVES = table_schema("hard_negatives", {
    "item_id": (Str, "The item the passage is a distractor for"),
    "rank": (pl.Int32, "0 = most similar passage that contains no gold answer"),
    "passage_id": (Str, "The distractor passage (passages.passage_id)"),
    "doc_id": (Str, "The passage's document"),
    "score": (pl.Float32, "Inner product of normalized embeddings (cosine similarity to the question)"),
    "retrieval_rank": (pl.Int32, "Rank before answer-bearing passages were dropped"),
})

# One inserted confusing fact (construct/confusing_facts.py): its id, the number of context
# sentences before it, and its span in the row's own context.
INSERTIONS = pl.List(
    pl.Struct({"fact_id": Str, "sentence_index": pl.Int32, "char_offset": pl.Int64, "char_length": pl.Int64})
)

INSTANCES = table_schema("instances", {
    "instance_id": (Str, "Hash of (item, length, depth, variant, seed, construction config)"),
    "item_id": (Str, "The source item the instance asks about"),
    "source": (Str, "The item's source"),
    "suite": (Str, 'How it was built: "qa" (evidence + hard negatives + fillers), "longbench100", "helmet", ...'),
    "benchmark": (Str, "The task's benchmark (its task file): with `task` it names the TaskSpec"),
    "task": (Str, "Task name"),
    "category": (Str, "Task category"),
    "language": (Str, 'Language code: "en", "zh"'),
    "variant": (Str, '"plain" | LV-Eval\'s "cfi" | "kpr" | "cfi_kpr" (derived from the plain row)'),
    "insertions": (INSERTIONS, "CFI: where each confusing fact sits in `context` (fact_id, sentence_index, "
                               "char_offset, char_length); [] otherwise"),
    "replacement_rule_ids": (StrList, "KPR: replacement_rules.rule_id applied to this row; [] otherwise"),
    "depth": (pl.Float64, "Configured relative position of the first evidence document (0 = start, 1 = end)"),
    "evidence_depths": (pl.List(pl.Float64), "Measured token offset / context tokens, per evidence document"),
    "question": (Str, "The question asked"),
    "answers": (StrList, "Gold answers; a generation scores the max over them"),
    "answer_keywords": (StrList, "LV-Eval style keywords that must appear in a correct answer"),
    "all_classes": (StrList, "Label set of classification tasks (LongBench trec, lsht), for their metric; "
                             "[] otherwise"),
    "evidence_doc_ids": (StrList, "Documents that together contain the answer"),
    "context_doc_ids": (StrList, "Block ids in context order (doc ids and passage ids)"),
    "n_hard_negatives": (pl.Int32, "Hard-negative passages in the context"),
    "n_filler_documents": (pl.Int32, "Filler documents in the context"),
    "context": (Str, "The long context: evidence, distractors and fillers"),
    "prompt": (Str, "The user message: instruction + context + question"),
    "tokenizer": (Str, "Name of the tokenizer that measured the token counts"),
    "target_tokens": (pl.Int64, "The level's size in tokens; null for a level in words / characters"),
    "input_tokens": (pl.Int64, "Exact token count of `prompt`"),
    "context_tokens": (pl.Int64, "Exact token count of `context`"),
    "max_new_tokens": (pl.Int32, "Answer budget of the generation, in tokens"),
    "length_unit": (Str, 'The level\'s own unit: "tokens", or LV-Eval\'s "words" / "characters" (Chinese)'),
    "target_units": (pl.Int64, "The level's size in its length_unit"),
    "context_units": (pl.Int64, "The context measured in length_unit"),
    "record_id": (Str, "Run as released: the source record's own id (imported predictions name it); else \"\""),
    "record_fields": (Str, "Run as released: JSON of the record's fields its table is cut by (v2 `difficulty`, "
                           "`length`); {} otherwise"),
    "protocol": (Str, 'The protocol that made the prompt: "official@<commit>" (the authors\' prompts, answer lengths '
                      'and truncation, read from their files at that commit; config `protocol`) or "ours"'),
})

# Same row from every backend (transformers, llamacpp, openai, vllm).
GENERATIONS = table_schema("generations", {
    "generation_id": (Str, "Hash of (instance_id, model slug + settings, sampling params)"),
    "instance_id": (Str, "The instance answered"),
    "output": (Str, "The model's answer"),
    "prompt_tokens": (pl.Int64, "Model tokens actually fed (after truncation, chat template included)"),
    "original_prompt_tokens": (pl.Int64, "Model tokens before truncation"),
    "truncated": (pl.Boolean, "Whether truncation_policy cut anything"),
    "truncation_policy": (Str, '"middle" | "end_of_context" | "drop_documents" | "skip" (not sent when it does '
                                'not fit), chosen per task, or per model (models.yaml truncation)'),
    "completion_tokens": (pl.Int64, "Tokens generated"),
    "finish_reason": (Str, '"stop" | "length"'),
    "latency_s": (pl.Float64, "The request's wall time in seconds (batching backends: batch time / batch size)"),
    "backend": (Str, "Generation backend: transformers, llamacpp, openai, vllm"),
    "model_id": (Str, "The model's id (Hugging Face id, path or served name)"),
    "sampling_params": (Str, "Sampling parameters, JSON"),
    "sampling_params_hash": (Str, "Hash of sampling_params"),
    "cache_key": (Str, "Hash of (prompt, max_new_tokens, policy, model settings, sampling params)"),
    # Numbers users can trust (README "What a score rests on"): fit, status, thoughts, the prompt as fed.
    "target_tokens": (pl.Int64, "The instance's level target in tokens (instances.target_tokens); null for a level "
                                "in words / characters or a released record"),
    "status": (Str, '"answered" | "empty" (nothing left to score) | "cut" (stopped at max_new_tokens, '
                    'finish_reason "length") | "skipped" (truncation policy "skip": the prompt did not fit the '
                    'window and was not sent) | "invalid" (a reasoning model\'s thinking ran out before an answer)'),
    "thinking": (Str, "A reasoning model's thoughts (its <think> block or the server's reasoning field), stripped "
                      "from `output` before scoring; \"\" when none"),
    "prompt_ids_hash": (Str, "sha256 (16 hex) of the token ids fed to the model, chat template included; \"\" "
                             "when a server renders the prompt (openai chat api) or nothing was sent"),
    "chat_template_source": (Str, '"model" (its own template) | "file:<name>" (a user template file) | "none" '
                                  '(plain prompt) | "server" (the server applies its template) | "server:forced" (a task '
                                  'without the chat template, templated by a chat-only server)'),
    "bos_tokens": (pl.Int32, "BOS ids in the fed ids (the prompt-format guard's input); null when unknown "
                             "(server-rendered, nothing sent)"),
})

# The statuses of a generation row (GENERATIONS.status) and of a metric row (METRIC_SCORES.status adds
# "unparsable"). Rows that are "skipped" or "invalid" are not scored (no metric_scores row): they are counted.
GENERATION_STATUSES = ("answered", "empty", "cut", "skipped", "invalid")
NOT_SCORED = ("skipped", "invalid")
SCORED_STATUSES = ("answered", "empty", "cut", "unparsable")

METRIC_SCORES = table_schema("metric_scores", {
    "score_id": (Str, "Hash of (generation, metric)"),
    "generation_id": (Str, "The generation scored"),
    "instance_id": (Str, "The generation's instance"),
    "item_id": (Str, "The instance's item"),
    "task": (Str, "Task name"),
    "category": (Str, "Task category"),
    "depth": (pl.Float64, "The instance's configured evidence depth"),
    "metric": (Str, 'The metric, e.g. "subem", "em", "f1"'),
    "score": (pl.Float64, "Score in [0, 1]"),
    "status": (Str, '"answered" | "empty" | "cut" (the generation\'s status) | "unparsable" (the metric parses '
                    'its answer, an MC letter, a label integer, a ranking, and found none: scored 0, counted)'),
})

PRIOR_KNOWLEDGE = table_schema("prior_knowledge", {
    # 100-LongBench's QA filter, one row per (model, QA item): the model answers without context.
    "item_id": (Str, "The QA item asked without context"),
    "task": (Str, "The item's task"),
    "question": (Str, "The question"),
    "answers": (StrList, "Gold answers"),
    "prompt": (Str, "The no-context prompt sent"),
    "output": (Str, "The model's answer"),
    "metric": (Str, "Scorer of the first line of `output` (max over golds)"),
    "score": (pl.Float64, "Score in [0, 1]"),
    "said_unanswerable": (pl.Boolean, 'The first line says "unanswerable": never dropped'),
    "threshold": (pl.Float64, "Score at or above which the item is dropped"),
    "dropped": (pl.Boolean, "Left out of this model's scores at every length"),
    "completion_tokens": (pl.Int64, "Tokens generated"),
    "finish_reason": (Str, '"stop" | "length"'),
})

LONG_SCORES = table_schema("long_scores", {
    "task": (Str, 'A task name or "overall"'),
    "base_lengths": (StrList, "Lengths averaged into Base Ability"),
    "base_ability": (pl.Float64, "Base Ability: mean score over the base lengths, 0-100"),
    "length_level": (Str, 'A long length, or "avg"'),
    "score": (pl.Float64, 'S_l, 0-100 (for "avg": the old metric, mean over long lengths)'),
    "long_score": (pl.Float64, '100 * (S_l - Base) / Base (for "avg": mean over long lengths)'),
    "metric": (Str, "The metric the scores come from"),
    "n_instances": (pl.Int64, "Instances scored"),
})

LEADERBOARD = table_schema("leaderboard", {
    "model": (Str, "Model slug"),
    "metric": (Str, "The metric the scores come from"),
    "base_ability": (pl.Float64, "Base Ability, 0-100"),
    "old_metric": (pl.Float64, "Mean raw score over the long lengths"),
    "long_score": (pl.Float64, "Mean LongScore over the long lengths"),
    "rank_old_metric": (pl.Int32, "Rank by old_metric (1 = best)"),
    "rank_long_score": (pl.Int32, "Rank by long_score (1 = best)"),
    "scores_by_length": (Str, "JSON {length: score}"),
    "n_instances": (pl.Int64, "Instances scored"),
    "ci_low": (pl.Float64, "95% bootstrap interval (items resampled, seeded, 1,000 draws) of long_score; of "
                           "old_metric where a row has no LongScore (a published table); null if undefined"),
    "ci_high": (pl.Float64, "Upper end of that interval"),
    "skipped_share": (pl.Float64, "Share of the model's generations at the row's lengths not sent: the prompt did "
                                  "not fit its window (truncation policy skip)"),
    "truncated_share": (pl.Float64, "Share of the model's generations whose prompt was truncated to fit"),
    "invalid_share": (pl.Float64, "Share of the model's generations not scored as invalid (thinking ran out)"),
    "n_unpaired": (pl.Int64, "Instances this model has a score on that another model of the board lacks: left "
                             "out so that every model is ranked on the same items (0 with one model)"),
    "protocol": (Str, 'A published table\'s row: the protocol of its benchmark_scores rows ("ours", '
                      '"official@<commit>"), ranked only among rows of the same protocol; null on LongScore rows'),
    "missing_groups": (StrList, 'A published table\'s row: "<group>@<length>" (or "length=<level>") of the '
                                "overall rows behind it that are null, so old_metric is null; [] when complete"),
})

# Each benchmark's published table for one model (partitioned by model; score/benchmark_scores.py): task,
# group and overall rows per (benchmark, table, length), aggregated as the benchmark's task file says; a
# benchmark whose headline declares a ``breakdown`` has the overall again per record-field value
# (level "breakdown"). Several numbers of one cell are rows told apart by ``metric``: the score (the
# task's metric label, or "judge:<rubric>" for a judge-scored task) and, where a cell has judge verdicts,
# "scoring_success" and (Loong's rubric) "perfect_rate".
BENCHMARK_SCORES = table_schema("benchmark_scores", {
    "benchmark": (Str, "The benchmark (its task file)"),
    "table": (Str, 'The paper\'s table the row belongs to (aggregation.table: LongBench "en" / "zh"), else "all"'),
    "level": (Str, '"task" | "group" | "overall" | "breakdown" (the overall on the instances of one record-field '
                   'value) | "component" (one metric of a task scored by the mean of its metrics: HELMET Cite)'),
    "task": (Str, "Task name; null for group, overall and breakdown rows"),
    "category": (Str, 'The task\'s group (aggregation.group); null for overall rows; "<field>=<value>" for '
                      'breakdown rows (LongBench v2 "difficulty=easy", "length=short")'),
    "length": (Str, "Length level (the config's length partition, not a record field); \"[all]\" (brackets: never a "
                    "partition name) for the rows over every length of a headline across_lengths: micro_over_items "
                    "(Loong's Table 3 and overall)"),
    "metric": (Str, "What the row's number is: the headline metric's label (the task's first declared; "
                    "'+'-joined when a group mixes several), \"judge:<rubric>\" for a judge-scored task, "
                    "\"scoring_success\" (share of judge verdicts parsed ok) or \"perfect_rate\" (share of ok "
                    "verdicts at the rubric's top, Loong's 100)"),
    "score": (pl.Float64, "Score rows: x the headline scale (0-100), task rows rounded as headline.round says; null "
                          "for a group or overall row with missing_groups; scoring_success and perfect_rate "
                          "rows: a share in [0, 1] (Loong prints its Perfect Rate on 0-1)"),
    "n": (pl.Int64, "Instances counted (plain rows only; LV-Eval variants are left out): scored (judge: parsed "
                    "ok) for score and perfect_rate rows, judged for scoring_success rows"),
    "aggregation": (Str, 'How the overall is made: "mean_of_groups" | "mean_of_tasks" | "mean_of_instances"; '
                         "the judge rates are always shares of their instances (micro)"),
    "ci_low": (pl.Float64, "95% bootstrap interval of score (instances resampled within each task cell, seeded, "
                           "1,000 draws, the row's aggregation recomputed); null for rate rows or when undefined"),
    "ci_high": (pl.Float64, "Upper end of that interval"),
    "skipped_share": (pl.Float64, "Share of the row's instances whose prompt was not sent (truncation policy skip)"),
    "truncated_share": (pl.Float64, "Share of the row's instances whose prompt was truncated to fit the window"),
    "status_counts": (Str, 'JSON {status: generations} of the row\'s instances: answered, empty, cut, unparsable, '
                           'skipped, invalid'),
    "protocol": (Str, 'The protocol of the row\'s instances (instances.protocol: "ours", "official@<commit>"; '
                      '"ours" where instances have none): rows of different protocols are computed apart'),
    "missing_groups": (StrList, "What the row averages that has no score, so the row is null: a group row's tasks, "
                                "an overall row's groups (mean_of_groups) or tasks (mean_of_tasks, "
                                "mean_of_instances); on rows of length \"[all]\" also \"length=<level>\" for a "
                                "length without a score; [] when complete"),
})

# LV-Eval confusing-fact insertion (CFI): every candidate fact with its verdict; only accepted
# facts are inserted, rejected ones keep the reason (nothing is dropped silently).
CONFUSING_FACTS = table_schema("confusing_facts", {
    "fact_id": (Str, "Hash of (item, generator, text)"),
    "item_id": (Str, "The item the fact is made for"),
    "fact_index": (pl.Int32, "0, 1, ... among the item's accepted facts; null when rejected"),
    "text": (Str, "The fact sentence"),
    "subject": (Str, 'The entity the fact is about ("" when the generator did not say)'),
    "generator": (Str, '"knowledge_base" | "llm:<backend>:<model id>:<prompt version>"'),
    "attempt": (pl.Int32, "1-based generation round"),
    "accepted": (pl.Boolean, "Whether the fact passed the checks and is inserted"),
    "reason": (Str, 'Why it was rejected; "" when accepted'),
})

# LV-Eval keyword and phrase replacement (KPR): per item, old term -> new term.
REPLACEMENT_RULES = table_schema("replacement_rules", {
    "rule_id": (Str, "Hash of (item, old, new)"),
    "item_id": (Str, "The item whose instances the rule rewrites"),
    "rule_index": (pl.Int32, "Order within the item"),
    "old": (Str, "The term replaced"),
    "new": (Str, "The term it is replaced with"),
    "origin": (Str, '"user" (a rules file) | "auto" (proposed substitutes)'),
})

# One LLM-judge verdict per (generation, rubric) (score/judge.py); partitioned by length x model.
JUDGE_SCORES = table_schema("judge_scores", {
    "judgment_id": (Str, "Hash of (generation, rubric, rubric version, judge model)"),
    "generation_id": (Str, "The generation judged"),
    "instance_id": (Str, "The generation's instance"),
    "item_id": (Str, "The instance's item"),
    "suite": (Str, "The instance's suite"),
    "task": (Str, "Task name"),
    "category": (Str, "Task category"),
    "depth": (pl.Float64, "The instance's configured evidence depth"),
    "rubric": (Str, "helmet_longqa | helmet_summ | loong | lb100_qa | lb100_summ"),
    "rubric_version": (Str, "Version of the rubric's prompts"),
    "judge_model": (Str, "The model name the judge server was asked for (never its key)"),
    "raw": (Str, "The judge's reply; JSON {aspect: reply} when the rubric asks several questions"),
    "parsed_fields": (Str, 'JSON of what was read from the reply, e.g. {"fluency": 1, "correctness": 3}'),
    "value": (pl.Float64, "On the rubric's own scale (Loong 1-100, HELMET QA 0-3, ...); null if unparsed"),
    "score": (pl.Float64, "value mapped to [0, 1]; null if unparsed"),
    "parse_status": (Str, "ok | no_score | missing_field | out_of_range"),
    "perfect": (pl.Boolean, "Loong: the score is 100; null for other rubrics"),
    "judge_calls": (pl.Int32, "Questions this verdict took (cached replies count too)"),
})

# ALCE citation recall / precision per (generation, metric), NLI-judged (score/citations.py); length x model.
CITATION_SCORES = table_schema("citation_scores", {
    "score_id": (Str, "Hash of (generation, metric): the same id a metric_scores row of it would have"),
    "generation_id": (Str, "The generation scored"),
    "instance_id": (Str, "The generation's instance"),
    "item_id": (Str, "The instance's item"),
    "task": (Str, "Task name"),
    "category": (Str, "Task category"),
    "depth": (pl.Float64, "The instance's configured evidence depth"),
    "metric": (Str, '"citation_rec" | "citation_prec"'),
    "score": (pl.Float64, "Score in [0, 1]; null when the output has no sentence to score (ALCE skips it)"),
    "nli_backend": (Str, "The NLI judge, e.g. hf_seq2seq:<path>, judge:<model>@<server>, model:<slug> (never a key)"),
    "sentence_splitter": (Str, "How the output was cut into sentences: nltk.punkt | regex | qampari.items"),
    "n_sentences": (pl.Int32, "Sentences scored"),
    "n_citations": (pl.Int32, "Citations counted for precision (<= 3 per sentence whose citations are in range)"),
    "n_checks": (pl.Int32, "NLI questions this score used (answers from the cache included)"),
    "n_unparsed": (pl.Int32, "Of those, verdicts that could not be read (counted as not entailed)"),
    "parse_status": (Str, "ok, the worst status of its NLI verdicts (no_verdict), or no_sentences"),
    "checks": (Str, "JSON list: per NLI question the sentence (index, text, hypothesis), cited ids, step "
                    "(joint | alone | without), premise ids, verdict, status and raw reply; sentences scored 0 "
                    "for their citations have status no_citation / out_of_range"),
})

_CORE_TABLES: dict[str, pl.Schema] = {
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
    "benchmark_scores": BENCHMARK_SCORES,
    "confusing_facts": CONFUSING_FACTS,
    "replacement_rules": REPLACEMENT_RULES,
    "judge_scores": JUDGE_SCORES,
    "citation_scores": CITATION_SCORES,
}


def _registered_tables() -> dict[str, pl.Schema]:
    """The tables the benchmark packages register (tasks.registry.TABLES: ``"module:SCHEMA"`` made with
    :func:`table_schema`, whose import fills the descriptions)."""
    from lc_pipeline.tasks.registry import TABLES as REGISTERED

    return {name: REGISTERED.get(name) for name in REGISTERED.names()}


class _AllTables(Mapping):
    """A read-only view over the core's tables and the packages' (``read()`` after their modules are imported)."""

    def __init__(self, read) -> None:
        self._read = read

    def _all(self) -> Mapping:
        registered = _registered_tables()
        return self._read(registered)

    def __getitem__(self, table: str):
        return self._all()[table]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


TABLES: Mapping[str, pl.Schema] = _AllTables(lambda registered: {**_CORE_TABLES, **registered})
DESCRIPTIONS: Mapping[str, dict[str, str]] = _AllTables(lambda registered: _DESCRIPTIONS)  # table -> column -> text


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
