"""`lcp score` as a user runs it on a predictions file: LongBench's reference predictions must get
LongBench's official per-record values; LV-Eval records get the keyword-recall metric."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "longbench"
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")


def lcp_score(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", "tools", "score", *args], capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"lcp score {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("task", ["trec", "triviaqa", "passage_count", "lcc", "dureader", "multi_news"])
def test_reference_predictions_get_the_official_longbench_values(task, tmp_path):
    source = SHARED / "longbench" / f"{task}.jsonl"
    if not source.is_file():
        pytest.skip(f"{source} not found (set LCP_SHARED_DATA to the shared/data directory)")
    official = {r["_id"]: r["official_score"] for r in _lines((FIXTURES / "official_scores_shared.jsonl").read_text())}
    # The shared files carry the model output as `reference_prediction`: score them as they are.
    proc = lcp_score(str(source), "--metric", f"longbench:{task}", "--prediction-field", "reference_prediction")
    rows = _lines(proc.stdout)
    ids = [json.loads(line)["_id"] for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert [r["_id"] for r in rows] == ids  # one line per record, in input order
    for r in rows:
        assert r["score"] == official[r["_id"]], r["_id"]
    assert f"{len(ids)} records, longbench:{task}: mean x 100 = " in proc.stderr


def test_lveval_keyword_recall_in_both_variants(tmp_path):
    records = [
        {"_id": "ex2", "prediction": "For services to Medicine and to the community in the Cayman Islands.",
         "answers": ["For his services to music."], "answer_keywords": "services to music"},
        {"_id": "ex7", "prediction": "The director of the film was Palaniyaandi Neelakantan, who died on "
                                     "4 November 2003 in Chennai.",
         "answers": ["4 November 2003"], "answer_keywords": "4 November 2003"},
        # A model that copies a confusing fact inserted into the context: no answer keyword, score 0.
        {"_id": "copied-fact", "prediction": "Albert Beverley was an Italian astronomer.",
         "answers": ["Ludwig Beethoven"], "answer_keywords": ["Ludwig Beethoven"]},
    ]
    path = _write_jsonl(tmp_path / "preds.jsonl", records)
    code = {r["_id"]: round(r["score"], 4) for r in _lines(lcp_score(str(path), "--metric",
                                                                     "lveval:multifieldqa-en-mixup").stdout)}
    paper = {r["_id"]: round(r["score"], 4) for r in _lines(lcp_score(str(path), "--metric", "lveval:multifieldqa_en_mixup",
                                                                      "--variant", "paper").stdout)}
    assert code == {"ex2": 0.4, "ex7": 0.3529, "copied-fact": 0.0}
    assert paper == {"ex2": 0.2857, "ex7": 0.5, "copied-fact": 0.0}


def test_bad_record_stops_with_its_line_id_and_field(tmp_path):
    path = _write_jsonl(tmp_path / "preds.jsonl", [
        {"_id": "a", "prediction": "x", "answers": ["x"]},
        {"_id": "b", "prediction": "x", "answers": "x"},
    ])
    proc = lcp_score(str(path), "--metric", "longbench:hotpotqa", check=False)
    assert proc.returncode != 0 and proc.stdout == ""  # nothing scored before every record is checked
    assert "line 2 (_id 'b'): field 'answers'" in proc.stderr


def test_unknown_metric_and_misplaced_variant_are_usage_errors(tmp_path):
    path = _write_jsonl(tmp_path / "preds.jsonl", [{"_id": "a", "prediction": "x", "answers": ["x"]}])
    proc = lcp_score(str(path), "--metric", "longbench:nqa", check=False)
    assert proc.returncode != 0 and "unknown LongBench task 'nqa'" in proc.stderr
    proc = lcp_score(str(path), "--metric", "longbench:hotpotqa", "--variant", "paper", check=False)
    assert proc.returncode != 0 and "--variant applies to lveval" in proc.stderr
