"""Length-controlled assembly of QA instances (HELMET RAG x 100-LongBench style).

One instance = the item's prompt (its task's QAPrompt; by default our QA prompt) around a
context of numbered document blocks:

* the item's evidence documents (always, whole);
* hard negatives: retrieved passages that contain no gold answer, in retrieval-rank order
  (HELMET §2.2), as many as fit;
* same-domain filler documents that contain no gold answer, in a seeded order, as many as
  fit (100-LongBench's greedy fill);
* one filler cut at a word (preferably sentence) boundary that closes the remaining gap.

The first evidence document is placed at the configured depth; the whole prompt is then
counted exactly and the cut filler lengthened/shortened until ``input_tokens`` sits just
below the target. An instance that cannot get within ``length_tolerance`` is an error,
never a silently short row.

Counting: each block is encoded once per level; a prompt's count (and each evidence block's
token offset) is the sum of its blocks' counts, which is exact for cl100k_base and a template
that cuts cleanly around the context (``counting.pieces_add_up``, ``counting.additive_layout``).
So no prompt is encoded to build a level; the first instance of each template is, as a check.

Modules, in the order an instance is made:

* ``items``: seeds, instance ids, the seeded choice of a level's items;
* ``documents``: documents by id and domain, the answer screens, filler pools;
* ``counting``: block costs, the additive-count proof, offsets read off an encoding;
* ``cutter``: the cut filler's word / sentence boundaries;
* ``selection``: choose blocks, plan the cut, place the evidence;
* ``instance``: fill to length, count, verify: :func:`assemble_instance`;
* ``level``: the items that fit, a level's instances in batches.
"""

from lc_pipeline.construct.assembly.documents import DocumentIndex, filler_pool
from lc_pipeline.construct.assembly.instance import (
    AIM,
    AIM_MAX_TOKENS,
    CORRECTION_ROUNDS,
    SUITE,
    assemble_instance,
)
from lc_pipeline.construct.assembly.items import derive_seed, instance_id, select_items
from lc_pipeline.construct.assembly.level import (
    BATCH_TOKENS,
    ITEMS_PER_BATCH,
    build_instances,
    fitting_items,
    items_per_batch_at,
    iter_instance_batches,
)
from lc_pipeline.construct.assembly.selection import MIN_CUT_TOKENS

__all__ = [
    "AIM",
    "AIM_MAX_TOKENS",
    "BATCH_TOKENS",
    "CORRECTION_ROUNDS",
    "ITEMS_PER_BATCH",
    "MIN_CUT_TOKENS",
    "SUITE",
    "DocumentIndex",
    "assemble_instance",
    "build_instances",
    "derive_seed",
    "filler_pool",
    "fitting_items",
    "instance_id",
    "items_per_batch_at",
    "iter_instance_batches",
    "select_items",
]
