"""MiniLongBench on held-out models: leave-models-out cross-validation on the 20 real LLMs.

    python benchmarks/minilongbench_cv.py [--quick] [--folds 5] [--repeats 1] [--kmeans-seeds 1]
                                          [--draws 200] [--cache DIR] [--json FILE]

``--quick``: 500 IRT epochs and 20 random draws per fold (a few minutes on 2 cores); the default
(2,000 epochs, 200 draws) takes about 10 minutes per repeat.

Data: ``../shared/data/minilongbench/`` (per-sample LongBench scores of MiniLongBench's 20 training
LLMs, the released PCA-10 sample representations, the released 237-sample subset).

For each fold the models are split into training and held-out models. On the training models
only: binarization threshold, IRT fit (alpha initialized with the PCA-10 representations),
K-Means per category, subset (ratio 0.95 -> 237 of 4,750 samples). Each held-out model is then
estimated from its scores on the subset only, in every mode (``predict`` and ``direct`` as in
the paper, ``weighted`` and ``blend`` ours), and compared with its true overall LongBench score (mean of the 6 category means of task means over all
4,750 samples). The estimates of all folds are pooled and ranked against the truth (Spearman).

Beside every subset: random subsets with the same per-task counts, scored with the same fold's
item parameters and mode (``--draws`` per fold, pooled per draw the same way), and for
reference the released 237-sample subset scored with the same parameters (it was chosen by the
authors using all 20 models, so it has seen the held-out ones). Each repeat uses another fold
split and another seed for the IRT fit and K-Means (seed, seed + 1, ...). Which samples one
K-Means run picks moves the held-out Spearman by more than any method choice, so
``--kmeans-seeds N`` re-runs the selection N times on each fold's IRT fit (seeds seed, seed +
1009, ...; the first is what ``lcp minilongbench fit`` would pick) and reports the spread over
them; ``--candidates C`` is the fit's number of K-Means runs per selection (1 = the paper's one run).
``--cache DIR`` keeps each fold's fitted model (the ``lcp minilongbench fit`` directory format) so
a rerun skips the IRT fits. Finally, unless ``--no-in-sample``, the paper's "train" figure: fit
on all models, estimate the same models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline.score import minilongbench as mlbm

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "minilongbench"


def load(data: Path) -> tuple[mlbm.ScoreMatrix, np.ndarray, np.ndarray | None]:
    matrix = mlbm.ScoreMatrix.from_frame(pl.read_parquet(data / "scores_train_models.parquet"))
    reps = mlbm.representations_from_frame(pl.read_parquet(data / "sample_pca10.parquet"), matrix.samples, 10)
    released = None
    if (data / "released_subset_237.json").exists():
        ids = json.loads((data / "released_subset_237.json").read_text())
        index = {s: i for i, s in enumerate(matrix.samples.tolist())}
        released = np.sort(np.array([index[s] for s in ids]))
    return matrix, reps, released


def folds_of(models: tuple[str, ...], k: int, seed: int) -> list[list[str]]:
    order = list(np.random.default_rng(seed).permutation(len(models)))
    return [[models[i] for i in order[f::k]] for f in range(k)]


def fit_cached(matrix: mlbm.ScoreMatrix, reps: np.ndarray, cache: Path | None, **kw) -> tuple[mlbm.MiniLongBench, float]:
    """``mlbm.fit`` on ``matrix``, kept under ``cache`` keyed by the training models and settings."""
    key = hashlib.sha256(json.dumps([list(matrix.models), sorted(kw.items())], default=str).encode()).hexdigest()[:16]
    where = cache / key if cache else None
    if where and (where / "meta.json").exists():
        return mlbm.MiniLongBench.load(where), 0.0
    t0 = time.perf_counter()
    mlb = mlbm.fit(matrix, reps, **kw)
    if where:
        mlb.save(where)
    return mlb, time.perf_counter() - t0


def reselect(mlb: mlbm.MiniLongBench, train: mlbm.ScoreMatrix, seed: int, candidates: int) -> mlbm.MiniLongBench:
    """The same IRT parameters, the subset chosen again as ``lcp minilongbench fit`` would with this
    seed and number of K-Means candidates (so a cached fit serves any selection setting)."""
    sel, _ = mlbm.choose_subset(train, mlb.alpha, mlb.beta, mlb.categories, len(mlb.subset), seed, candidates)
    return mlbm.MiniLongBench(samples=mlb.samples, tasks=mlb.tasks, categories=mlb.categories, alpha=mlb.alpha,
                              beta=mlb.beta, subset=sel.indices, threshold=mlb.threshold, meta=dict(mlb.meta),
                              cluster=sel.cluster, cluster_group=sel.cluster_group, cluster_weight=sel.cluster_weight)


def cross_validate(
    matrix: mlbm.ScoreMatrix,
    reps: np.ndarray,
    released: np.ndarray | None,
    *,
    folds: int = 5,
    repeats: int = 1,
    seed: int = 42,
    ratio: float = 0.95,
    epochs: int = 2000,
    draws: int = 200,
    method: str = "vi",
    kmeans_seeds: int = 1,
    candidates: int = 8,
    cache: Path | None = None,
    in_sample_check: bool = True,
    log=print,
) -> dict:
    truth_all = mlbm.true_scores(matrix)
    modes = mlbm.MODES
    runs = []
    for rep in range(repeats):
        split_seed = seed + rep
        kseeds = [split_seed + 1009 * i for i in range(kmeans_seeds)]  # far apart: each uses `candidates` seeds
        est = {f"{m}": {} for m in modes}
        est.update({f"released/{m}": {} for m in modes} if released is not None else {})
        per_kseed = {k: {m: {} for m in modes} for k in kseeds}  # K-Means seed -> mode -> model -> estimate
        baseline = {m: {} for m in modes}  # model -> (draws,) overall estimates
        sizes, fold_info = [], []
        for f, held in enumerate(folds_of(matrix.models, folds, split_seed)):
            train = [m for m in matrix.models if m not in held]
            train_matrix = matrix.select_models(train)
            mlb, fit_s = fit_cached(train_matrix, reps, cache, ratio=ratio, seed=split_seed,
                                    epochs=epochs, method=method, representation="released PCA-10")
            mlb = reselect(mlb, train_matrix, split_seed, candidates)
            obs = matrix.select_models(held).scores
            for k in kseeds:
                other = mlb if k == split_seed else reselect(mlb, train_matrix, k, candidates)
                for mode in modes:
                    for m, e in zip(held, other.estimate_many(obs, mode)):
                        per_kseed[k][mode][m] = e.overall
            for mode in modes:
                for m, e in zip(held, mlb.estimate_many(obs, mode)):
                    est[mode][m] = e.overall
                if released is not None:
                    for m, e in zip(held, mlb.estimate_many(obs, mode, subset=released)):
                        est[f"released/{mode}"][m] = e.overall
                if draws:
                    b = mlbm.random_baseline_estimates(mlb, obs, draws, seed=1000 * (rep + 1) + f, mode=mode)
                    for i, m in enumerate(held):
                        baseline[mode][m] = b[:, i]
            sizes.append(len(mlb.subset))
            fold_info.append({"held_out": held, "threshold": mlb.threshold, "subset_size": len(mlb.subset),
                              "task_counts": mlb.subset_task_counts(), "fit_seconds": round(fit_s, 1),
                              "best_epoch": mlb.meta["irt"].get("best_epoch")})
            log(f"  repeat {rep} fold {f}: held out {len(held)}, threshold {mlb.threshold:.4f}, "
                f"subset {len(mlb.subset)}, fit {fit_s:.0f}s")
        models = list(matrix.models)
        truth = [truth_all[m].overall for m in models]
        res = {"split_seed": split_seed, "folds": fold_info, "methods": {}}
        if kmeans_seeds > 1:
            res["kmeans_seeds"] = {
                mode: {str(k): {"spearman": mlbm.spearman([per_kseed[k][mode][m] for m in models], truth),
                                "mae": float(np.mean(np.abs(np.array([per_kseed[k][mode][m] for m in models]) - truth)))}
                       for k in kseeds}
                for mode in modes
            }
        for name, per_model in est.items():
            x = [per_model[m] for m in models]
            res["methods"][name] = {
                "spearman": mlbm.spearman(x, truth),
                "kendall": _kendall(x, truth),
                "mae": float(np.mean(np.abs(np.array(x) - truth))),
                "estimates": dict(zip(models, x)),
            }
        if draws:
            for mode in modes:
                rhos = np.array([mlbm.spearman([baseline[mode][m][d] for m in models], truth) for d in range(draws)])
                ours = res["methods"][mode]["spearman"]
                res["methods"][f"random/{mode}"] = {
                    "draws": draws,
                    "spearman_median": float(np.median(rhos)),
                    "spearman_mean": float(np.mean(rhos)),
                    "spearman_p10": float(np.quantile(rhos, 0.1)),
                    "spearman_p90": float(np.quantile(rhos, 0.9)),
                    "share_at_least_ours": float(np.mean(rhos >= ours)),
                }
        runs.append(res)
    in_sample = None
    if in_sample_check:
        # The paper's "train" column: fit on every model, estimate the same models from the subset.
        mlb, _ = fit_cached(matrix, reps, cache, ratio=ratio, seed=seed, epochs=epochs, method=method,
                            representation="released PCA-10")
        mlb = reselect(mlb, matrix, seed, candidates)
        truth = [truth_all[m].overall for m in matrix.models]
        in_sample = {"subset_task_counts": mlb.subset_task_counts(), "threshold": mlb.threshold}
        for mode in modes:
            x = [e.overall for e in mlb.estimate_many(matrix.scores, mode)]
            in_sample[mode] = {"spearman": mlbm.spearman(x, truth), "kendall": _kendall(x, truth)}
            if draws:
                b = mlbm.random_baseline_estimates(mlb, matrix.scores, draws, seed=seed, mode=mode)
                rhos = np.array([mlbm.spearman(r, truth) for r in b])
                in_sample[f"random/{mode}"] = {"spearman_median": float(np.median(rhos)),
                                               "share_at_least_ours": float(np.mean(rhos >= in_sample[mode]["spearman"]))}
        log("  in-sample (all {} models): {}".format(
            len(matrix.models), ", ".join(f"{m} {in_sample[m]['spearman']:.3f}" for m in modes)))
    return {
        "in_sample": in_sample,
        "n_models": len(matrix.models),
        "n_samples": len(matrix.samples),
        "ratio": ratio,
        "subset_size": sizes[0] if runs else None,
        "folds": folds,
        "repeats": repeats,
        "epochs": epochs,
        "method": method,
        "kmeans_seeds": kmeans_seeds,
        "candidates": candidates,
        "seed": seed,
        "truth": {m: truth_all[m].overall for m in matrix.models},
        "runs": runs,
    }


def _kendall(x, y) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(x, y).statistic)


def summary_rows(result: dict) -> list[tuple]:
    rows = []
    names = list(result["runs"][0]["methods"])
    for name in names:
        per_run = [r["methods"][name] for r in result["runs"]]
        if name.startswith("random/"):
            rows.append((name, "median " + _f([p["spearman_median"] for p in per_run]),
                         "p10-p90 " + _f([p["spearman_p10"] for p in per_run]) + "-" + _f([p["spearman_p90"] for p in per_run]),
                         "share>=ours " + _f([p["share_at_least_ours"] for p in per_run])))
        else:
            rows.append((name, "rho " + _f([p["spearman"] for p in per_run]), "tau " + _f([p["kendall"] for p in per_run]),
                         "MAE " + _f([p["mae"] for p in per_run])))
    return rows


def kmeans_rows(result: dict) -> list[tuple]:
    """Per mode: Spearman over every (repeat, K-Means seed) subset: mean, median, min; mean MAE."""
    rows = []
    for mode in mlbm.MODES:
        vals = [v for r in result["runs"] if "kmeans_seeds" in r for v in r["kmeans_seeds"][mode].values()]
        if vals:
            rho = [v["spearman"] for v in vals]
            rows.append((mode, f"{len(vals)} subsets", f"rho mean {np.mean(rho):.3f} median {np.median(rho):.3f} "
                         f"min {np.min(rho):.3f}", f"MAE {np.mean([v['mae'] for v in vals]):.4f}"))
    return rows


def _f(vals: list[float]) -> str:
    return f"{np.mean(vals):.3f}" if len(vals) == 1 else f"{np.mean(vals):.3f}(±{np.std(vals):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="fewer IRT epochs and random draws (minutes, not tens)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=1,
                    help="independent runs: fold split and fit seed seed, seed+1, ...")
    ap.add_argument("--no-in-sample", action="store_true", help="skip the fit on all models")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ratio", type=float, default=0.95)
    ap.add_argument("--epochs", type=int, default=None, help="IRT epochs (default 2000; --quick 500)")
    ap.add_argument("--draws", type=int, default=None, help="random subsets per fold (default 200; --quick 20)")
    ap.add_argument("--method", choices=["vi", "map"], default="vi")
    ap.add_argument("--kmeans-seeds", type=int, default=1, help="subsets per fold on the same IRT fit (other seeds)")
    ap.add_argument("--candidates", type=int, default=8, help="K-Means runs per subset (lcp minilongbench fit --candidates)")
    ap.add_argument("--cache", type=Path, default=None, help="keep fitted fold models here (reruns skip the IRT fit)")
    ap.add_argument("--json", type=Path, default=Path("minilongbench_cv.json"))
    args = ap.parse_args()
    if not (args.data / "scores_train_models.parquet").exists():
        raise SystemExit(f"no data at {args.data} (expected scores_train_models.parquet there)")
    epochs = args.epochs or (500 if args.quick else 2000)
    draws = args.draws if args.draws is not None else (20 if args.quick else 200)
    matrix, reps, released = load(args.data)
    print(f"{len(matrix.models)} models x {len(matrix.samples)} samples; {args.folds}-fold leave-models-out, "
          f"{args.candidates} K-Means candidate(s) per subset, "
          f"{args.repeats} repeat(s), ratio {args.ratio}, IRT {args.method} {epochs} epochs, {draws} random draws/fold",
          flush=True)
    t0 = time.perf_counter()
    result = cross_validate(matrix, reps, released, folds=args.folds, repeats=args.repeats, seed=args.seed,
                            ratio=args.ratio, epochs=epochs, draws=draws, method=args.method,
                            kmeans_seeds=args.kmeans_seeds, candidates=args.candidates, cache=args.cache,
                            in_sample_check=not args.no_in_sample, log=lambda s: print(s, flush=True))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print()
    print(f"Spearman of estimated vs true overall score, {len(matrix.models)} held-out estimates pooled over folds "
          f"(subset {result['subset_size']} of {result['n_samples']}):")
    rows = summary_rows(result)
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + " | ".join(c.ljust(w) for c, w in zip(r, widths)))
    krows = kmeans_rows(result)
    if krows:
        print(f"Over {args.kmeans_seeds} K-Means seeds per fold (same IRT fits):")
        widths = [max(len(r[i]) for r in krows) for i in range(4)]
        for r in krows:
            print("  " + " | ".join(c.ljust(w) for c, w in zip(r, widths)))
    ins = result.get("in_sample")
    if ins:
        line = ", ".join(f"{m} {ins[m]['spearman']:.3f}" + (f" (random median {ins['random/' + m]['spearman_median']:.3f})"
                                                            if f"random/{m}" in ins else "") for m in mlbm.MODES)
        print(f"In-sample (fit on all {result['n_models']} models, estimate the same models): {line}")
    print(f"({result['seconds']:.0f}s)")
    args.json.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
