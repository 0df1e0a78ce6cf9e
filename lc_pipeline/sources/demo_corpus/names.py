"""Invented names: pronounceable, unique, never inside one another, never a real place or person.

Syllables, suffixes and the blocked words are in ``demo_corpus_vocabulary.yaml`` (``names``).
"""

from __future__ import annotations

import functools
import random
import re

from lc_pipeline.sources.demo_corpus.data import vocabulary

VOWEL_LETTERS = frozenset("aeiouy")


@functools.cache
def _blocked_patterns() -> tuple[frozenset[str], re.Pattern[str]]:
    # Entries of 3 letters or fewer must equal a whole name; longer ones block any name containing them.
    blocked = vocabulary().blocked
    return frozenset(w for w in blocked if len(w) <= 3), re.compile("|".join(w for w in blocked if len(w) > 3))


def blocked(word: str) -> bool:
    whole, part = _blocked_patterns()
    low = word.lower()
    return low in whole or part.search(low) is not None


def pronounceable(word: str) -> bool:
    consonants = vowels = 0
    for ch in word:
        if ch in VOWEL_LETTERS:
            consonants, vowels = 0, vowels + 1
        else:
            consonants, vowels = consonants + 1, 0
        if consonants > 2 or vowels > 2:
            return False
    return not any(v + v in word for v in "aeiouy")


class NameMaker:
    """Unique, mutually substring-free name tokens.

    Every title contains exactly one generated token (surname, place name, stem), and no
    token occurs inside another token, a given name or the fixed prose; hence no title is a
    substring of another title. Lookups use the set of all substrings of the tokens so far,
    which keeps generation linear in the number of names.
    """

    def __init__(self, rng: random.Random, reserved: str):
        self.rng = rng
        self.reserved = reserved
        self.tokens: set[str] = set()
        self.substrings: set[str] = set()
        v = vocabulary()
        self._onsets, self._vowels, self._codas, self._suffixes = v.onsets, v.vowels, v.codas, v.suffixes

    def _word(self, syllables: int, kind: str) -> str:
        r = self.rng
        word = ""
        for i in range(syllables):
            word += ("" if i == 0 and r.random() < 0.25 else r.choice(self._onsets)) + r.choice(self._vowels)
            if r.random() < (0.5 if i == syllables - 1 else 0.3):
                word += r.choice(self._codas)
        suffix = r.choice(self._suffixes[kind])
        if suffix and word[-1] in VOWEL_LETTERS and suffix[0] in VOWEL_LETTERS:
            word = word[:-1]  # "Vora" + "ine" -> "Vorine", not "Voraine"
        return word + suffix

    def make(self, kind: str) -> str:
        for _ in range(10_000):
            word = self._word(2 if self.rng.random() < 0.85 else 3, kind)
            if not (5 <= len(word) <= 11) or not pronounceable(word):
                continue
            if word in self.substrings or word in self.reserved or blocked(word):
                continue
            n = len(word)
            if any(word[i:j] in self.tokens for i in range(n) for j in range(i + 1, n + 1)):
                continue
            self.tokens.add(word)
            self.substrings.update(word[i:j] for i in range(n) for j in range(i + 1, n + 1))
            return word.capitalize()
        raise RuntimeError(f"could not generate a fresh {kind} name")  # unreachable below MAX_ENTITIES

    def given_names(self, kind: str, count: int) -> list[str]:
        # Given names repeat across people (as in life), so they stay out of the token
        # registry, but they are reserved: no generated token may hide inside one.
        out: list[str] = []
        while len(out) < count:
            word = self._word(1 if self.rng.random() < 0.5 else 2, kind)
            if 4 <= len(word) <= 8 and pronounceable(word) and word.capitalize() not in out \
                    and not blocked(word) and word not in self.reserved:
                out.append(word.capitalize())
        self.reserved += " | " + " | ".join(w.lower() for w in out)
        return out
