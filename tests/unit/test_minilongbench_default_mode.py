"""MiniLongBench's default estimate is the one the leave-models-out validation chose (issue 30).

``benchmarks/minilongbench_validation.py`` wrote ``benchmarks/results/minilongbench_validation.json`` (many held-out
splits, refitted item parameters, random stratified subsets of the same per-task counts beside every mode); its
choice must be ``model.DEFAULT_MODE`` and the choice rule applied to its figures must give it back. A small
version of the same script runs here on the shared data (skipped with a reason when ``../shared`` is absent):
its vectorised estimates agree with the package's, and the figures that do not depend on the run's size agree
with the stored run's.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "minilongbench_validation.py"
RESULTS = ROOT / "benchmarks" / "results" / "minilongbench_validation.json"
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or ROOT.parent / "shared" / "data")
DATA = SHARED / "minilongbench"
OFFICIAL = SHARED.parent / "official"


def _script():
    spec = importlib.util.spec_from_file_location("minilongbench_validation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_mode_is_the_stored_validations_choice():
    from lc_pipeline.benchmarks import minilongbench as mlbm

    stored = json.loads(RESULTS.read_text())
    v = _script()
    refit = stored["refit"]["summary"]
    assert stored["choice_from"] == "refit" and stored["refit"]["fits"] >= 4
    assert v.choose(refit) == stored["choice"] == mlbm.DEFAULT_MODE
    # the choice is the highest median held-out Spearman; every mode's spread is stored
    assert refit[mlbm.DEFAULT_MODE]["median"] == max(refit[m]["median"] for m in mlbm.MODES)
    assert {"median", "iqr", "min", "reaches_random_median"} <= set(refit[mlbm.DEFAULT_MODE])
    assert stored["released"]["splits"] >= 50 and stored["released"]["draws"] >= 50


@pytest.mark.skipif(not (DATA / "scores_train_models.parquet").is_file()
                    or not (OFFICIAL / "MilkThink-Lab+MiniLongBench").is_dir(),
                    reason=f"needs the shared MiniLongBench data ({DATA}) and the authors' files ({OFFICIAL})")
def test_a_small_validation_run_agrees_with_the_package_and_the_stored_run(monkeypatch, tmp_path):
    from lc_pipeline.benchmarks import minilongbench as mlbm

    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    v = _script()
    matrix, _ = v.load(DATA)
    alpha, beta, pos, _ = v.released_parameters(matrix)
    # the vectorised direct and predict estimates are the package's
    direct = matrix.scores[:3] @ v.overall_weights(matrix.tasks, matrix.categories, pos)
    w_full = v.overall_weights(matrix.tasks, matrix.categories, np.arange(len(matrix.samples)))
    predict = v.predict_overall(matrix.scores[:3], pos, alpha, beta, w_full)
    mlb = mlbm.MiniLongBench(samples=matrix.samples, tasks=matrix.tasks, categories=matrix.categories, alpha=alpha,
                             beta=beta, subset=pos, threshold=0.5)
    assert direct == pytest.approx([e.overall for e in mlb.estimate_many(matrix.scores[:3], "direct")])
    assert predict == pytest.approx([e.overall for e in mlb.estimate_many(matrix.scores[:3], "predict")])
    assert v.spearman_rows(np.array([[1.0, 2, 3], [3, 2, 1]]), np.array([1.0, 2, 4])).tolist() == [1.0, -1.0]

    small = v.run(DATA, splits=30, held_out=10, draws=3, fits=1, draws_fit=1, epochs=10, seed=42, cache=None,
                  log=lambda s: None)
    stored = json.loads(RESULTS.read_text())
    # estimates of all 20 models from the released parameters do not depend on the run's size
    assert small["released"]["all_models_spearman"] == pytest.approx(stored["released"]["all_models_spearman"])
    assert len(small["refit"]["units"]) == 2  # one fit: its K-Means subset and the released 237
    for mode in mlbm.MODES:
        s = small["refit"]["summary"][mode]
        assert -1 <= s["min"] <= s["median"] <= 1 and s["n"] == 2
    assert small["choice"] in mlbm.MODES
