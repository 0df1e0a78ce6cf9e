"""Filling a HELMET prompt to its level: depths, the exact-count search for the number of blocks,
cutting text at a token budget, and the error for a prompt that cannot be filled (spec helmet.md §9).

Lengths are prompt lengths in the config's tokenizer (``tokenizer``: cl100k_base by default; HELMET's own
is Llama-2's, ``hf:meta-llama/Llama-2-7b-hf``), counted as HELMET counts them (``COUNTS_SPECIAL_TOKENS``);
every prompt is filled to just under the level's target with an exact count on every row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lc_pipeline.construct.tokens import TokenCounter

# HELMET counts with the tokenizer's defaults (``tokenizer(text)``: Llama-2's BOS included) in its data-side
# cuts and filters (``truncate_llama2``, ``filter_length``); tiktoken encodings add no special tokens.
COUNTS_SPECIAL_TOKENS = True


def evenly_spaced_depths(n: int) -> tuple[float, ...]:
    """``n`` depths from 0 (start) to 1 (end), evenly spaced: HELMET's 6 depths are 0, 0.2, ... 1."""
    if n < 1:
        raise ValueError(f"n_depths must be >= 1, got {n}")
    return (0.0,) if n == 1 else tuple(round(i / (n - 1), 10) for i in range(n))


def depth_position(depth: float, k: int) -> int:
    """Index among ``k`` blocks of the gold block at ``depth`` (0 = first, 1 = last), half up."""
    return int(math.floor(depth * (k - 1) + 0.5)) if k > 1 else 0


@dataclass
class Fit:
    n: int
    prompt: str
    tokens: int


def fit(render: Callable[[int], str], costs: Sequence[int], base: int, target: int, counter: TokenCounter,
        floor: int = 0) -> Fit:
    """Largest n in [``floor``, len(costs)] whose ``render(n)`` is at most ``target`` tokens.

    Binary search with exact counts (the prompt grows with n), started from the additive
    estimate base + block costs, which is within a few tokens per block of the truth.
    """
    def count(n: int) -> Fit:
        prompt = render(n)
        return Fit(n, prompt, counter.count(prompt))

    used, est = base, 0
    for c in costs:
        if used + c > target:
            break
        used += c
        est += 1
    lo, hi = floor, len(costs)  # answer in [lo, hi]; lo is returned even when it does not fit
    best = count(max(floor, min(est, hi)))
    if best.tokens <= target:
        lo = best.n
    else:
        hi = best.n - 1
        best = count(lo)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        f = count(mid)
        if f.tokens <= target:
            lo, best = mid, f
        else:
            hi = mid - 1
    return best if best.n == lo else count(lo)


def cut_to_tokens(text: str, budget: int, counter: TokenCounter) -> str:
    """The longest word-boundary prefix of ``text`` with at most ``budget`` tokens (about)."""
    prefix = counter.prefix(text, budget)
    if prefix is text:
        return text
    cut = prefix.rstrip()
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space].rstrip() if space > 0 else cut


def shortfall(task: str, level: str, fitted: Fit, target: int, tolerance: float, what: str,
              available: int | None = None) -> None:
    """Raise ValueError when ``fitted`` is over the target or fills less than ``1 - tolerance`` of it (never a short
    or an overlong row), naming what to change.

    Over the target: even the fewest blocks the task needs, with its demonstrations, do not fit the level.
    ``available``: how many blocks there were to fill with; when ``fitted`` used fewer, the next one would pass the
    target (the blocks are coarse for the level: a ~140-token passage is 7 % of 2k), so more of them would not help.
    """
    if fitted.tokens > target:
        raise ValueError(
            f"task {task!r} at {level}: the prompt is {fitted.tokens} tokens with {fitted.n} {what}, the fewest "
            f"the task takes, over the level's {target}; lower helmet.shots (the demonstrations) or use a longer "
            f"level"
        )
    if fitted.tokens < target * (1 - tolerance):
        if available is not None and fitted.n < available:
            fix = (f"one more would pass the target: raise length_tolerance (now {tolerance:g}) or use a longer "
                   f"level")
        elif "passage" in what:
            fix = "raise hard_negatives_per_item and retrieval_top_k"
        else:
            fix = "need more source text"
        raise ValueError(
            f"task {task!r} at {level}: only {fitted.tokens} of {target} prompt tokens could be filled "
            f"({fitted.n} {what}); {fix}"
        )
