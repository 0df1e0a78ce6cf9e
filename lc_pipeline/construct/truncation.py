"""Middle truncation, as LongBench and LV-Eval do it.

A benchmark prompt is instruction + context + question. When it does not fit a model's
window, the *middle* (context) is cut: keeping the head and the tail keeps the
instructions and the question, so the model can still answer, only with less context
(spec: lveval.md §8.3, helmet.md §5.2).
"""

from __future__ import annotations

from collections.abc import Sequence


def middle_truncate(ids: Sequence[int], budget: int) -> tuple[list[int], bool]:
    """Keep the first ``budget // 2`` and the last ``budget - budget // 2`` tokens.

    Returns ``(ids, truncated)``; ``ids`` is returned whole (as a new list) when it fits.

    >>> middle_truncate([1, 2, 3, 4, 5, 6, 7], 5)
    ([1, 2, 5, 6, 7], True)
    >>> middle_truncate([1, 2, 3], 5)
    ([1, 2, 3], False)
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"budget must be an int, got {budget!r}")
    # A budget of 1 cannot keep both a head and a tail, so the question or the
    # instruction would silently disappear.
    if budget < 2:
        raise ValueError(f"middle truncation needs a budget of at least 2 tokens, got {budget}")
    ids = list(ids)
    if len(ids) <= budget:
        return ids, False
    head = budget // 2
    tail = budget - head
    return ids[:head] + ids[len(ids) - tail :], True
