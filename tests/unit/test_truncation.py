import pytest

from lc_pipeline.construct.truncation import middle_truncate


def test_fitting_input_is_returned_whole():
    assert middle_truncate([1, 2, 3], 3) == ([1, 2, 3], False)
    assert middle_truncate([], 5) == ([], False)


def test_keeps_head_and_tail_halves():
    ids = list(range(10))
    assert middle_truncate(ids, 4) == ([0, 1, 8, 9], True)


def test_odd_budget_gives_the_extra_token_to_the_tail():
    # The question sits at the end of a prompt, so the tail gets the spare token.
    assert middle_truncate(list(range(10)), 5) == ([0, 1, 7, 8, 9], True)


def test_result_is_exactly_the_budget():
    for n in range(2, 40):
        for budget in range(2, n):
            kept, truncated = middle_truncate(range(n), budget)
            assert truncated and len(kept) == budget


def test_returns_a_new_list():
    ids = [1, 2, 3]
    kept, _ = middle_truncate(ids, 10)
    kept.append(4)
    assert ids == [1, 2, 3]


@pytest.mark.parametrize("budget", [-1, 0, 1])
def test_budget_below_two_is_refused(budget):
    with pytest.raises(ValueError, match="at least 2"):
        middle_truncate([1, 2, 3], budget)
