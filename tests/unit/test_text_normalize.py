"""normalize_answer: SQuAD / LongBench normalization, the same strings as the per-character loop it replaced.

Construction ("contains no gold answer") and scoring (SubEM) both call it, so a faster version must
not change a single output: the loop below is the previous implementation, kept as the reference.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from lc_pipeline.text import contains_answer, normalize_answer

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_by_loop(s: str) -> str:
    """The previous normalize_answer: ASCII punctuation deleted one character at a time."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


TRICKY = [
    "",
    " ",
    "\t\n\r\x0b\x0c",
    "The Answer.",
    "a an the",
    "An apple, the end; a-the-an!",
    "U.S.A.",
    "the's they'll thee theatre atheist",
    "«Ünïcödé» — “curly quotes” and ‘single’ … ellipsis",
    "東京の川、大阪の橋。「引用」と（括弧）",
    "中文的标点：逗号，句号。问号？",
    "İstanbul ΣΊΣΥΦΟΣ ß Straße ﬁ ligature",  # lower() changes lengths and letters
    "full\u3000width\u00a0no-break\u2009thin spaces",
    "tab\tnew\nline  a\n the",
    "<|endoftext|> [1] {x} (y) @home #tag $5 %50 ^ & * _under_ ~tilde` |pipe| \\back/",
    "émigré the café a naïve",
    "1,234.56 vs 1234.56",
    "'quoted' \"double\" `tick`",
    "\u0301combining the\u0301 a\u0308",
    "🙂 the 🙃 a emoji",
]


@pytest.mark.parametrize("text", TRICKY)
def test_normalize_answer_same_as_the_loop(text):
    assert normalize_answer(text) == normalize_by_loop(text)


def test_normalize_answer_same_as_the_loop_on_random_strings():
    # Letters, ASCII punctuation, Unicode punctuation, CJK, whitespace of every kind, articles.
    alphabet = list(string.ascii_letters + string.digits + string.punctuation) + list(
        " \t\n\u3000\u00a0«»—–…“”‘’、。，：？！「」（）東京中文éÜßİΣ") + [" the ", " a ", " an ", "The", "AN"]
    rng = random.Random(10)
    for _ in range(2000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert normalize_answer(s) == normalize_by_loop(s), repr(s)


def test_normalize_answer_examples():
    assert normalize_answer("The  U.S.A.!") == "usa"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("Café «Noir»") == "café «noir»"  # only ASCII punctuation goes
    assert normalize_answer("東京、大阪。") == "東京、大阪。"
    assert normalize_answer("") == ""
    assert contains_answer("He was born in the U.S.A., in 1950.", ["usa"])
    assert not contains_answer("Nothing here.", ["the", ""])  # answers that normalize to nothing never match
