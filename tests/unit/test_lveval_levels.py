"""LV-Eval's own construction: levels counted in words (k = 1,000; characters for Chinese), whole
documents mixed and shuffled, and factrecall's needle at evenly spaced positions."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline.benchmarks.lveval.levels import (
    build_factrecall_instances,
    build_word_level_instances,
)
from lc_pipeline.benchmarks.lveval.config import LVEvalConfig
from lc_pipeline.config import (
    BenchmarkConfig,
    ConfigError,
    SourceConfig,
    level_size,
)
from lc_pipeline.construct.rows import with_length_units
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.word_levels import count_units, needle_depths
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.tasks import load_catalog

# LV-Eval's factrecall tasks by needle language, as its task file declares them.
FACTRECALL = {t.language: t.name for t in load_catalog().tasks("lveval") if t.builder.name == "lveval.factrecall"}


@pytest.fixture(scope="module")
def corpus():
    return build_demo_corpus(n_entities=120, seed=7)


@pytest.fixture(scope="module")
def counter():
    return TokenCounter.load()


def words_config(**overrides) -> BenchmarkConfig:
    base = BenchmarkConfig(name="w", sources=(SourceConfig(name="demo"),), lengths=("1k", "2k"), base_lengths=("1k",),
                           long_lengths=("2k",), items_per_length=4, length_unit="words", seed=5)
    return base.replace(**overrides)


def test_level_sizes_in_each_unit():
    assert level_size("16k", "words") == 16_000 and level_size("16k") == 16_384
    assert level_size("512", "words") == 512  # a plain number is a count in either unit
    with pytest.raises(ConfigError, match="length_unit"):
        words_config(length_unit="sentences")


def test_word_levels_hold_whole_documents_at_the_level(corpus, counter):
    documents, items = corpus
    config = words_config()
    texts = dict(documents.select("doc_id", "text").iter_rows())
    frames = {}
    for level in ("1k", "2k"):
        out, meta = build_word_level_instances(items, documents, level=level, config=config, counter=counter)
        out = with_length_units(out, level, config)
        frames[level] = out
        assert out.height == 4 and meta["length_unit"] == "words"
        assert set(out["length_unit"]) == {"words"} and out["target_tokens"].null_count() == out.height
        for row in out.iter_rows(named=True):
            words = count_units(row["context"], "en")
            assert row["context_units"] == words and row["target_units"] == level_size(level, "words")
            # Reached the level, and at most the tolerance past it (whole documents only).
            assert level_size(level, "words") <= words <= level_size(level, "words") * 1.05
            # Every block is a whole document but at most one, cut at a boundary where no choice of
            # whole documents lands within the tolerance (demo documents are 150-400 words).
            cut = [d for d in row["context_doc_ids"] if d.endswith(":cut")]
            assert len(cut) <= 1 and not set(row["evidence_doc_ids"]) & {d.removesuffix(":cut") for d in cut}
            for doc_id in row["context_doc_ids"]:
                assert doc_id in cut or texts[doc_id] in row["context"]
            assert set(row["evidence_doc_ids"]) <= set(row["context_doc_ids"])
            assert row["input_tokens"] == counter.count(row["prompt"])
            assert 0 <= row["depth"] <= 1 and len(row["evidence_depths"]) == len(row["evidence_doc_ids"])
    # The same QA pairs at every level (LV-Eval), different contexts.
    assert frames["1k"]["item_id"].to_list() == frames["2k"]["item_id"].to_list()
    assert set(frames["1k"]["instance_id"]).isdisjoint(frames["2k"]["instance_id"])
    # Same seed, same bytes; another seed, other contexts.
    again, _ = build_word_level_instances(items, documents, level="2k", config=config, counter=counter)
    assert with_length_units(again, "2k", config).equals(frames["2k"])
    other, _ = build_word_level_instances(items, documents, level="2k", config=words_config(seed=6), counter=counter)
    assert other["context"].to_list() != frames["2k"]["context"].to_list()


def test_factrecall_needle_at_evenly_spaced_positions(corpus, counter):
    documents, items = corpus
    config = words_config(lveval=LVEvalConfig(factrecall_positions=5, factrecall_items=1))
    out = with_length_units(build_factrecall_instances(items, documents, level="1k", config=config,
                                                        task_by_language=FACTRECALL,
                                                       counter=counter), "1k", config)
    assert out.height == 5 and set(out["task"]) == {"factrecall_en"}
    assert out["depth"].to_list() == needle_depths(5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    [item_id] = set(out["item_id"])
    item = items.filter(pl.col("item_id") == item_id).row(0, named=True)
    # One haystack, the needle (a sentence stating the answer) moving through it.
    haystacks = set()
    for row in out.iter_rows(named=True):
        assert any(a in row["context"] for a in item["answers"])
        assert row["evidence_doc_ids"] == [] and row["question"] == item["question"]
        haystacks.add(tuple(row["context_doc_ids"]))
        assert abs(row["context_units"] - 1000) <= 50
    assert len(haystacks) == 1
    # The needle's measured position grows with its depth: first at the start, last at the end.
    positions = [d[0] for d in out["evidence_depths"]]
    assert positions == sorted(positions) and positions[0] == 0.0 and positions[-1] > 0.9
    assert len(set(out["instance_id"])) == 5


def test_factrecall_at_token_levels(corpus, counter):
    documents, items = corpus
    config = words_config(length_unit="tokens", lveval=LVEvalConfig(factrecall_positions=3))
    out = with_length_units(build_factrecall_instances(items, documents, level="1k", config=config,
                                                        task_by_language=FACTRECALL,
                                                       counter=counter), "1k", config)
    assert set(out["length_unit"]) == {"tokens"} and set(out["target_tokens"]) == {1024}
    assert ((out["input_tokens"] - 1024).abs() / 1024).max() <= config.length_tolerance


def test_too_few_needles_is_an_error_naming_the_setting(corpus, counter):
    documents, items = corpus
    config = words_config(lveval=LVEvalConfig(factrecall_positions=3, factrecall_items=10_000))
    with pytest.raises(ValueError, match="factrecall_items is 10000"):
        build_factrecall_instances(items, documents, level="1k", config=config,
                                                        task_by_language=FACTRECALL, counter=counter)


def test_chinese_levels_count_characters(counter):
    zh = "这是一段用于测试的中文文本。它讲述了一个城市的历史。"  # 24 characters, no spaces
    docs = pl.DataFrame({
        "doc_id": [f"d{i}" for i in range(40)], "source": "zh", "title": [f"标题{i}" for i in range(40)],
        "text": [f"{zh}第{i}段。" for i in range(40)], "domain": "城市", "language": "zh",
    })
    from lc_pipeline import schemas

    documents = docs.with_columns(*[pl.lit(None, dtype=t).alias(c) for c, t in schemas.SOURCE_DOCUMENTS.items()
                                    if c not in docs.columns]).select(schemas.SOURCE_DOCUMENTS.names())
    items = pl.DataFrame([{"item_id": "q0", "source": "zh", "task": "zh_qa", "category": "single-doc QA",
                           "language": "zh", "question": "哪一段是第七段？", "answers": ["第7段"],
                           "answer_keywords": ["第7段"], "evidence_doc_ids": ["d7"]}],
                         schema={c: schemas.SOURCE_ITEMS[c] for c in ("item_id", "source", "task", "category",
                                                                      "language", "question", "answers",
                                                                      "answer_keywords", "evidence_doc_ids")})
    items = items.with_columns(*[pl.lit(None, dtype=t).alias(c) for c, t in schemas.SOURCE_ITEMS.items()
                                 if c not in items.columns]).select(schemas.SOURCE_ITEMS.names())
    config = words_config(lengths=("512",), base_lengths=("512",), long_lengths=("512",), items_per_length=1)
    out, _ = build_word_level_instances(items, documents, level="512", config=config, counter=counter)
    out = with_length_units(out, "512", config)
    assert out["length_unit"].to_list() == ["characters"]
    assert out["context_units"][0] == sum(1 for ch in out["context"][0] if not ch.isspace())
    assert 512 <= out["context_units"][0] <= 512 * 1.05


def test_word_levels_and_factrecall_take_each_items_prompt(corpus, counter):
    from lc_pipeline.construct.prompts import QAPrompt

    documents, items = corpus
    config = words_config(lveval=LVEvalConfig(factrecall_positions=3, factrecall_items=1))
    template = "Question: {question}\nUse the passages {like these}.\n\n{context}\n\nAnswer:"
    asked = []

    def prompt_for(item, salt=""):
        asked.append(item["task"])
        return QAPrompt(template, 64, id_salt=salt)

    default, _ = build_word_level_instances(items, documents, level="1k", config=config, counter=counter)
    assert with_length_units(default, "1k", config).equals(default)  # the rows carry their units already
    custom, _ = build_word_level_instances(items, documents, level="1k", config=config, counter=counter,
                                           prompt_for=prompt_for)
    salted, _ = build_word_level_instances(items, documents, level="1k", config=config, counter=counter,
                                           prompt_for=lambda item: prompt_for(item, "v2"))
    for row in custom.iter_rows(named=True):
        assert row["prompt"] == QAPrompt(template, 64).render(row["context"], row["question"])
        assert row["input_tokens"] == counter.count(row["prompt"]) and row["max_new_tokens"] == 64
    # The same contexts; only the prompt (and, with a salt, the id) differ.
    assert custom.drop("prompt", "input_tokens", "max_new_tokens").equals(
        default.drop("prompt", "input_tokens", "max_new_tokens"))
    assert not set(salted["instance_id"]) & set(default["instance_id"])
    # factrecall asks for the prompt of the row's own task.
    asked.clear()
    recall = build_factrecall_instances(items, documents, level="1k", config=config,
                                                        task_by_language=FACTRECALL, counter=counter,
                                        prompt_for=prompt_for)
    assert set(asked) == {"factrecall_en"} and set(recall["task"]) == {"factrecall_en"}
    assert all(p.startswith("Question: ") for p in recall["prompt"]) and set(recall["max_new_tokens"]) == {64}
