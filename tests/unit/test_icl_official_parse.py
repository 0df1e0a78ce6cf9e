"""HE9: HELMET's ICL reply parse under its official protocol (``load_icl``'s post-process: ``parse_output`` with the
``label:`` prefix, then normalized exact match against the label), against ours (the first integer)."""

from __future__ import annotations

from lc_pipeline.benchmarks.helmet.metrics import icl_label, icl_official_parse


def test_the_whole_parsed_line_must_be_the_label():
    # completion mode: "label:" prepended, the rest of its line is the answer
    assert icl_label(" 3 (refund)", ["3"], official=True) == 0.0
    assert icl_label(" 3 (refund)", ["3"]) == 1.0  # ours: the first integer
    assert icl_label(" 3\nlabel: 4", ["3"], official=True) == 1.0
    assert icl_label(" 3.", ["3"], official=True) == 1.0  # SQuAD normalization drops the punctuation


def test_a_repeated_prefix_is_stripped_once_as_parse_output_does():
    assert icl_official_parse("label: label: 3") == "label: 3"  # completion: prefix + output, one strip
    assert icl_label("label: label: 3", ["3"], official=True) == 0.0
    assert icl_official_parse("label: label: 3", chat=True) == "3"
    assert icl_official_parse("no prefix here\nlabel: 5", chat=True) == "5"
    assert icl_official_parse("7 it is\nmore", chat=True) == "7 it is"  # no prefix: the first line
