"""Imported predictions (backend ``imported``, `lcp import-predictions`): a JSONL file of ``{"_id", "prediction"}``
checked against a config's released records, stored in the lake by content hash, registered as a model whose
generator answers each request by its record id without calling anything.

The records are small invented LongBench ones (qasper: one document per record), run as released.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import released_longbench_project

from lc_pipeline.cli import main
from lc_pipeline.config import load_config
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest, cache_key
from lc_pipeline.generate.imported_backend import (
    ImportedGenerator,
    PredictionsError,
    parse_predictions,
)
from lc_pipeline.generate.partition import plan_partition
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec

IDS = ["q-1", "q-2", "q-3"]
COUNTER = TokenCounter.load("cl100k_base")


def record(rid: str, context: str = "The paper studies parsing.") -> dict:
    return {"dataset": "qasper", "_id": rid, "language": "en", "context": context, "input": "What is studied?",
            "answers": ["parsing"], "all_classes": None}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A released LongBench config over three qasper records in $LCP_DATA/longbench, a lake and a registry."""
    return released_longbench_project(tmp_path, monkeypatch, [record(r) for r in IDS])


def lines(*records: dict | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def write(project: Path, text: str, name: str = "preds.jsonl") -> Path:
    path = project / name
    path.write_text(text)
    return path


def lcp(*args: str):
    return CliRunner().invoke(main, list(args))


# ------------------------------------------------------------------------------------------ the file's checks

def test_every_line_gives_its_record_its_prediction_in_file_order():
    parsed = parse_predictions(lines({"_id": "q-2", "prediction": "b"}, {"_id": "q-1", "prediction": "a", "x": 1}),
                               "p.jsonl", ["q-1", "q-2"])
    assert parsed.predictions == {"q-2": "b", "q-1": "a"} and parsed.rejected == [] and parsed.missing == []
    assert parsed.normalised().decode().splitlines()[0] == '{"_id": "q-2", "prediction": "b"}'


@pytest.mark.parametrize(("bad", "field", "says"), [
    ('{"_id": "q-9", "prediction": "x"}', "_id", "unknown id 'q-9'"),
    ('{"_id": "q-1", "prediction": "again"}', "_id", "duplicate id 'q-1' (first on line 1)"),
    ('{"_id": "q-2"}', "prediction", "missing or not a string"),
    ('{"_id": "q-2", "prediction": 3}', "prediction", "missing or not a string (got int)"),
    ('{"prediction": "x"}', "_id", "missing or not a non-empty string"),
    ('{"_id": "q-2", "prediction": "x"', "json", "not JSON"),
    ('["q-2", "x"]', "json", "expected a JSON object"),
])
def test_a_bad_line_is_an_error_naming_the_file_the_line_and_the_field(bad, field, says):
    text = lines({"_id": "q-1", "prediction": "a"}, bad)
    with pytest.raises(PredictionsError) as err:
        parse_predictions(text, "p.jsonl", ["q-1", "q-2"])
    assert f"p.jsonl, line 2, field {field!r}: " in str(err.value) and says in str(err.value)


def test_records_left_without_a_prediction_are_an_error_naming_how_many_and_which():
    with pytest.raises(PredictionsError, match=r"p.jsonl: 2 record\(s\) of the config have no prediction, e.g. "
                                               r"\['q-2', 'q-3'\]"):
        parse_predictions(lines({"_id": "q-1", "prediction": "a"}), "p.jsonl", IDS)


def test_in_reject_mode_bad_lines_are_counted_and_kept_and_missing_records_listed():
    text = lines({"_id": "q-1", "prediction": "a"}, "not json", {"_id": "q-1", "prediction": "b"},
                 {"_id": "zz", "prediction": "c"})
    parsed = parse_predictions(text, "p.jsonl", IDS, on_error="reject")
    assert parsed.predictions == {"q-1": "a"}
    assert [(r.line, r.field) for r in parsed.rejected] == [(2, "json"), (3, "_id"), (4, "_id")]
    assert parsed.rejected[0].text == "not json" and parsed.missing == ["q-2", "q-3"]


# ------------------------------------------------------------------------------------------ the command

def test_import_stores_a_content_named_copy_in_the_lake_and_registers_an_imported_model(project):
    preds = write(project, lines(*({"_id": r, "prediction": f"answer {r}"} for r in IDS)))
    result = lcp("models", "import", str(preds), "--model", "elsewhere", "--config", str(project / "lb.yaml"))
    assert result.exit_code == 0, result.output
    assert "3 predictions imported" in result.output
    spec = ModelRegistry(project / "models.yaml").get("elsewhere")
    assert spec.backend == "imported" and spec.tokenizer == "tiktoken:cl100k_base"
    stored = Path(spec.model_id)
    assert stored.is_relative_to(project / "lake" / "imports" / "elsewhere") and stored.read_text().count("\n") == 3
    manifest = json.loads((stored.parent / "manifest.json").read_text())
    assert (manifest["records"], manifest["accepted"], manifest["rejected"], manifest["missing"]) == (3, 3, 0, [])
    preds.unlink()  # the user's file may go: the model reads the lake's copy
    assert make_generator(spec).generate([request("k", "q-2")])[0].output == "answer q-2"

    # A changed file is another copy, another fingerprint: its generations are new, never stale.
    write(project, lines(*({"_id": r, "prediction": f"better {r}"} for r in IDS)))
    assert lcp("models", "import", str(preds), "--model", "elsewhere", "--config", str(project / "lb.yaml")
               ).exit_code == 0
    again = ModelRegistry(project / "models.yaml").get("elsewhere")
    assert again.model_id != spec.model_id and again.fingerprint() != spec.fingerprint()


def test_import_errors_name_the_line_and_reject_mode_reports_and_keeps_each_rejection(project):
    text = lines({"_id": "q-1", "prediction": "a"}, {"_id": "q-7", "prediction": "b"}, {"_id": "q-2", "prediction": "c"},
                 {"_id": "q-3", "prediction": None})
    preds = write(project, text)
    failed = lcp("models", "import", str(preds), "--model", "elsewhere", "--config", str(project / "lb.yaml"))
    assert failed.exit_code != 0 and f"{preds}, line 2, field '_id': unknown id 'q-7'" in failed.output
    assert not (project / "models.yaml").exists()

    kept = lcp("models", "import", str(preds), "--model", "elsewhere", "--config", str(project / "lb.yaml"),
               "--on-error", "reject")
    assert kept.exit_code == 0, kept.output
    assert "2 line(s) rejected" in kept.output and "line 4, field 'prediction'" in kept.output
    assert "1 record(s) of the config have no prediction" in kept.output and "q-3" in kept.output
    stored = Path(ModelRegistry(project / "models.yaml").get("elsewhere").model_id)
    rejected = [json.loads(x) for x in (stored.parent / "rejected.jsonl").read_text().splitlines()]
    assert [(r["line"], r["field"]) for r in rejected] == [(2, "_id"), (4, "prediction")]
    assert json.loads(rejected[0]["text"]) == {"_id": "q-7", "prediction": "b"}

    # The record without a prediction is never answered with an invented one.
    generator = make_generator(ModelRegistry(project / "models.yaml").get("elsewhere"))
    with pytest.raises(PredictionsError, match=r"record 'q-3' has no prediction .*reported it missing"):
        generator.generate([request("k", "q-3")])


def test_a_name_already_registered_with_another_backend_is_refused(project):
    preds = write(project, lines(*({"_id": r, "prediction": "x"} for r in IDS)))
    result = lcp("models", "import", str(preds), "--model", "smollm2-135m", "--config", str(project / "lb.yaml"))
    assert result.exit_code != 0 and "already registered with backend 'transformers'" in result.output


def test_a_config_not_run_as_released_is_refused(project):
    preds = write(project, lines({"_id": "q-1", "prediction": "x"}))
    result = lcp("models", "import", str(preds), "--model", "elsewhere", "--config", "demo")
    assert result.exit_code != 0 and "does not run a benchmark as released" in result.output


# ------------------------------------------------------------------------------------------ the generator

def request(key: str, record_id: str, prompt: str = "Question: what?\nAnswer:") -> GenerationRequest:
    return GenerationRequest(key, prompt, 32, record_id=record_id)


def imported_model(project: Path, text: str, on_error: str = "fail") -> ModelSpec:
    preds = write(project, text)
    result = lcp("models", "import", str(preds), "--model", "elsewhere", "--config", str(project / "lb.yaml"),
                 "--on-error", on_error)
    assert result.exit_code == 0, result.output
    return ModelRegistry(project / "models.yaml").get("elsewhere")


def test_the_generator_answers_by_record_with_counted_tokens_and_calls_nothing(project):
    spec = imported_model(project, lines(*({"_id": r, "prediction": f"the answer of {r}"} for r in IDS)))
    generator = make_generator(spec)
    assert isinstance(generator, ImportedGenerator)
    done = []
    [a, b] = generator.generate([request("k1", "q-3"), request("k2", "q-1", "Other prompt")], progress=done.append)
    assert (a.key, a.output, b.output) == ("k1", "the answer of q-3", "the answer of q-1")
    assert a.prompt_tokens == a.original_prompt_tokens == COUNTER.count("Question: what?\nAnswer:")
    assert a.completion_tokens == COUNTER.count("the answer of q-3")
    assert (a.truncated, a.finish_reason, a.latency_s, a.truncation_policy) == (False, "stop", 0.0, "middle")
    assert done == [2]
    sha = Path(spec.model_id).parent.name
    params = generator.sampling_params()
    assert params["backend"] == "imported" and params["predictions_sha256"].startswith(sha)


def test_the_instances_exact_count_is_used_when_counted_with_the_same_encoding(project):
    # Released instances record input_tokens = the cl100k encode_ordinary count of their prompt (construct/
    # released.py), exactly what the generator would count: it takes it instead of counting every prompt again.
    spec = imported_model(project, lines(*({"_id": r, "prediction": f"the answer of {r}"} for r in IDS)))
    prompt = "Question: what?\nAnswer:"
    exact = COUNTER.count(prompt)

    def counted(key: str, rid: str, tokens: int, tokenizer: str) -> GenerationRequest:
        return dataclasses.replace(request(key, rid, prompt), counted_tokens=tokens, counted_with=tokenizer)

    # A sentinel count shows which one was used: the instances' (same encoding), or a fresh count (another one).
    same, other, plain = make_generator(spec).generate([
        counted("k1", "q-1", exact + 1000, "cl100k_base"), counted("k2", "q-2", exact + 1000, "o200k_base"),
        request("k3", "q-3", prompt)])
    assert same.prompt_tokens == same.original_prompt_tokens == exact + 1000
    assert other.prompt_tokens == plain.prompt_tokens == exact
    # Through plan_partition: instances with input_tokens and tokenizer carry them into the requests.
    instances = pl.DataFrame([{"instance_id": "i1", "record_id": "q-1", "benchmark": "longbench", "task": "qasper",
                               "prompt": prompt, "context": "C", "max_new_tokens": 8, "input_tokens": exact,
                               "tokenizer": "cl100k_base"}])
    [item] = plan_partition(instances, spec, make_generator(spec)).items
    assert (item.request.counted_tokens, item.request.counted_with) == (exact, "cl100k_base")


def test_a_request_without_a_record_id_or_a_tampered_copy_is_an_error(project):
    spec = imported_model(project, lines(*({"_id": r, "prediction": "x"} for r in IDS)))
    with pytest.raises(PredictionsError, match="names no record"):
        make_generator(spec).generate([request("k", "")])
    Path(spec.model_id).write_text(lines({"_id": "q-1", "prediction": "edited by hand"}))
    with pytest.raises(PredictionsError, match="was changed after its import"):
        make_generator(spec).generate([request("k", "q-1")])


def test_requests_carry_the_instances_record_id_which_keys_imported_generations_only(project):
    spec = imported_model(project, lines({"_id": "q-1", "prediction": "one"}, {"_id": "q-2", "prediction": "two"},
                                         {"_id": "q-3", "prediction": "three"}))
    same_prompt = {"benchmark": "longbench", "task": "qasper", "prompt": "P", "context": "C", "max_new_tokens": 8}
    instances = pl.DataFrame([{"instance_id": "i1", "record_id": "q-1", **same_prompt},
                              {"instance_id": "i2", "record_id": "q-2", **same_prompt}])
    plan = plan_partition(instances, spec, make_generator(spec))
    assert [p.request.record_id for p in plan.items] == ["q-1", "q-2"]
    assert plan.items[0].request.key != plan.items[1].request.key  # same prompt, two records, two answers
    assert cache_key("P", 8, "middle", "fp", "sh") == cache_key("P", 8, "middle", "fp", "sh", record_id="")


def test_the_config_records_come_from_the_lakes_instances_once_they_are_built(project):
    from lc_pipeline import storage
    from lc_pipeline.commands.imports import config_record_ids

    config = load_config(project / "lb.yaml")
    assert config_record_ids(config, project / "lake") == ({"q-1", "q-2", "q-3"}, "sources")
    storage.write_parquet(pl.DataFrame({"item_id": ["a", "b"], "record_id": ["q-1", "q-2"]}),
                          project / "lake" / "instances" / "length=all" / "data.parquet")
    assert config_record_ids(config, project / "lake") == ({"q-1", "q-2"}, "instances")
