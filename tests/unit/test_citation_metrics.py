"""ALCE citation recall and precision (spec helmet.md §3) on worked examples, with a rule-based entailment judge:
a hypothesis is entailed when each of its facts (the parts joined by " and ") is a sentence of the premise. The
real NLI backends are tested in test_nli_backends.py and, served by llama.cpp, in tests/integration."""

from __future__ import annotations

import json

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.citations import (
    NO_VERDICT,
    CitationInput,
    Passage,
    Verdict,
    citation_frame,
    plan_citations,
    regex_sentences,
    remove_citations,
    score_output,
    score_outputs,
    split_sentences,
)
from lc_pipeline.score.metric_scores import score_frame, score_id
from lc_pipeline.tasks.catalog import load_catalog
from lc_pipeline.tasks.registry import METRICS

PASSAGES = [
    Passage("Eiffel Tower", "The Eiffel Tower is in Paris. The tower is made of iron."),
    Passage("Louvre", "The Louvre is a museum."),
    Passage("Rome", "Rome is in Italy."),
    Passage("Paris landmarks", "The Eiffel Tower is in Paris."),
]


def facts(text: str) -> set[str]:
    return {f.strip().rstrip(".").lower() for f in text.replace(". ", " and ").split(" and ") if f.strip()}


class RuleJudge:
    """Entailed iff every fact of the hypothesis is a sentence of the premise's passages; records each question."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, premise: str, hypothesis: str) -> Verdict:
        self.asked.append((premise, hypothesis))
        known = set().union(*(facts(line) for line in premise.split("\n") if not line.startswith("Title: ")))
        ok = facts(hypothesis) <= known
        return Verdict(ok, "ok", "1" if ok else "0")


def asqa(output: str, judge=None):
    return score_output(output, PASSAGES, "asqa", judge or RuleJudge())


def test_a_sentence_citing_a_supporting_passage_is_recalled_and_its_citation_precise():
    judge = RuleJudge()
    result = asqa("The Eiffel Tower is in Paris [1].", judge)
    assert (result.recall, result.precision, result.n_citations) == (1.0, 1.0, 1)
    # One question: the cited passage as "Title: ...\n..." against the sentence without its citation.
    assert judge.asked == [("Title: Eiffel Tower\nThe Eiffel Tower is in Paris. The tower is made of iron.",
                            "The Eiffel Tower is in Paris.")]
    [check] = result.checks
    assert (check.step, check.cited, check.entailed, check.status) == ("joint", [1], True, "ok")


def test_a_sentence_citing_a_passage_that_does_not_support_it_scores_zero_on_both():
    result = asqa("The Louvre is a museum [3].")
    assert (result.recall, result.precision, result.n_citations) == (0.0, 0.0, 1)
    assert result.checks[0].entailed is False


def test_a_sentence_without_citation_scores_zero_without_asking_the_judge():
    judge = RuleJudge()
    result = asqa("The Eiffel Tower is in Paris.", judge)
    assert judge.asked == []
    assert (result.recall, result.precision, result.n_citations) == (0.0, 0.0, 0)
    assert result.checks[0].status == "no_citation" and not result.checks[0].asked


def test_recall_is_the_share_of_supported_sentences_and_precision_the_share_of_precise_citations():
    result = asqa("The Eiffel Tower is in Paris [1]. The Louvre is a museum [3]. The Louvre is a museum.")
    assert result.n_sentences == 3
    assert result.recall == pytest.approx(1 / 3)
    assert result.precision == pytest.approx(1 / 2)  # the uncited sentence counts no citation


def test_a_redundant_citation_that_is_not_needed_is_an_over_citation():
    # [1] supports the sentence; [3] adds nothing: joint entailed, [3] alone not, and without [3] still entailed.
    judge = RuleJudge()
    result = asqa("The Eiffel Tower is in Paris [1][3].", judge)
    assert result.recall == 1.0 and result.precision == pytest.approx(1 / 2)
    steps = [(c.step, c.doc, c.premise_ids, c.entailed) for c in result.checks]
    assert steps == [("joint", None, [1, 3], True), ("alone", 1, [1], True),
                     ("alone", 3, [3], False), ("without", 3, [1], True)]


def test_two_citations_each_supporting_the_sentence_alone_are_both_precise():
    # ALCE: a citation is precise when its passage alone entails the sentence, even if another one does too.
    result = asqa("The Eiffel Tower is in Paris [1][4].")
    assert (result.recall, result.precision) == (1.0, 1.0)
    assert [c.step for c in result.checks] == ["joint", "alone", "alone"]  # no leave-one-out needed


def test_citations_needed_together_are_both_precise():
    # Neither passage alone supports both facts, and removing either breaks the support.
    result = asqa("The tower is made of iron and the Louvre is a museum [1][2].")
    assert (result.recall, result.precision) == (1.0, 1.0)
    assert [(c.step, c.doc, c.entailed) for c in result.checks] == [
        ("joint", None, True), ("alone", 1, False), ("without", 1, False), ("alone", 2, False),
        ("without", 2, False)]


def test_several_citations_that_do_not_support_the_sentence_together_count_zero_of_their_number():
    result = asqa("The Louvre is in Rome [2][3].")
    assert (result.recall, result.precision, result.n_citations) == (0.0, 0.0, 2)
    assert [c.step for c in result.checks] == ["joint"]


def test_out_of_range_citations_score_zero_and_count_no_citation():
    judge = RuleJudge()
    for output in ("The Eiffel Tower is in Paris [1][7].", "The Eiffel Tower is in Paris [0]."):
        result = asqa(output, judge)
        assert (result.recall, result.precision, result.n_citations) == (0.0, 0.0, 0)
        assert result.checks[0].status == "out_of_range"
    assert judge.asked == []


def test_at_most_three_citations_are_read():
    judge = RuleJudge()
    result = asqa("The Eiffel Tower is in Paris [1][2][3][4].", judge)
    assert result.n_citations == 3 and result.checks[0].cited == [1, 2, 3]
    assert judge.asked[0][0].count("Title: ") == 3


def test_an_unreadable_verdict_counts_as_not_entailed_and_is_recorded():
    def unsure(premise: str, hypothesis: str) -> Verdict:
        return Verdict(None, NO_VERDICT, "I cannot tell")

    result = asqa("The Eiffel Tower is in Paris [1].", unsure)
    assert (result.recall, result.precision) == (0.0, 0.0)
    assert (result.checks[0].status, result.checks[0].raw) == (NO_VERDICT, "I cannot tell")


def test_an_asqa_output_without_sentences_has_no_score():
    result = asqa("  [1]  ")
    assert (result.recall, result.precision, result.n_sentences) == (None, None, 0)


def test_qampari_items_are_sentences_prefixed_by_the_question():
    judge = RuleJudge()
    result = score_output("Paris [1], Lyon [2], Nice.", PASSAGES, "qampari", judge,
                          question="Which cities are in France?")
    assert [c.hypothesis for c in result.checks] == ["Which cities are in France? Paris",
                                                     "Which cities are in France? Lyon",
                                                     "Which cities are in France? Nice"]
    assert result.n_sentences == 3 and result.checks[2].status == "no_citation"
    assert split_sentences("A [1], B [2].", "qampari", "Q?") == ("qampari.items", ["Q? A [1]", "Q? B [2]"])


def test_sentences_are_split_and_short_ones_dropped():
    name, sentences = split_sentences("The tower is in Paris [1].\nDr. Smith built it [2]. [3]", "asqa")
    assert name in ("nltk.punkt", "regex")
    assert sentences == ["The tower is in Paris [1].", "Dr. Smith built it [2]."]  # "[3]" is under 5 characters
    assert regex_sentences("J. R. R. Tolkien wrote it, e.g. in 1937 [1]. It sold well! Did it?") == [
        "J. R. R. Tolkien wrote it, e.g. in 1937 [1].", "It sold well!", "Did it?"]


def test_citations_are_removed_from_the_hypothesis_as_alce_does():
    assert remove_citations("Paris is big [1][2] | and old [3].").strip() == "Paris is big and old."


def test_scoring_in_rounds_asks_each_question_once_and_gives_the_same_numbers():
    outputs = ["The Eiffel Tower is in Paris [1][3]. The Louvre is a museum [2].",
               "The tower is made of iron and the Louvre is a museum [1][2].", "The Eiffel Tower is in Paris [1]."]
    judge = RuleJudge()
    rounds: list[int] = []

    def many(pairs):
        rounds.append(len(pairs))
        return [judge(p, h) for p, h in pairs]

    batched = score_outputs([CitationInput(o, tuple(PASSAGES), "asqa") for o in outputs], many)
    one_by_one = [asqa(o) for o in outputs]
    assert [(r.recall, r.precision) for r in batched] == [(r.recall, r.precision) for r in one_by_one]
    # Round 1: the 4 distinct joint checks; round 2: the 3 passages alone not yet asked. Every leave-one-out
    # premise here is a question already answered (one passage), so no third round is needed.
    assert rounds == [4, 3]
    assert len(judge.asked) == len(set(judge.asked))  # the repeated joint check of output 1 and 3 asked once


# --------------------------------------------------------------------------- rows, registry, metric_scores

TASK_FILE = """\
benchmark: citetest
tasks:
- name: asqa_like
  category: Cite
  builder: {name: helmet, options: {kind: rag}}
  prompt: "{context}\\n\\nQuestion: {question}"
  max_new_tokens: 300
  truncation: end_of_context
  language: en
  metrics:
  - {name: helmet.subem}
  - {name: alce.citation_recall, options: {style: asqa}}
  - {name: alce.citation_precision, options: {style: asqa}}
  aggregation: {group: Cite}
"""


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "cite.yaml"
    path.write_text(TASK_FILE)
    return load_catalog([path])


def frames():
    fields = {"passages": [{"title": p.title, "text": p.text} for p in PASSAGES], "style": "asqa",
              "question": "Where is the Eiffel Tower?"}
    instances = pl.DataFrame({
        "instance_id": ["i1", "i2"], "item_id": ["a", "b"], "benchmark": ["citetest"] * 2,
        "task": ["asqa_like"] * 2, "category": ["Cite"] * 2, "depth": [0.0, 0.0], "answers": [["Paris"]] * 2,
        "question": ["Where is the Eiffel Tower?"] * 2, "record_fields": [json.dumps(fields), json.dumps(fields)]})
    generations = pl.DataFrame({"generation_id": ["g1", "g2"], "instance_id": ["i1", "i2"],
                                "output": ["The Eiffel Tower is in Paris [1][3].", ""]})
    return generations, instances


def test_the_citation_metrics_are_registered_as_needing_an_nli_judge_and_metric_scores_skips_them(catalog):
    assert METRICS.get("alce.citation_recall").label == "citation_rec"
    assert METRICS.get("alce.citation_precision").label == "citation_prec"
    assert {METRICS.get(n).needs for n in ("alce.citation_recall", "alce.citation_precision")} == {"nli"}
    generations, instances = frames()
    scores = score_frame(generations, instances, catalog)
    assert set(scores["metric"]) == {"helmet"}  # helmet.subem; the NLI metrics are citation_scores' rows


def test_citation_rows_record_each_metric_with_its_checks_and_parse_status(catalog):
    generations, instances = frames()
    items = plan_citations(generations, instances, catalog)
    assert [i.labels for i in items] == [("citation_rec", "citation_prec")] * 2
    assert items[0].input.question == "Where is the Eiffel Tower?" and len(items[0].input.passages) == 4
    judge = RuleJudge()
    results = score_outputs([i.input for i in items], lambda pairs: [judge(p, h) for p, h in pairs])
    rows = citation_frame(items, results, "rule:test")
    assert rows.schema == schemas.CITATION_SCORES and rows.height == 4
    g1 = {r["metric"]: r for r in rows.filter(pl.col("generation_id") == "g1").iter_rows(named=True)}
    assert (g1["citation_rec"]["score"], g1["citation_prec"]["score"]) == (1.0, 0.5)
    assert g1["citation_rec"]["score_id"] == score_id("g1", "citation_rec")
    assert (g1["citation_rec"]["n_checks"], g1["citation_prec"]["n_checks"]) == (1, 4)
    assert [c["step"] for c in json.loads(g1["citation_prec"]["checks"])] == ["joint", "alone", "alone", "without"]
    assert {r["parse_status"] for r in g1.values()} == {"ok"} and {r["nli_backend"] for r in g1.values()} == {
        "rule:test"}
    g2 = rows.filter(pl.col("generation_id") == "g2")
    assert g2["score"].null_count() == 2 and set(g2["parse_status"]) == {"no_sentences"}


def test_an_unparsed_verdict_marks_the_row(catalog):
    generations, instances = frames()
    items = plan_citations(generations.head(1), instances, catalog)
    results = score_outputs([i.input for i in items], lambda pairs: [Verdict(None, NO_VERDICT, "hmm")] * len(pairs))
    rows = citation_frame(items, results, "rule:test")
    assert set(rows["parse_status"]) == {NO_VERDICT} and set(rows["n_unparsed"]) == {1}
    assert set(rows["score"]) == {0.0}


def test_an_instance_without_passages_is_an_error_naming_the_generation_and_field(catalog):
    generations, instances = frames()
    bad = instances.with_columns(record_fields=pl.lit('{"style": "asqa"}'))
    with pytest.raises(ValueError, match=r"generation 'g1'.*record_fields.passages"):
        plan_citations(generations, bad, catalog)
