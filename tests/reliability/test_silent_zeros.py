"""Issue 22, defect 6 and the `lcp score` part of 8: zeros that are not the answer's are counted, not hidden,
and a predictions file that is not UTF-8 is refused with its file, line and record.

LongBench's official ROUGE (the ``rouge`` package) raises RecursionError on a sentence of about 990 words and
the official code scores 0; a prediction in NFD against a gold in NFC shares no accented token and scores 0.
Both numbers are kept (they are the official ones) and counted: ``lcp score`` says so on stderr, the
metric_scores asset in its metadata (score/fallbacks.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

import dagster as dg
import polars as pl
import pytest
import yaml
from click.testing import CliRunner
from conftest import settings_for

from lc_pipeline import schemas
from lc_pipeline.benchmarks.longbench.metrics import score_record
from lc_pipeline.commands.score import score
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.parquet_io import partition_path
from lc_pipeline.score.fallbacks import (
    ROUGE_RECURSION,
    UNICODE_NORMALIZATION,
    score_noted,
)

# A gold summary with no '.' (one ROUGE "sentence") and a prediction that repeats it and goes on for 600 words:
# one 1000-word sentence, past the rouge package's recursion (about 990 words).
GOLD = " ".join(f"g{i}" for i in range(400))
GOLD_PLUS_600 = GOLD + " " + " ".join(f"w{i}" for i in range(600))
GOLD_PLUS_500 = GOLD + " " + " ".join(f"w{i}" for i in range(500))
FRENCH = "élu député à Genève"
NFD = unicodedata.normalize("NFD", FRENCH)
assert NFD != FRENCH


def qmsum(prediction: str, record: dict) -> float:
    return score_record("qmsum", prediction, record["answers"], record.get("all_classes"))


def test_gold_plus_600_words_keeps_the_official_zero_and_is_counted_as_a_rouge_failure():
    assert score_record("qmsum", GOLD_PLUS_500, [GOLD]) > 0.6  # 900 words: the official ROUGE still runs
    assert score_noted(qmsum, GOLD_PLUS_600, {"answers": [GOLD]}) == (0.0, ROUGE_RECURSION)


def test_nfd_against_nfc_keeps_the_official_zero_and_is_counted_as_a_normalization_zero():
    assert score_record("qmsum", FRENCH, [FRENCH]) > 0.99 and score_record("hotpotqa", FRENCH, [FRENCH]) == 1.0
    assert score_noted(qmsum, NFD, {"answers": [FRENCH]}) == (0.0, UNICODE_NORMALIZATION)
    def hotpotqa(prediction: str, record: dict) -> float:  # QA F1 has the same zero
        return score_record("hotpotqa", prediction, record["answers"])

    assert score_noted(hotpotqa, FRENCH, {"answers": [NFD]}) == (0.0, UNICODE_NORMALIZATION)


def test_a_wrong_or_empty_answer_is_an_ordinary_zero():
    assert score_noted(qmsum, "nothing in common", {"answers": [FRENCH]}) == (0.0, None)
    assert score_noted(qmsum, "", {"answers": [FRENCH]}) == (0.0, None)  # rouge raises; the answer is empty
    assert score_noted(qmsum, "...", {"answers": [FRENCH]}) == (0.0, None)


def write_jsonl(path, records, encoding="utf-8") -> None:
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode(encoding))


def test_lcp_score_prints_the_official_zeros_and_counts_them_on_stderr(tmp_path):
    path = tmp_path / "predictions.jsonl"
    write_jsonl(path, [{"_id": "long", "prediction": GOLD_PLUS_600, "answers": [GOLD]},
                       {"_id": "nfd", "prediction": NFD, "answers": [FRENCH]},
                       {"_id": "right", "prediction": FRENCH, "answers": [FRENCH]},
                       {"_id": "wrong", "prediction": "nothing in common", "answers": [FRENCH]}])
    result = CliRunner().invoke(score, [str(path), "--metric", "longbench:qmsum"])
    assert result.exit_code == 0, result.output
    scores = {r["_id"]: r["score"] for r in map(json.loads, result.stdout.splitlines())}
    assert scores["long"] == scores["nfd"] == scores["wrong"] == 0.0 and scores["right"] > 0.99
    stderr = result.stderr.splitlines()
    assert stderr[1] == ("longbench:qmsum: 1 record scored 0 because the official ROUGE failed on them "
                         "(RecursionError: the rouge package's recursive LCS fails on a sentence, text between "
                         "two '.', of about 990 words or more) and the official code scores 0: ids 'long'")
    assert stderr[2].startswith("longbench:qmsum: 1 record scored 0 because their text differs from the gold only "
                                "in Unicode normalization") and stderr[2].endswith("ids 'nfd'")
    assert len(stderr) == 3


@pytest.mark.parametrize("name, data, message", [
    ("latin1", json.dumps({"_id": "café-1", "prediction": "café", "answers": ["café"]}, ensure_ascii=False)
     .encode("latin-1"), (r"line 1 \(_id 'caf\ufffd-1'\): not UTF-8 \(byte 0xe9 at byte 13 of the line; "
                          r"Latin-1 or another 8-bit encoding\?\): save the file as UTF-8")),
    ("utf16", ('{"_id": "a", "prediction": "x", "answers": ["x"]}\n' * 2).encode("utf-16"),
     r"line 1: not UTF-8 \(byte 0xff at byte 1 of the line; the file starts with a UTF-16 byte-order mark\)"),
    ("utf16_no_bom", '{"_id": "a", "prediction": "x", "answers": ["x"]}\n'.encode("utf-16-le"),
     r"line 1: holds NUL bytes \(UTF-16 or UTF-32 without a byte-order mark\?\)"),
    ("surrogate_id", (b'{"_id": "a", "prediction": "x", "answers": ["x"]}\n'
                      b'{"_id": "b\\ud800", "prediction": "x", "answers": ["x"]}\n'),
     r"line 2 \(_id 'b\\ud800'\): field '_id': lone surrogate U\+D800 at character 1"),
    ("bad_json", b'{"_id": "a", "prediction": "x", "answers": ["x"]}\n{"_id": "b", \n',
     r"line 2: not valid JSON \(Expecting property name enclosed in double quotes\)"),
    ("missing_answers", b'{"_id": "a", "prediction": "x"}\n', r"line 1 \(_id 'a'\): field 'answers': expected a "),
])
def test_lcp_score_refuses_a_bad_predictions_file_naming_file_line_and_record(tmp_path, name, data, message):
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    result = CliRunner().invoke(score, [str(path), "--metric", "longbench:qmsum"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # a ClickException, no traceback
    assert result.stdout == ""  # nothing scored before the whole file is checked
    assert result.stderr.startswith(f"Error: {path}: ")
    assert re.search(message, result.stderr), result.stderr
    assert path.read_bytes() == data


# --------------------------------------------------------------------------- the metric_scores asset

def frame(schema: pl.Schema, rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{c: row.get(c) for c in schema.names()} for row in rows], schema=schema)


def test_metric_scores_metadata_counts_the_fallback_zeros_and_keeps_the_official_scores(tmp_path):
    config = {"name": "zeros", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 20, "seed": 3}],
              "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"], "depths": [0.0],
              "items_per_length": 1, "models": ["smollm2-135m"]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    outputs = {"long": (GOLD_PLUS_600, GOLD), "nfd": (NFD, FRENCH), "right": (FRENCH, FRENCH)}
    instances = frame(schemas.INSTANCES, [
        {"instance_id": iid, "item_id": iid, "benchmark": "longbench", "task": "qmsum", "category": "summ",
         "depth": 0.0, "answers": [gold], "language": "en", "variant": "plain"} for iid, (_, gold) in outputs.items()])
    generations = frame(schemas.GENERATIONS, [
        {"generation_id": f"g-{iid}", "instance_id": iid, "output": out, "status": "answered"}
        for iid, (out, _) in outputs.items()])
    written = {}
    for table, df, keys in (("instances", instances, {"length": "1k"}),
                            ("generations", generations, {"length": "1k", MODEL_DIM: "smollm2-135m"})):
        path = partition_path(settings.lake_dir, table, keys)
        path.parent.mkdir(parents=True)
        df.write_parquet(path)
        written[path] = hashlib.sha256(path.read_bytes()).hexdigest()
    project = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, ["smollm2-135m"])
        result = dg.materialize(project.assets, selection=["metric_scores"], instance=instance,
                                partition_key=str(length_model_key("1k", "smollm2-135m")), resources=project.resources)
    (event,) = result.asset_materializations_for_node("metric_scores")
    meta = {k: v.value for k, v in event.metadata.items()}
    assert meta["fallback_zeros"] == {"longbench": 2}
    assert meta["fallback_examples"] == {"longbench: rouge_recursion": ["long"],
                                         "longbench: unicode_normalization": ["nfd"]}
    scores = pl.read_parquet(partition_path(settings.lake_dir, "metric_scores",
                                            {"length": "1k", MODEL_DIM: "smollm2-135m"}))
    by_id = dict(scores.select("instance_id", "score").iter_rows())
    assert by_id == {iid: score_record("qmsum", out, [gold]) for iid, (out, gold) in outputs.items()}
    assert by_id["long"] == by_id["nfd"] == 0.0 and set(scores["status"]) == {"answered"}  # official, unmarked
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in written} == written  # inputs untouched
