"""MiniLongBench: which estimate ranks models it has not seen, with its spread (issue 30; chooses DEFAULT_MODE).

    python benchmarks/minilongbench_validation.py [--quick] [--splits 200] [--draws 100] [--fits 4] [--epochs 300]
                                                  [--cache DIR] [--json benchmarks/results/minilongbench_validation.json]

Data: ``../shared/data/minilongbench/`` (per-sample LongBench scores of the 20 training LLMs, the released PCA-10
representations) and, for the released item parameters, the authors' ``best_parameters.json`` through
``$LCP_OFFICIAL`` (default ``../shared/official``). Two parts, every estimate scored against the true
full-benchmark score (task -> category -> overall) by Spearman over the held-out models:

A. **Released parameters, many splits** (``--splits`` random held-out sets of ``--held-out`` models, the released
   237-sample subset): ``direct`` (= ``weighted``: the given subset has no clusters), ``predict`` and ``blend``
   with the authors' α/β (``irt: released``), and ``--draws`` random stratified subsets of the same per-task
   counts scored ``direct`` (the baseline) and ``predict``. Nothing is fitted, so every split is cheap; but the
   released α/β and subset were made with all 20 models, so ``predict``/``blend`` here are in-sample for the
   items (an upper bound for them) and only ``direct`` and the random baseline are honest.
B. **Refitted, held out** (the path ``lcp minilongbench fit`` and ``minilongbench_subset`` take): ``--fits`` random
   splits into ``20 - held-out`` training and ``held-out`` held-out models; on the training models the threshold
   and the 2PL (``--epochs``; alpha from PCA-10) are fitted and the subset selected as ``fit`` does (8 K-Means
   candidates judged by blend), plus the released 237 subset; the held-out models are estimated in every mode
   from their subset scores only, beside ``--draws-fit`` random stratified subsets scored ``direct`` and
   ``predict`` with the same fold's parameters. One unit = (fit, subset).

Per mode: the median, IQR and minimum of the Spearman over units, the median random stratified subset's, and the
share of units where the mode reaches at least its random median. **The choice**: the mode with the highest
median Spearman over part B's units (the estimate a user of ``fit`` gets on models it has not seen), ties to the
one with the higher minimum; part A is reported beside it. The test
``tests/unit/test_minilongbench_default_mode.py`` checks that ``model.DEFAULT_MODE`` is this choice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import rankdata

from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.benchmarks.minilongbench.baseline import random_stratified_subset
from lc_pipeline.benchmarks.minilongbench.fitting import (
    choose_subset,
    from_parameters,
    given_subset,
)
from lc_pipeline.benchmarks.minilongbench.validation import with_selection
from lc_pipeline.score import irt

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "minilongbench"
DEFAULT_OFFICIAL = REPO.parent / "shared" / "official"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "minilongbench_validation.json"
MODES = ("predict", "direct", "weighted", "blend")


# -- vectorised pieces ---------------------------------------------------------------------------------------

def overall_weights(tasks: np.ndarray, categories: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """w (n,) with ``scores @ w`` = the mean over categories of the mean over their tasks of the mean of the
    task's samples among ``positions`` (tasks without one are left out, as :func:`aggregate` does)."""
    w = np.zeros(len(tasks))
    sub_t = tasks[positions]
    present = sorted(set(sub_t.tolist()))
    cat_of = dict(zip(tasks.tolist(), categories.tolist()))
    cats = sorted({cat_of[t] for t in present})
    for t in present:
        here = positions[sub_t == t]
        n_tasks = sum(1 for u in present if cat_of[u] == cat_of[t])
        w[here] += 1.0 / (len(cats) * n_tasks * len(here))
    return w


def spearman_rows(estimates: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Spearman along the last axis of ``estimates`` (..., m) and ``truth`` (broadcast to it): Pearson of
    average ranks."""
    r = rankdata(estimates, axis=-1)
    t = rankdata(truth, axis=-1)
    r = r - r.mean(axis=-1, keepdims=True)
    t = t - t.mean(axis=-1, keepdims=True)
    den = np.sqrt((r * r).sum(axis=-1) * (t * t).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (r * t).sum(axis=-1) / den


def predict_overall(obs: np.ndarray, positions: np.ndarray, alpha: np.ndarray, beta: np.ndarray,
                    w_full: np.ndarray) -> np.ndarray:
    """``predict`` overall per row of ``obs`` (models x n) from its scores on ``positions``: ability by BFGS,
    the 2PL elsewhere, observed scores kept (Eq. 4), aggregated with the full benchmark's weights."""
    out = np.empty(len(obs))
    for i, row in enumerate(obs):
        theta = irt.fit_ability(row[positions], alpha[positions], beta[positions])
        p = irt.predict_proba(theta, alpha, beta)
        p[positions] = row[positions]
        out[i] = p @ w_full
    return out


def spread(values) -> dict:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "q1": float(q1), "q3": float(q3), "iqr": float(q3 - q1), "min": float(v.min()),
            "max": float(v.max()), "n": int(v.size)}


def summarize(per_unit: dict[str, list[float]], random_median: list[float]) -> dict:
    """Per mode its spread and the share of units where it reaches at least the unit's random median."""
    rm = np.asarray(random_median)
    out = {mode: {**spread(v), "reaches_random_median": float(np.mean(np.asarray(v) >= rm - 1e-12))}
           for mode, v in per_unit.items()}
    out["random (direct)"] = spread(rm)
    return out


def choose(summary: dict) -> str:
    """The mode with the highest median Spearman; ties (within 1e-9) to the higher minimum."""
    modes = [m for m in MODES if m in summary]
    return max(modes, key=lambda m: (round(summary[m]["median"], 9), summary[m]["min"]))


# -- the two parts -------------------------------------------------------------------------------------------

def part_released(matrix, alpha, beta, subset_pos, *, splits, held_out, draws, seed, log) -> dict:
    """Part A (module docstring): estimates of every model once, Spearman over many held-out sets."""
    rng = np.random.default_rng([seed, 1])
    tasks, cats, y = matrix.tasks, matrix.categories, matrix.scores
    truth = y @ overall_weights(tasks, cats, np.arange(len(tasks)))
    w_full = overall_weights(tasks, cats, np.arange(len(tasks)))
    direct = y @ overall_weights(tasks, cats, subset_pos)
    predict = predict_overall(y, subset_pos, alpha, beta, w_full)
    est = {"predict": predict, "direct": direct, "weighted": direct, "blend": 0.5 * direct + 0.5 * predict}
    counts = {t: int(c) for t, c in zip(*np.unique(tasks[subset_pos], return_counts=True))}
    r_direct, r_predict = np.empty((draws, len(y))), np.empty((draws, len(y)))
    t0 = time.perf_counter()
    for d in range(draws):
        sub = random_stratified_subset(tasks, counts, rng)
        r_direct[d] = y @ overall_weights(tasks, cats, sub)
        r_predict[d] = predict_overall(y, sub, alpha, beta, w_full)
    log(f"  part A: {draws} random subsets x {len(y)} models in {time.perf_counter() - t0:.0f}s")
    held = np.array([np.sort(rng.choice(len(y), size=held_out, replace=False)) for _ in range(splits)])
    per_unit = {m: spearman_rows(e[held], truth[held]).tolist() for m, e in est.items()}
    rand = spearman_rows(r_direct[:, held], truth[held])  # (draws, splits)
    rand_pred = spearman_rows(r_predict[:, held], truth[held])
    summary = summarize(per_unit, np.median(rand, axis=0).tolist())
    summary["random (predict)"] = spread(np.median(rand_pred, axis=0))
    return {"splits": splits, "held_out": held_out, "draws": draws, "summary": summary,
            "all_models_spearman": {m: float(spearman_rows(e, truth)) for m, e in est.items()}}


def part_refit(matrix, reps, released_ids, *, fits, held_out, draws, epochs, seed, cache, log) -> dict:
    """Part B (module docstring): ``fits`` refits, each with a K-Means and the released subset."""
    tasks, cats = matrix.tasks, matrix.categories
    w_full = overall_weights(tasks, cats, np.arange(len(tasks)))
    truth_all = matrix.scores @ w_full
    per_unit = {m: [] for m in MODES}
    rand_med, rand_pred_med, units = [], [], []
    for f in range(fits):
        rng = np.random.default_rng([seed, 2, f])
        order = rng.permutation(len(matrix.models))
        held, train_idx = np.sort(order[:held_out]), np.sort(order[held_out:])
        train = matrix.select_models([matrix.models[i] for i in train_idx])
        fitted = _fit(train, reps, epochs, seed + f, cache, log)
        obs, truth = matrix.scores[held], truth_all[held]
        kmeans, _ = choose_subset(train, fitted.alpha, fitted.beta, cats, len(fitted.subset), seed + f, 8)
        for name, sel in (("k-means", kmeans), ("released 237", given_subset(train, released_ids, cats))):
            mlb = with_selection(fitted, sel)
            est = {m: np.array([e.overall for e in mlb.estimate_many(obs, m)]) for m in MODES}
            counts = mlb.subset_task_counts()
            r_direct, r_predict = np.empty((draws, len(held))), np.empty((draws, len(held)))
            for d in range(draws):
                sub = random_stratified_subset(tasks, counts, rng)
                r_direct[d] = obs @ overall_weights(tasks, cats, sub)
                r_predict[d] = predict_overall(obs, sub, fitted.alpha, fitted.beta, w_full)
            unit = {m: float(spearman_rows(e, truth)) for m, e in est.items()}
            for m in MODES:
                per_unit[m].append(unit[m])
            rand_med.append(float(np.median(spearman_rows(r_direct, truth))))
            rand_pred_med.append(float(np.median(spearman_rows(r_predict, truth))))
            units.append({"fit": f, "subset": name, "held_out": [matrix.models[i] for i in held],
                          "spearman": unit, "random_median_direct": rand_med[-1],
                          "random_median_predict": rand_pred_med[-1]})
            log(f"  part B fit {f} {name}: " + ", ".join(f"{m} {v:.3f}" for m, v in unit.items())
                + f"; random median {rand_med[-1]:.3f}")
    summary = summarize(per_unit, rand_med)
    summary["random (predict)"] = spread(rand_pred_med)
    by_subset = {}
    for name in ("k-means", "released 237"):
        keep = [i for i, u in enumerate(units) if u["subset"] == name]
        by_subset[name] = summarize({m: [per_unit[m][i] for i in keep] for m in MODES}, [rand_med[i] for i in keep])
    return {"fits": fits, "by_subset": by_subset, "held_out": held_out, "draws": draws, "epochs": epochs, "summary": summary, "units": units}


def _fit(train, reps, epochs, seed, cache: Path | None, log):
    key = hashlib.sha256(json.dumps([list(train.models), epochs, seed]).encode()).hexdigest()[:16]
    where = cache / key if cache else None
    if where and (where / "meta.json").exists():
        return mlbm.MiniLongBench.load(where)
    t0 = time.perf_counter()
    mlb = mlbm.fit(train, reps, epochs=epochs, seed=seed, candidates=1, representation="released PCA-10")
    log(f"  IRT fit on {len(train.models)} models ({epochs} epochs): {time.perf_counter() - t0:.0f}s")
    if where:
        mlb.save(where)
    return mlb


def load(data: Path):
    matrix = mlbm.ScoreMatrix.from_frame(pl.read_parquet(data / "scores_train_models.parquet"))
    reps = mlbm.representations_from_frame(pl.read_parquet(data / "sample_pca10.parquet"), matrix.samples, 10)
    return matrix, reps


def released_parameters(matrix):
    """The authors' α/β in the matrix's sample order and the released subset (positions, ids)."""
    from lc_pipeline.benchmarks.minilongbench.released_irt import item_parameters
    from lc_pipeline.benchmarks.minilongbench.subset import released_sample_ids

    ids = list(released_sample_ids())
    alpha, beta = item_parameters(matrix.samples)
    pos = from_parameters(matrix, alpha, beta, subset_ids=ids).subset
    return alpha, beta, pos, ids


def run(data: Path, *, splits: int, held_out: int, draws: int, fits: int, draws_fit: int, epochs: int, seed: int,
        cache: Path | None, log=print) -> dict:
    matrix, reps = load(data)
    alpha, beta, pos, ids = released_parameters(matrix)
    t0 = time.perf_counter()
    out = {"models": len(matrix.models), "samples": len(matrix.samples), "seed": seed}
    out["released"] = part_released(matrix, alpha, beta, pos, splits=splits, held_out=held_out, draws=draws,
                                    seed=seed, log=log)
    if fits:
        out["refit"] = part_refit(matrix, reps, ids, fits=fits, held_out=held_out, draws=draws_fit, epochs=epochs,
                                  seed=seed, cache=cache, log=log)
    out["choice"] = choose(out["refit"]["summary"] if fits else out["released"]["summary"])
    out["choice_from"] = "refit" if fits else "released"
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def table(summary: dict) -> list[str]:
    rows = ["| mode | median ρ | IQR | min | reaches random median |", "|---|---|---|---|---|"]
    for mode, s in summary.items():
        reach = f"{s['reaches_random_median']:.0%}" if "reaches_random_median" in s else "–"
        rows.append(f"| {mode} | {s['median']:.3f} | {s['q1']:.3f}–{s['q3']:.3f} | {s['min']:.3f} | {reach} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="part A only, 30 splits, 10 draws (the test's size)")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--held-out", type=int, default=10)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--fits", type=int, default=4)
    ap.add_argument("--draws-fit", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = ap.parse_args()
    os.environ.setdefault("LCP_OFFICIAL", str(DEFAULT_OFFICIAL))
    if args.quick:
        args.splits, args.draws, args.fits = 30, 10, 0
    log = lambda s: print(s, flush=True)
    result = run(args.data, splits=args.splits, held_out=args.held_out, draws=args.draws, fits=args.fits,
                 draws_fit=args.draws_fit, epochs=args.epochs, seed=args.seed, cache=args.cache, log=log)
    result["settings"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    for part in ("released", "refit"):
        if part in result:
            print(f"\n{part}:")
            print("\n".join(table(result[part]["summary"])))
            for name, summary in result[part].get("by_subset", {}).items():
                print(f"\n{part}, {name} subset only:")
                print("\n".join(table(summary)))
    print(f"\nchoice ({result['choice_from']}): {result['choice']} ({result['seconds']:.0f}s)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
