"""gather_bounded: how the OpenAI-compatible generator and the judge send their requests."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from lc_pipeline.generate.openai_backend import gather_bounded


def test_results_in_order_with_at_most_n_in_flight():
    in_flight, peak = 0, 0

    async def request(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01 * (5 - i))  # later requests answer first
        in_flight -= 1
        return i * i

    assert asyncio.run(gather_bounded([partial(request, i) for i in range(5)], 2)) == [0, 1, 4, 9, 16]
    assert peak == 2


def test_no_request_starts_after_one_failed():
    sent = []

    async def request(i: int) -> int:
        sent.append(i)
        await asyncio.sleep(0)
        if i == 1:
            raise RuntimeError("request 1: the server answered 500")
        return i

    with pytest.raises(RuntimeError, match="request 1"):
        asyncio.run(gather_bounded([partial(request, i) for i in range(4)], 1))
    # One at a time: request 2 waited for request 1's slot, and must not take it once 1 has failed.
    assert sent == [0, 1]
