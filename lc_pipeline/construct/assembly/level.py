"""A length level's instances: the items that fit, the level's items x depths, built in batches.

Items are selected once for every level (LV-Eval: levels share their QA pairs); each instance
depends only on its item, the level and its depth, so the rows do not depend on the batch size.
Each item's prompt is its task's :class:`~lc_pipeline.construct.prompts.QAPrompt` (``prompt_for``;
None: our QA prompt for every item).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import polars as pl

from lc_pipeline.config import BenchmarkConfig, level_tokens
from lc_pipeline.construct.assembly.documents import DocumentIndex, PassageScreen
from lc_pipeline.construct.assembly.instance import assemble_instance
from lc_pipeline.construct.assembly.items import derive_seed, instance_id, select_items
from lc_pipeline.construct.prompts import PromptFor, build_prompt, format_context, prompt_for_items
from lc_pipeline.construct.rows import instances_frame
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import INSTANCE_CONTENT_FIELDS


def _hard_negative_rows(hard_negatives: pl.DataFrame, passages: pl.DataFrame, item_ids: list[str]) -> dict[str, list[dict]]:
    hn = (
        hard_negatives.filter(pl.col("item_id").is_in(item_ids))
        .select("item_id", "rank", "passage_id", "doc_id")
        .join(passages.select("passage_id", "title", "text"), on="passage_id", how="left")
        .sort("item_id", "rank")
    )
    missing = hn.filter(pl.col("text").is_null())
    if missing.height:
        r = missing.row(0, named=True)
        raise ValueError(
            f"item {r['item_id']!r}: hard negative passage_id {r['passage_id']!r} is not in the passages table "
            f"({missing.height} missing in all)"
        )
    out: dict[str, list[dict]] = defaultdict(list)
    for r in hn.iter_rows(named=True):
        out[r["item_id"]].append(r)
    return out


def fitting_items(
    items: pl.DataFrame, documents: pl.DataFrame, counter: TokenCounter, target_tokens: int,
    prompt_for: PromptFor | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split items into those whose prompt with only their evidence fits ``target_tokens``, and the rest.

    Real corpora have long evidence (a LongBench hotpotqa record's passages are ~10k tokens):
    such an item cannot be an instance at a short level. Callers choose items that fit the
    SMALLEST level so every level shares them, and report the rest (``item_id``,
    ``evidence_tokens``) instead of dropping them silently. The prompt is the item's own
    (``prompt_for``, item row -> QAPrompt), by default our QA prompt.
    """
    docs = DocumentIndex(documents)
    rows = list(items.iter_rows(named=True))
    prompt_of = None if prompt_for is None else prompt_for_items(prompt_for, 1)
    prompts = []
    for item in rows:
        context = format_context((d["title"], d["text"]) for d in docs.evidence(item))
        prompts.append(build_prompt(context, item["question"]) if prompt_of is None
                       else prompt_of(item).render(context, item["question"]))
    tokens = [counter.count(p) for p in prompts]  # short prompts: a thread pool (count_many) costs more CPU
    fits = [t <= target_tokens for t in tokens]
    too_long = pl.DataFrame(
        {"item_id": [r["item_id"] for r, f in zip(rows, fits) if not f],
         "evidence_tokens": [t for t, f in zip(tokens, fits) if not f]},
        schema={"item_id": pl.String, "evidence_tokens": pl.Int64},
    )
    return items.filter(pl.Series(fits, dtype=pl.Boolean)), too_long


# A batch is one Parquet row group when written. Up to 50 items a group keeps zstd's sharing of
# the filler documents rows have in common (64k: 3.6 MB a level vs 4.2 MB in groups of 16). A
# process building and writing a batch peaks at ~7x the batch's strings (Python rows, the
# frame, its Arrow copy, the writer's pages), so batches also stop at ~4M prompt tokens
# (~35 MB of context + prompt text, ~300 MB of peak memory); 256k levels lose 5 % of file size.
ITEMS_PER_BATCH = 50
BATCH_TOKENS = 2**22


def items_per_batch_at(target_tokens: int, rows_per_item: int, cap: int = ITEMS_PER_BATCH) -> int:
    """Items per batch so that a batch of ``rows_per_item`` rows per item (depths x variants) holds
    at most about BATCH_TOKENS prompt tokens: 50 items at 64k x 1 depth, 16 at 256k x 1 depth."""
    return max(1, min(cap, BATCH_TOKENS // max(1, target_tokens * rows_per_item)))


def iter_instance_batches(
    items: pl.DataFrame,
    documents: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: BenchmarkConfig,
    counter: TokenCounter,
    items_per_batch: int | None = None,
    prompt_for: PromptFor | None = None,
) -> Iterator[pl.DataFrame]:
    """The instances of one length level (the selected items x the configured depths), as
    INSTANCES frames of ``items_per_batch`` items each (default: :func:`items_per_batch_at`), in item order.

    A level at 256k tokens x 100 items x 1 depth is ~230 MB of strings (a peak of ~1.9 GB when
    built as one frame and written); a caller that writes each batch before asking for the next
    holds one batch at a time. The rows do not depend on the batch size: items are selected
    once, and each instance depends only on its item and the level. ``prompt_for`` (item row ->
    its QAPrompt; None: our QA prompt with ``config.max_new_tokens``) gives each row its prompt,
    ``max_new_tokens`` and id salt.
    """
    if counter.name != config.tokenizer:
        raise ValueError(f"config tokenizer {config.tokenizer!r} but the counter is {counter.name!r}")
    target = level_tokens(level)
    if items_per_batch is None:
        items_per_batch = items_per_batch_at(target, len(config.depths))
    if items_per_batch < 1:
        raise ValueError(f"items_per_batch must be >= 1, got {items_per_batch}")
    prompt_of = prompt_for_items(prompt_for, config.max_new_tokens)
    selected = select_items(items, config.items_per_length, config.seed)
    docs = DocumentIndex(documents)
    docs.screen_answers(selected["answers"].to_list())
    negatives = _hard_negative_rows(hard_negatives, passages, selected["item_id"].to_list())
    fingerprint = config.fingerprint(*INSTANCE_CONTENT_FIELDS)
    token_cache: dict[str, int] = {}  # block counts, shared by every batch of the level
    normalized_cache = PassageScreen()  # hard negatives' screened / normalized text, likewise
    # The first instance of each template is also encoded whole: added-up counts are checked once per level.
    verified: set[str] = set()
    for batch in selected.iter_slices(items_per_batch):
        rows = []
        for item in batch.iter_rows(named=True):
            prompt = prompt_of(item)
            evidence = docs.evidence(item)
            evidence_ids = {d["doc_id"] for d in evidence}
            item_negatives = [h for h in negatives.get(item["item_id"], []) if h["doc_id"] not in evidence_ids]
            pool = docs.filler_pool(item, config.cross_domain_fill)
            # Shared by all depths of (item, level): depth is then the only thing that differs.
            seed = derive_seed(config.seed, item["item_id"], level, target)
            for depth in config.depths:
                rows.append(assemble_instance(
                    item, evidence, item_negatives, pool,
                    target_tokens=target, depth=depth, seed=seed, counter=counter, prompt=prompt,
                    length_tolerance=config.length_tolerance,
                    instance_id=instance_id(item["item_id"], level, target, float(depth), "plain", fingerprint,
                                            prompt.id_salt),
                    token_cache=token_cache, normalized_cache=normalized_cache, verified=verified,
                ))
        frame = instances_frame(rows)
        del rows  # the frame holds its own copy of the strings: do not keep both while the caller writes
        yield frame
        del frame


def build_instances(
    items: pl.DataFrame,
    documents: pl.DataFrame,
    passages: pl.DataFrame,
    hard_negatives: pl.DataFrame,
    *,
    level: str,
    config: BenchmarkConfig,
    counter: TokenCounter,
    prompt_for: PromptFor | None = None,
) -> pl.DataFrame:
    """All instances of one length level as one frame (see :func:`iter_instance_batches`)."""
    batches = list(iter_instance_batches(items, documents, passages, hard_negatives, level=level, config=config,
                                         counter=counter, prompt_for=prompt_for))
    return pl.concat(batches) if batches else instances_frame([])
