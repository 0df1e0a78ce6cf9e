"""The assembly of one QA instance to a target prompt length (HELMET RAG x 100-LongBench fill).

Named steps, in order (:func:`assemble_instance`):

1. choose blocks (selection.py): evidence, hard negatives, fillers while their costs fit;
2. plan and make the cut filler that closes the gap (selection.py);
3. place evidence at the configured depth (selection.py);
4. fill to length: the prompt is counted exactly and the cut filler resized until
   ``input_tokens`` sits just below the target; an instance beyond ``length_tolerance`` is an
   error, never a silently short row;
5. count and verify: context tokens and each evidence block's token offset, added up from the
   blocks' counts where that is exact (counting.py), else read off the prompt's one encoding; an
   added-up instance is encoded whole as a check when asked (``verify`` / ``verified``).

The prompt around the context is the item's :class:`~lc_pipeline.construct.prompts.QAPrompt`.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence

import numpy as np

from lc_pipeline.construct.assembly.counting import (
    ESTIMATE_INDEX,
    Block,
    Costs,
    additive_layout,
    index_extra,
    offsets_from_encoding,
    pieces_add_up,
    verify_additive,
)
from lc_pipeline.construct.assembly.cutter import Cutter
from lc_pipeline.construct.assembly.documents import PassageScreen
from lc_pipeline.construct.assembly.selection import (
    MIN_CUT_TOKENS,
    Budget,
    choose_cut,
    cut_filler,
    evidence_blocks,
    fail,
    filler_order,
    place_evidence,
    take_fillers,
    take_hard_negatives,
)
from lc_pipeline.construct.prompts import QAPrompt, format_block, join_blocks
from lc_pipeline.construct.rows import instance_row
from lc_pipeline.construct.tokens import TokenCounter

SUITE = "qa"  # INSTANCES.suite of rows built here
AIM = 0.005  # aim for input_tokens in [target * (1 - AIM), target]: well inside +-1 %
AIM_MAX_TOKENS = 32  # ... and never more than this short: about one sentence
CORRECTION_ROUNDS = 6


class _LengthFit:
    """Step 4: the prompt's exact length as the cut filler is resized; keeps the best attempt (at or
    just below the target if possible, else the closest).

    Block i's tokens in the prompt are its count with index 1 and the separator, plus what a longer
    number adds. Where the pieces add up (counting.py) they sum to the exact prompt, so only the cut
    filler is re-counted as it is resized and no prompt is encoded; else each attempt is encoded.
    """

    def __init__(self, counter: TokenCounter, costs: Costs, sequence: list[Block], cut_block: Block | None,
                 base: int, around: tuple[str, str], target: int, additive: bool) -> None:
        self.counter, self.costs, self.sequence, self.cut_block = counter, costs, sequence, cut_block
        self.before, self.after = around
        self.target, self.additive = target, additive
        self.block_tokens = [b.cost + index_extra(counter, len(str(i))) for i, b in enumerate(sequence, start=1)]
        self.cut_at = next((i for i, b in enumerate(sequence) if b is cut_block), None)
        if cut_block is not None:
            self.block_tokens[self.cut_at] = 0  # counted by cut_tokens() for the current cut
        self.fixed_tokens = base + sum(self.block_tokens)
        self.best: tuple[tuple[int, int], int, str, np.ndarray | None] | None = None
        self.tried: set[str] = set()

    def render(self) -> tuple[str, str]:
        context = join_blocks(format_block(i, b.title, b.text) for i, b in enumerate(self.sequence, start=1))
        return context, self.before + context + self.after

    def cut_tokens(self) -> int:
        assert self.cut_block is not None and self.cut_at is not None
        return self.costs.block(self.cut_block.title, self.cut_block.text) + index_extra(
            self.counter, len(str(self.cut_at + 1)))

    def measure(self) -> int:
        ids = None
        if self.additive:
            n = self.fixed_tokens + (self.cut_tokens() if self.cut_block is not None else 0)
        else:
            # = encode_ordinary (no special token allowed, none refused), as a numpy array: kept,
            # the block offsets come from the same encoding.
            ids = self.counter.encoding.encode_to_numpy(self.render()[1], allowed_special=set(), disallowed_special=())
            n = len(ids)
        score = (0, self.target - n) if n <= self.target else (1, n - self.target)
        if self.best is None or score < self.best[0]:
            self.best = (score, n, self.cut_block.text if self.cut_block else "", ids)
        if self.cut_block is not None:
            self.tried.add(self.cut_block.text)
        return n

    def run(self, cutter: Cutter | None, aim_slack: int) -> tuple[int, np.ndarray | None]:
        """Measure, resize the cut toward the target, settle on the best cut: (input tokens, prompt ids or None)."""
        cut_block, n = self.cut_block, self.measure()
        for _ in range(CORRECTION_ROUNDS):
            delta = self.target - n
            if 0 <= delta <= aim_slack or cut_block is None:
                break
            body = self.counter.count(cut_block.text) + delta
            if body < MIN_CUT_TOKENS:
                break
            new_text = cutter.cut(body, aim_slack)
            if new_text in self.tried:  # a sentence end keeps us short: take a word end
                new_text = cutter.cut(body, 0)
            if new_text in self.tried:
                break
            cut_block.text = new_text
            n = self.measure()
        assert self.best is not None
        if cut_block is not None and self.best[0][0] == 0 and self.best[0][1] > aim_slack:
            # Still short (token/word granularity made the resizing oscillate): walk word by
            # word from the best cut while the prompt stays within the target.
            cut_block.text = self.best[2]
            i = bisect.bisect_right(cutter.word_ends, len(cut_block.text))
            for end in cutter.word_ends[i : i + 8]:
                cut_block.text = cutter.row["text"][:end]
                if self.measure() > self.target:
                    break
        _, input_tokens, best_cut_text, prompt_ids = self.best
        if cut_block is not None:  # the resizing may have stopped on another attempt than the best
            cut_block.text = best_cut_text
            self.block_tokens[self.cut_at] = self.cut_tokens()
        return input_tokens, prompt_ids


def _check_length(item: dict, target: int, input_tokens: int, remaining: list[dict], length_tolerance: float) -> None:
    error = abs(input_tokens - target) / target
    if error > length_tolerance:
        if input_tokens < target and not remaining:
            why = "the distractor pool is exhausted (not enough hard negatives and same-domain fillers)"
        elif input_tokens > target:
            why = "the prompt cannot be shortened to the target"
        else:
            why = "no filler document could close the gap"
        raise fail(item, target, f"{why}: got {input_tokens} prompt tokens, {error:.1%} off, "
                                 f"beyond length_tolerance {length_tolerance:.1%}")


def _count_offsets(fit: _LengthFit, item: dict, context: str, prompt: str, prompt_ids: np.ndarray | None,
                   input_tokens: int, ev_ids: list[str], verify: bool) -> tuple[int, list[int]]:
    """Step 5: (context tokens, each evidence block's token offset in the context), exact.

    A block starts a new pre-token (it follows "\\n\\n"), so the prompt's tokens from the context start
    to a block start are the tokens of that context prefix alone. The context alone differs only in
    its last block, whose end merges with the "\\n\\n" after it in the prompt: that block is encoded alone.
    """
    counter, sequence = fit.counter, fit.sequence
    last_block = len(sequence) - 1
    last_alone = counter.count(format_block(last_block + 1, sequence[-1].title, sequence[-1].text))
    context_start = len(fit.before)
    if not fit.additive:
        return offsets_from_encoding(counter, sequence, context, prompt, prompt_ids, context_start, ev_ids, last_alone)
    before = list(itertools.accumulate(fit.block_tokens, initial=0))  # context tokens before each block
    starts = {b.block_id: before[i] for i, b in enumerate(sequence) if b.kind == "evidence"}
    context_tokens = before[last_block] + last_alone
    evidence_offsets = [starts[d] for d in ev_ids]
    if verify:
        verify_additive(counter, item, sequence, context, prompt, context_start, ev_ids, last_alone,
                        (input_tokens, context_tokens, evidence_offsets))
    return context_tokens, evidence_offsets


def assemble_instance(
    item: dict,
    evidence_docs: Sequence[dict],
    hard_negatives: Sequence[dict],
    fillers: Sequence[dict],
    *,
    target_tokens: int,
    depth: float,
    seed: int,
    counter: TokenCounter,
    prompt: QAPrompt,
    length_tolerance: float,
    variant: str = "plain",
    instance_id: str | None = None,
    token_cache: dict[str, int] | None = None,
    normalized_cache: PassageScreen | None = None,
    verify: bool = False,
    verified: set[str] | None = None,
) -> dict:
    """One INSTANCES row whose ``prompt`` (the item's ``prompt`` rendered) is ``target_tokens`` long.

    ``evidence_docs`` / ``fillers``: document rows (doc_id, title, text); ``hard_negatives``:
    passage rows (passage_id, doc_id, title, text) in rank order. ``seed`` drives every
    random choice; the evidence position depends on ``depth`` alone, so instances that
    differ only in depth have the same distractors in the same order. ``instance_id``: the row's
    id (None: left null for the caller). ``token_cache`` (block id -> tokens) and
    ``normalized_cache`` (passages' screened and normalized text, for the answer check) let many
    instances share that work. Token counts are added up from the blocks' counts where that is
    exact (counting.py); ``verify`` also encodes the whole prompt and raises if the two disagree,
    as does an instance whose template is not yet in ``verified`` (the templates checked so far,
    which it then joins).
    """
    target = int(target_tokens)
    answers = list(item["answers"])
    rng = random.Random(seed)
    costs = Costs(counter, token_cache)
    around = prompt.around(item["question"])
    # Prompt tokens outside the context: the template with the question (see counting.Costs for additivity).
    base = counter.count(around[0] + format_block(ESTIMATE_INDEX, "x", "x.") + around[1]) - costs.block("x", "x.")
    budget = Budget(counter, target - base)  # tokens available to the blocks
    aim_slack = max(1, min(int(target * AIM), AIM_MAX_TOKENS))

    evidence_ids = {d["doc_id"] for d in evidence_docs}
    evidence = evidence_blocks(item, evidence_docs, costs, budget, base, target)
    screen = PassageScreen() if normalized_cache is None else normalized_cache
    distractors, negatives = take_hard_negatives(hard_negatives, evidence_ids, answers, screen, costs, budget)
    # A document that lent a passage to the hard negatives is left out so no text appears twice.
    order = filler_order(fillers, evidence_ids | {h["doc_id"] for h in negatives}, rng)
    remaining = take_fillers(order, costs, budget, distractors)
    cut_plan = choose_cut(distractors, remaining, order, costs, budget, aim_slack)
    cut_block, cutter = cut_filler(cut_plan, remaining, distractors, costs, counter, aim_slack)
    sequence = place_evidence(rng, distractors, evidence, depth)

    additive = pieces_add_up(counter.encoding) and additive_layout(*around)
    fit = _LengthFit(counter, costs, sequence, cut_block, base, around, target, additive)
    input_tokens, prompt_ids = fit.run(cutter, aim_slack)
    _check_length(item, target, input_tokens, remaining, length_tolerance)
    context, prompt_text = fit.render()
    ev_ids = [d["doc_id"] for d in evidence_docs]
    check = verify or (verified is not None and prompt.template not in verified)
    context_tokens, evidence_offsets = _count_offsets(fit, item, context, prompt_text, prompt_ids, input_tokens,
                                                      ev_ids, check)
    if additive and verified is not None:
        verified.add(prompt.template)
    return instance_row(
        instance_id=instance_id, item_id=item["item_id"], source=item["source"], suite=SUITE, task=item["task"],
        category=item["category"], language=item["language"], variant=variant, depth=float(depth),
        evidence_depths=[c / context_tokens for c in evidence_offsets], question=item["question"], answers=answers,
        answer_keywords=list(item["answer_keywords"] or []), evidence_doc_ids=ev_ids,
        context_doc_ids=[b.block_id for b in sequence],
        n_hard_negatives=sum(b.kind == "hard_negative" for b in sequence),
        n_filler_documents=sum(b.kind in ("filler", "cut") for b in sequence),
        context=context, prompt=prompt_text, tokenizer=counter.name, target_tokens=target,
        input_tokens=input_tokens, context_tokens=context_tokens, max_new_tokens=int(prompt.max_new_tokens),
    )
