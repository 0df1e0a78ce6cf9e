"""LV-Eval's keyword-recall metric: the spec's worked examples (§7.5) in both variants, the
per-dataset rules and the aggregation (§7.6)."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline.score.keyword_recall import (
    BLACKLIST_EN,
    BLACKLIST_ZH,
    ablation_table,
    dataset_rule,
    dataset_score,
    keyword_recall,
    level_score,
    keyword_recall_score,
    tokens,
)

# Spec §7.5: (dataset, prediction, gold answer, keywords, code value, paper value).
WORKED_EXAMPLES = [
    ("multifieldqa_en_mixup",
     "There is no mention of Martin or independent publishing of digital books in the passage. The passage appears "
     "to be about a research paper on contour completion using deep structure priors.",
     "Martin began independent publishing her books as digital books in 2020.", "2020", 0.0, 0.0),
    ("multifieldqa_en_mixup", "For services to Medicine and to the community in the Cayman Islands.",
     "For his services to music.", "services to music", 0.4, 0.2857),
    ("multifieldqa_en_mixup", "Low mechanical flexibility.", "Increased mechanical flexibility.",
     "Increased mechanical flexibility.", 0.6667, 0.6667),
    ("multifieldqa_zh_mixup", "根据文章26中的内容，电影《毕业风暴》的导演是提莫·贝克曼贝托夫（TimurBekmambetov）。",
     "《毕业风暴》的导演是罗马尼亚导演克里斯汀穆基。", "克里斯汀穆基", 0.0, 0.0),
    ("hotpotwikiqa_mixup", "CNN is all you need", "Attention is all you need", "Attention", 0.0, 0.0),
    ("hotpotwikiqa_mixup", "Attention matters", "Attention is all you need", "Attention", 0.2857, 0.3333),
    ("hotpotwikiqa_mixup",
     "The director of the film was Palaniyaandi Neelakantan, who died on 4 November 2003 in Chennai.",
     "4 November 2003", "4 November 2003", 0.3529, 0.5),
    ("factrecall_en", "David Beckham.", "Ludwig Beethoven", None, 0.0, 0.0),
    ("factrecall_en", "Ludwig Beethoven.", "Ludwig Beethoven", None, 1.0, 1.0),
]


@pytest.mark.parametrize("variant", ["code", "paper"])
@pytest.mark.parametrize("example", WORKED_EXAMPLES, ids=[f"example{i}" for i in range(1, 10)])
def test_spec_worked_examples(example, variant):
    dataset, prediction, gold, keywords, code, paper = example
    expected = code if variant == "code" else paper
    assert round(keyword_recall_score(dataset, prediction, [gold], keywords, variant), 4) == expected


def test_example_2_recall_differs_because_code_drops_blacklisted_matches():
    pred = "For services to Medicine and to the community in the Cayman Islands."
    assert keyword_recall(pred, "services to music", "en", "code") == pytest.approx(1 / 3)  # 'to' is blacklisted
    assert keyword_recall(pred, "services to music", "en", "paper") == pytest.approx(2 / 3)


def test_code_variant_is_the_default_and_plain_f1_differs_from_the_gated_score():
    pred, gold = "CNN is all you need", "Attention is all you need"
    assert keyword_recall_score("hotpotwikiqa_mixup", pred, [gold], "Attention") == 0.0
    assert keyword_recall_score("factrecall_en", pred, [gold]) == pytest.approx(0.8)  # plain F1: no gate


def test_thresholds_are_swapped_between_variants_and_compare_differently():
    # English keyword recall of exactly 1/5 = 0.2: passes the code's `>= 0.2`, fails the paper's `> 0.4`.
    gold = keywords = "alpha beta gamma delta epsilon"
    assert keyword_recall_score("hotpotwikiqa_mixup", "alpha", [gold], keywords, "code") > 0
    assert keyword_recall_score("hotpotwikiqa_mixup", "alpha", [gold], keywords, "paper") == 0.0
    assert keyword_recall_score("hotpotwikiqa_mixup", "alpha beta gamma", [gold], keywords, "paper") > 0  # 0.6 > 0.4


def test_only_the_first_gold_answer_is_scored():
    assert keyword_recall_score("factrecall_en", "Beethoven", ["Ludwig van Mozart", "Beethoven"]) == 0.0


def test_cmrc_uses_the_gold_answer_as_keywords_in_code_and_a_blacklist_f1_in_paper():
    gold = "罗马尼亚导演克里斯汀穆基"
    assert keyword_recall_score("cmrc_mixup", "导演是提莫", [gold], None, "code") == 0.0  # gate on gold tokens
    # Paper: no gate; F1 after dropping blacklisted tokens ('是').
    assert keyword_recall_score("cmrc_mixup", "导演是提莫", [gold], None, "paper") > 0


def test_a_cmrc_record_that_carries_answer_keywords_is_gated_on_them_as_the_authors_code_does():
    # metrics.qa_f1_zh_score_with_gold_ans: `if not gold_ans: gold_ans = ground_truth`, so a record's own
    # answer_keywords (the released gold_ans) replace the gold answer as the stage-1 keywords.
    gold, keywords = "《毕业风暴》的导演是罗马尼亚导演克里斯汀穆基", "克里斯汀穆基"
    # The name alone: 3 of the answer's 11 tokens (recall 0.27 < 0.4) but every keyword token.
    assert keyword_recall_score("cmrc_mixup", "克里斯汀穆基", [gold], None) == 0.0
    assert keyword_recall_score("cmrc_mixup", "克里斯汀穆基", [gold], keywords) == pytest.approx(3 / 7)  # F1: p 1, r 3/11
    assert keyword_recall_score("cmrc_mixup", "克里斯汀穆基", [gold], [keywords]) == pytest.approx(3 / 7)  # our list form
    # The other way: 5 of the answer's tokens pass the answer's gate, none of the keywords.
    wrong = "毕业风暴的导演是罗马尼亚导演"
    assert keyword_recall_score("cmrc_mixup", wrong, [gold], None) > 0
    assert keyword_recall_score("cmrc_mixup", wrong, [gold], keywords) == 0.0
    # Blank or absent keywords fall back to the answer; the paper variant never gates cmrc.
    assert keyword_recall_score("cmrc_mixup", wrong, [gold], []) == keyword_recall_score("cmrc_mixup", wrong, [gold], [""]) > 0
    assert keyword_recall_score("cmrc_mixup", wrong, [gold], keywords, "paper") > 0


def test_dureader_uses_rouge_l_on_blacklist_filtered_tokens():
    gold = "体验服是逆战拿来测试新模式的。"
    assert keyword_recall_score("dureader_mixup", gold, [gold]) == pytest.approx(1.0, abs=1e-6)
    assert keyword_recall_score("dureader_mixup", "", [gold]) == 0.0  # rouge raises on empty: 0 like the release
    # Blacklisted tokens alone ("的", "是") match nothing.
    assert keyword_recall_score("dureader_mixup", "的是", [gold]) == 0.0


def test_model_copying_a_confusing_fact_scores_zero():
    # LV-Eval's factrecall: the confusing fact names David Beckham; the answer is Ludwig Beethoven.
    fact = "David Beckham is widely acclaimed as the foundational figure of modern football."
    for variant in ("code", "paper"):
        assert keyword_recall_score("factrecall_en", fact, ["Ludwig Beethoven"], None, variant) == 0.0
        assert keyword_recall_score("multifieldqa_en_mixup", fact, ["Ludwig Beethoven"], "Ludwig Beethoven", variant) == 0.0


def test_tokens_and_blacklists():
    assert tokens("The Cayman Islands, too!", "en") == ["cayman", "islands", "too"]
    assert tokens("电影《毕业风暴》", "zh")[:2] == ["电影", "《"]  # 《 survives normalization
    assert len(BLACKLIST_EN) == 38 and len(BLACKLIST_ZH) == 85


def test_dataset_names_in_any_usual_spelling():
    assert dataset_rule("hotpotwikiqa-mixup").name == "hotpotwikiqa_mixup"
    assert dataset_rule("loogle_MR_mixup").name == "loogle_MIR_mixup"
    assert dataset_rule("factrecall_zh_256k").name == "factrecall_zh"
    with pytest.raises(ValueError, match="unknown dataset 'squad'"):
        dataset_rule("squad")


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="field 'answers'"):
        keyword_recall_score("factrecall_en", "x", [])
    with pytest.raises(ValueError, match="variant"):
        keyword_recall_score("factrecall_en", "x", ["x"], None, "repo")


def test_level_score_is_the_unweighted_mean_of_dataset_scores():
    # Spec §9.3/§9.4: ChatGLM3-6B-32k at 16k, the 11 dataset scores -> the published 30.70.
    at_16k = {"loogle_SD_mixup": 41.82, "cmrc_mixup": 51.21, "multifieldqa_en_mixup": 25.40,
              "multifieldqa_zh_mixup": 32.38, "factrecall_en": 91.50, "factrecall_zh": 0.00,
              "dureader_mixup": 23.99, "loogle_CR_mixup": 14.41, "loogle_MIR_mixup": 15.83,
              "hotpotwikiqa_mixup": 16.98, "lic_mixup": 24.15}
    assert round(level_score(at_16k), 2) == 30.70
    assert dataset_score([1.0, 0.0, 0.5]) == 50.0
    assert dataset_score([1 / 3]) == 33.33


def test_ablation_table_compares_variants_on_the_same_items():
    rows = []
    for variant, (s1, s2) in {"plain": (1.0, 0.5), "cfi": (0.5, 0.5), "kpr": (0.0, 0.5), "cfi_kpr": (0.0, 0.0)}.items():
        rows += [("m", "16k", variant, "hotpotwikiqa_mixup", "q1", s1), ("m", "16k", variant, "factrecall_en", "q2", s2)]
    rows.append(("m", "16k", "plain", "hotpotwikiqa_mixup", "q3", 0.0))  # no CFI/KPR instance: left out
    scores = pl.DataFrame(rows, schema=["model", "length", "variant", "task", "item_id", "score"], orient="row")
    table = ablation_table(scores)
    level = table.filter(pl.col("task") == "all")
    assert level["variant"].to_list() == ["plain", "cfi", "kpr", "cfi_kpr"]
    assert level["score"].to_list() == [75.0, 50.0, 25.0, 0.0]  # mean of the two dataset scores
    hotpot = table.filter(pl.col("task") == "hotpotwikiqa_mixup")
    assert hotpot["score"].to_list() == [100.0, 50.0, 0.0, 0.0] and hotpot["n_instances"].to_list() == [1, 1, 1, 1]
