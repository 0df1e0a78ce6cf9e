"""Planning a partition: ids, cache keys and truncation policies per instance (no model loaded)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.partition import chunk_size, plan_partition
from lc_pipeline.generate.registry import ModelSpec

SERVED = ModelSpec(slug="served", backend="openai", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                   max_model_len=32768, api_model="qwen", base_url="http://127.0.0.1:9/v1")


def instances(**changes) -> pl.DataFrame:
    base = {
        "instance_id": ["b", "a", "c"],
        "benchmark": ["loong", "lveval", "helmet"],
        "task": ["comparison", "hotpotwikiqa_mixup", "longqa"],
        "prompt": ["Q about docs", "Q mixup", "Q about docs"],
        "context": ["docs", "mixup", "docs"],
        "max_new_tokens": [64, 64, 64],
    }
    return pl.DataFrame({**base, **changes})


def plan(df: pl.DataFrame, spec: ModelSpec = SERVED, overrides=None):
    return plan_partition(df, spec, make_generator(spec), overrides)


def test_requests_in_instance_order_with_the_policy_each_task_declares():
    p = plan(instances())
    assert [i.instance_id for i in p.items] == ["a", "b", "c"]
    assert [i.request.truncation for i in p.items] == ["middle", "drop_documents", "end_of_context"]
    assert p.backend == "openai" and p.model_id == "qwen"
    assert p.items[1].request.context == "docs"


def test_cache_key_depends_on_prompt_model_and_sampling_not_on_the_instance_id():
    first = plan(instances())
    keys = [i.request.key for i in first.items]
    assert keys == [i.request.key for i in plan(instances()).items]  # stable across runs
    renamed = plan(instances(instance_id=["y", "x", "z"]))
    assert [i.request.key for i in renamed.items] == keys  # same prompts: same cached outputs
    assert [i.generation_id for i in renamed.items] != [i.generation_id for i in first.items]

    longer = plan(instances(max_new_tokens=[65, 64, 64]))
    assert longer.items[1].request.key != keys[1] and longer.items[0].request.key == keys[0]
    other_model = plan(instances(), dataclasses.replace(SERVED, max_model_len=8192))
    assert not set(i.request.key for i in other_model.items) & set(keys)
    # Speed-only settings keep the keys: a rerun with more concurrency reuses everything.
    faster = plan(instances(), dataclasses.replace(SERVED, max_concurrency=64, request_timeout_s=30))
    assert [i.request.key for i in faster.items] == keys
    # A policy override changes the key of the affected task only.
    overridden = plan(instances(), overrides={"comparison": "middle"})
    assert overridden.items[1].request.key != keys[1] and overridden.items[0].request.key == keys[0]


def test_bad_instances_name_the_record_and_field():
    with pytest.raises(ValueError, match=r"missing columns \['context'\]"):
        plan(instances().drop("context"))
    with pytest.raises(ValueError, match="instance 'b': field 'prompt' is null"):
        plan(instances(prompt=[None, "Q", "Q"]))


def test_chunks_follow_how_each_backend_batches():
    # openai: the whole partition in one call, a window of max_concurrency requests always in flight, each
    # answer stored as it arrives (no chunk barrier); imported: a lookup, one pass.
    assert chunk_size(dataclasses.replace(SERVED, max_concurrency=8)) == 0
    assert chunk_size(dataclasses.replace(SERVED, backend="vllm")) == 0  # whole partition at once
    assert chunk_size(dataclasses.replace(SERVED, backend="transformers", batch_size=4)) == 8
    assert chunk_size(dataclasses.replace(SERVED, backend="llamacpp")) == 1  # one at a time, each stored


def test_each_request_carries_its_tasks_chat_template_switch():
    # HELMET runs RAG, recall and re-rank as completions even for a chat model; LongQA and Summ through the
    # chat template (helmet.md §5.1). A base model gets the plain prompt anyway: its keys do not change.
    df = instances(benchmark=["helmet", "helmet", "helmet"], task=["rag", "longqa", "json_kv"])
    chat = plan(df)
    by_task = dict(zip(df.sort("instance_id")["task"], chat.items, strict=True))
    assert by_task["rag"].request.chat_template is False and by_task["json_kv"].request.chat_template is False
    assert by_task["longqa"].request.chat_template is True
    base = dataclasses.replace(SERVED, chat_template=False)
    assert all(i.request.chat_template for i in plan(df, base).items)  # nothing to switch off
    # The switch is part of the cache key (same prompt, same model: different input), only when it applies.
    longqa_like = plan(instances(benchmark=["helmet"] * 3, task=["longqa"] * 3))
    assert by_task["rag"].request.key != next(i.request.key for i in longqa_like.items if i.instance_id == "b")


def test_stop_sequences_cut_the_output_and_say_stop():
    from lc_pipeline.generate.base import cut_at_stop

    assert cut_at_stop("Paris\n\nQuestion: next", ["\n\n", "Question:"]) == ("Paris", True)
    assert cut_at_stop("Paris", ["\n\n"]) == ("Paris", False)
    assert cut_at_stop("Paris", []) == ("Paris", False)
