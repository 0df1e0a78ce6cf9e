"""The QA suite's items are chosen once for a config: the instances a level builds and the items
LV-Eval's confusing facts and replacement rules are made for are the same items, whatever the
level, the unit (tokens or words) and the prompt each item is built with."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.qa import suite as qa_suite
from lc_pipeline.benchmarks.qa.items import items_for_variants, qa_suite_items
from lc_pipeline.benchmarks.lveval.config import LVEvalConfig
from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.construct.builders import LevelInputs, level_batches
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.tasks.catalog import catalog_for


@pytest.fixture(scope="module")
def corpus():
    return build_demo_corpus(n_entities=60, seed=7)


@pytest.fixture(scope="module")
def counter():
    return TokenCounter.load()


def config_with(**overrides) -> BenchmarkConfig:
    base = BenchmarkConfig(name="t", sources=(SourceConfig(name="demo"),), lengths=("1k", "2k"), base_lengths=("1k",),
                           long_lengths=("2k",), items_per_length=4, depths=(0.0, 1.0), seed=5)
    return base.replace(**overrides)


def level_rows(corpus, counter, config: BenchmarkConfig, level: str) -> pl.DataFrame:
    """A level as instances builds it (construct/builders.level_batches, the asset's path)."""
    documents, items = corpus
    inputs = LevelInputs(items, documents, schemas.empty("passages"), schemas.empty("hard_negatives"),
                         schemas.empty("confusing_facts"), schemas.empty("replacement_rules"), level, config, counter,
                         catalog_for(config))
    return pl.concat(list(level_batches(inputs)))


def built_items(rows: pl.DataFrame) -> list[str]:
    return rows["item_id"].unique(maintain_order=True).to_list()


def test_every_token_level_builds_the_items_facts_and_rules_are_made_for(corpus, counter):
    documents, items = corpus
    config = config_with()
    chosen = items_for_variants(items, documents, config, counter, catalog_for(config))["item_id"].to_list()
    assert len(chosen) == config.items_per_length
    for level in config.lengths:
        assert built_items(level_rows(corpus, counter, config, level)) == chosen


def test_word_levels_and_factrecall_build_the_items_facts_and_rules_are_made_for(corpus, counter):
    documents, items = corpus
    config = config_with(length_unit="words", lengths=("1k",), base_lengths=("1k",), long_lengths=("1k",),
                         items_per_length=2, lveval=LVEvalConfig(factrecall_positions=2))
    suite = qa_suite_items(items, documents, config, counter)
    rows = level_rows(corpus, counter, config, "1k")
    recall = rows.filter(pl.col("task").str.starts_with("factrecall"))
    assert built_items(rows.filter(~pl.col("task").str.starts_with("factrecall"))) == suite.chosen["item_id"].to_list()
    assert built_items(recall) == [item["item_id"] for item, _ in suite.needles] and recall.height == 2
    assert set(items_for_variants(items, documents, config, counter, catalog_for(config))["item_id"]) == \
        set(built_items(rows))


def test_what_fits_is_decided_with_the_prompt_the_items_are_built_with(corpus, counter):
    """A task's longer prompt leaves out items whose evidence fits with ours: the choice follows it."""
    documents, items = corpus
    config = config_with(lengths=("1k",), base_lengths=("1k",), long_lengths=("1k",), items_per_length=20)
    padded = QAPrompt(QAPrompt.default(24).template.replace("{question}", "{question}" + " Answer briefly." * 100),
                      24, "padded")
    suite = qa_suite_items(items, documents, config, counter, prompt_for=lambda item: padded)
    default = qa_suite_items(items, documents, config, counter)
    assert suite.too_long > default.too_long == 0 and suite.chosen["item_id"].to_list() != \
        default.chosen["item_id"].to_list()
    inputs = LevelInputs(items, documents, schemas.empty("passages"), schemas.empty("hard_negatives"),
                         schemas.empty("confusing_facts"), schemas.empty("replacement_rules"), "1k", config, counter,
                         catalog_for(config))
    rows = pl.concat(list(qa_suite.build(inputs, lambda item: padded)))
    assert built_items(rows) == suite.chosen["item_id"].to_list()
    assert inputs.meta["items_too_long_for_smallest_level"] == suite.too_long


def test_too_few_fitting_items_fail_the_level_but_not_the_facts(corpus, counter):
    documents, items = corpus
    config = config_with(lengths=("512", "1k"), long_lengths=("1k",), items_per_length=100)
    with pytest.raises(ValueError, match=r"items fit the smallest level \(512 tokens\).*items_per_length is 100"):
        qa_suite_items(items, documents, config, counter)
    lenient = qa_suite_items(items, documents, config, counter, strict=False)
    assert 0 < lenient.chosen.height == lenient.eligible.height < 100
