"""Word/character length levels, sentence boundaries, LV-Eval mixing and the factrecall needle."""

from __future__ import annotations

import pytest

from lc_pipeline.construct.word_levels import (
    count_units,
    insert_sentence,
    level_units,
    mix_to_level,
    needle_depths,
    place_needle,
    record_length,
    sentence_boundaries,
)
from lc_pipeline.sources.demo_corpus import build_demo_corpus


def test_levels_count_words_for_english_and_characters_for_chinese():
    assert [level_units(lv) for lv in ("16k", "32k", "64k", "128k", "256k")] == [16_000, 32_000, 64_000, 128_000,
                                                                               256_000]
    assert count_units("Albert  Einstein was,\n a physicist.", "en") == 5  # punctuation rides on its word
    assert count_units("贾宝玉 说：\n“好。”", "zh") == 9  # punctuation counts, whitespace does not
    assert record_length("Who?", "A b c.", ["Dee"], "en") == 5
    with pytest.raises(ValueError, match="invalid length level '16000'"):
        level_units("16000")


def test_sentence_boundaries_skip_abbreviations_initials_and_headers():
    text = ("Document [1] (Title: St. Mary Inc.): Dr. Ostik was born in 1750. He met J. Smith! Did he? Yes.\n\n"
            "Document [2] (Title: Harbour): Another one. End.")
    cuts = sentence_boundaries(text, "en")
    assert [text[c - 4 : c] for c in cuts] == ["750.", "ith!", " he?", "Yes.", "one."]
    assert all(text.index("Inc.") > c or c > text.index("): Dr") for c in cuts)  # none inside the title


def test_chinese_boundaries_follow_closing_quotes():
    text = "宝玉说：“好。”然后走了。他笑了！最后"
    assert [text[:c] for c in sentence_boundaries(text, "zh")] == ["宝玉说：“好。”", "宝玉说：“好。”然后走了。",
                                                                   "宝玉说：“好。”然后走了。他笑了！"]


def test_insert_sentence_reports_the_offset_of_the_inserted_text():
    text = "One. Two."
    new, offset = insert_sentence(text, 4, "Fact here.", "en")
    assert new == "One. Fact here. Two." and new[offset:].startswith("Fact here.")
    new, offset = insert_sentence("甲。乙。", 2, "丙。", "zh")
    assert (new, offset) == ("甲。丙。乙。", 2)


def test_mixing_fills_to_the_level_and_shuffles_with_the_seed():
    documents, _ = build_demo_corpus(60, seed=3)
    texts = documents["text"].to_list()
    support, pool = texts[:1], texts[1:]
    mixed = mix_to_level(support, pool, 3_000, "en", seed=11)
    assert mixed.length >= 3_000 and mixed.length - 400 < 3_000  # whole documents: at most one overshoots
    assert mixed.kinds.count("support") == 1 and support[0] in mixed.units
    assert mix_to_level(support, pool, 3_000, "en", seed=11) == mixed
    assert mix_to_level(support, pool, 3_000, "en", seed=12).units != mixed.units
    with pytest.raises(ValueError, match="reaches only"):
        mix_to_level(support, pool[:2], 3_000, "en", seed=11)


def test_needle_at_evenly_spaced_sentence_boundaries():
    haystack = " ".join(f"Sentence number {i} ends here." for i in range(100))
    needle = "The lantern is kept in the blue tower."
    placed = list(place_needle(haystack, needle, 5, "en"))
    assert [p.depth for p, _ in placed] == needle_depths(5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [p.sentence_index for p, _ in placed] == [0, 25, 50, 75, 100]
    for p, context in placed:
        assert context[p.char_offset :].startswith(needle)
        assert context.replace(needle + " ", "", 1).replace(" " + needle, "", 1) == haystack
    assert needle_depths(1) == [0.5]
    assert needle_depths(200)[1] == pytest.approx(1 / 199)
