"""Which blocks an instance's context holds, and in what order (steps 1-3 of instance.py).

1. choose blocks: the evidence documents (whole), then hard negatives in retrieval-rank order
   (HELMET §2.2), then filler documents free of any gold answer in a seeded order, same-domain
   first (100-LongBench's greedy fill), while their estimated costs fit the budget;
2. plan the cut: one more filler, cut at a word (preferably sentence) boundary, closes the gap;
3. place evidence: distractors shuffled, the first evidence document where its start offset is
   closest to ``depth`` of the context.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections import defaultdict
from collections.abc import Sequence

from lc_pipeline.construct.assembly.counting import Block, Costs, index_extra
from lc_pipeline.construct.assembly.cutter import Cutter
from lc_pipeline.construct.assembly.documents import PassageScreen, answer_words
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.text import normalize_answer

MIN_CUT_TOKENS = 8  # a cut filler shorter than this is a scrap, not a document
_FILLER_CHUNK = 64  # fillers are counted this many at a time: a short level needs few
_DOC_ID = operator.itemgetter("doc_id")


def fail(item: dict, target: int, why: str) -> ValueError:
    return ValueError(f"item {item['item_id']!r}, target {target} tokens: {why}")


class Budget:
    """Tokens the blocks may take (the target less the prompt around the context), and those taken.

    Block numbers of 4+ digits cost extra tokens; numbering follows the block count.
    """

    def __init__(self, counter: TokenCounter, total: int) -> None:
        self.counter, self.total, self.used, self.n_blocks = counter, total, 0, 0

    def next_extra(self) -> int:
        return index_extra(self.counter, len(str(self.n_blocks + 1)))

    def fits(self, cost: int) -> bool:
        return self.used + cost + self.next_extra() <= self.total

    def add(self, cost: int) -> None:
        self.used += cost + self.next_extra()
        self.n_blocks += 1

    def remove(self, cost: int) -> None:
        self.n_blocks -= 1
        self.used -= cost + self.next_extra()


# --------------------------------------------------------------------------- 1. choose blocks


def evidence_blocks(item: dict, evidence_docs: Sequence[dict], costs: Costs, budget: Budget, base: int,
                     target: int) -> list[Block]:
    if not evidence_docs:
        raise fail(item, target, "no evidence documents")
    costs.ensure(evidence_docs, "doc_id")
    evidence = [Block(d["doc_id"], "evidence", d["title"], d["text"], costs.get(d, "doc_id")) for d in evidence_docs]
    for b in evidence:
        budget.add(b.cost)
    if budget.used > budget.total:
        raise fail(item, target, f"the evidence documents alone need about {budget.used + base} prompt tokens; "
                                  "use a longer level")
    return evidence


def take_hard_negatives(hard_negatives: Sequence[dict], evidence_ids: set[str], answers: list[str],
                         screen: PassageScreen, costs: Costs, budget: Budget) -> tuple[list[Block], list[dict]]:
    """Hard negatives in rank order while they fit (the best distractors first): (blocks, their passage rows)."""
    negatives, seen = [], set()
    words = answer_words(answers)
    normalized_answers = [normalize_answer(a) for a in answers]
    for h in hard_negatives:  # re-checked here: a leaked answer would make the item trivial
        if h["passage_id"] in seen or h["doc_id"] in evidence_ids or screen.contains_answer(
            h["passage_id"], h["text"], words, normalized_answers
        ):
            continue
        seen.add(h["passage_id"])
        negatives.append(h)
    costs.ensure(negatives, "passage_id")
    taken: list[Block] = []
    for h in negatives:
        c = costs.get(h, "passage_id")
        if not budget.fits(c):
            break
        taken.append(Block(h["passage_id"], "hard_negative", h["title"], h["text"], c))
        budget.add(c)
    return taken, negatives[: len(taken)]


def filler_order(fillers: Sequence[dict], left_out: set[str], rng: random.Random) -> list[dict]:
    """Fillers not ``left_out``, same-domain tier first, each tier in a seeded order."""
    tiers: dict[int, list[dict]] = defaultdict(list)
    for f in fillers:
        if f["doc_id"] not in left_out:
            tiers[f.get("tier", 0)].append(f)
    order = []
    for tier in sorted(tiers):  # same-domain first, then the fallback tier
        part = sorted(tiers[tier], key=_DOC_ID)  # the seeded shuffle must not depend on input order
        rng.shuffle(part)
        order += part
    return order


def take_fillers(order: list[dict], costs: Costs, budget: Budget, distractors: list[Block]) -> list[dict]:
    """Fillers in ``order`` while they fit, appended to ``distractors``; returns the ones left."""
    n_taken = 0
    for start in range(0, len(order), _FILLER_CHUNK):  # count lazily: a short level needs few fillers
        chunk = order[start : start + _FILLER_CHUNK]
        costs.ensure(chunk, "doc_id")
        for f in chunk:
            c = costs.get(f, "doc_id")
            if not budget.fits(c):
                return order[n_taken:]
            distractors.append(Block(f["doc_id"], "filler", f["title"], f["text"], c))
            budget.add(c)
            n_taken += 1
    return order[n_taken:]


# --------------------------------------------------------------------------- 2. cut


def _plan_cut(remaining: list[dict], costs: Costs, budget: Budget) -> tuple[dict, int] | None:
    """The first remaining filler longer than the gap whose cut would not be a scrap, and its body size."""
    gap = budget.total - budget.used - budget.next_extra()
    for f in remaining:
        body = gap - costs.block(f["title"], "")
        if body >= MIN_CUT_TOKENS and costs.get(f, "doc_id") > gap:
            return f, body
    return None


def choose_cut(distractors: list[Block], remaining: list[dict], order: list[dict], costs: Costs, budget: Budget,
                aim_slack: int) -> tuple[dict, int] | None:
    """The filler to cut and its body size. When the gap is too small for a real cut, give back the
    last block or two (``distractors``, ``remaining`` and ``budget`` change) and cut a longer document."""
    if not (budget.total - budget.used > aim_slack and remaining):
        return None
    cut_plan = _plan_cut(remaining, costs, budget)
    kept = (list(distractors), budget.used, list(remaining), budget.n_blocks)
    for _ in range(3):
        if cut_plan is not None or not distractors:
            break
        give_back = distractors.pop()
        budget.remove(give_back.cost)
        if give_back.kind == "filler":
            remaining.insert(0, next(f for f in order if f["doc_id"] == give_back.block_id))
        cut_plan = _plan_cut(remaining, costs, budget)
    if cut_plan is None:  # giving back did not help: keep the fuller context
        distractors[:], budget.used, remaining[:], budget.n_blocks = kept
    return cut_plan


def cut_filler(cut_plan: tuple[dict, int] | None, remaining: list[dict], distractors: list[Block], costs: Costs,
               counter: TokenCounter, aim_slack: int) -> tuple[Block | None, Cutter | None]:
    """The planned filler, cut to its body size, appended to ``distractors`` (and taken from ``remaining``)."""
    if cut_plan is None:
        return None, None
    row, body = cut_plan
    remaining.remove(row)
    cutter = Cutter(row, counter)
    text = cutter.cut(body, aim_slack)
    cut_block = Block(f"{row['doc_id']}:cut", "cut", row["title"], text, costs.block(row["title"], text))
    distractors.append(cut_block)
    return cut_block, cutter


# --------------------------------------------------------------------------- 3. place evidence


def place_evidence(rng: random.Random, distractors: list[Block], evidence: list[Block], depth: float) -> list[Block]:
    """Distractors shuffled, other evidence at random places, then the first evidence document where
    its start offset / context tokens is closest to ``depth`` (0 = first block, 1 = last block)."""
    rng.shuffle(distractors)
    sequence = list(distractors)
    for b in evidence[1:]:
        sequence.insert(rng.randint(0, len(sequence)), b)
    offsets = list(itertools.accumulate((b.cost for b in sequence), initial=0))
    desired = depth * offsets[-1]  # offsets[-1] = start of a last block
    k = min(range(len(offsets)), key=lambda i: (abs(offsets[i] - desired), i))
    sequence.insert(k, evidence[0])
    return sequence
