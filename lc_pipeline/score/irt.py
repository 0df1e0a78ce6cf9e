"""Multidimensional two-parameter logistic (2PL) IRT, as MiniLongBench uses it.

Pure logic (numpy, torch on the CPU, scipy); no Dagster. Spec: ``shared/specs/minilongbench.md``
§3.3 (binarization), §4.2 (model, priors, training) and §5.2 (a new model's ability).

Model (the authors' code convention, used for training AND prediction; spec §4.2)::

    logit_ij = sum_k (alpha_jk * theta_ik - beta_j) = alpha_j . theta_i - d * beta_j
    P(Y_ij = 1) = sigmoid(logit_ij)

with ``theta_i`` the d-dim ability of model i, ``alpha_j`` the d-dim discrimination of sample j
and ``beta_j`` its scalar difficulty (it enters multiplied by d). At prediction time each of
the d summands is clipped to [-30, 30] before summing, as ``utils.item_curve`` does.

Training (:func:`fit_mirt`, ``method="vi"``, the default) reproduces py-irt's hierarchical
``multidim_2pl`` fitted by stochastic variational inference (one-sample ``Trace_ELBO``):

* priors: ``theta_ik ~ N(mu_theta_k, 1/u_theta_k)``, ``alpha_jk ~ N(mu_gamma_k, 1/u_gamma_k)``,
  ``beta_j ~ N(mu_b, 1/u_b)``; ``mu_* ~ N(0, 10)``, ``u_* ~ Gamma(1, 1)`` (second argument of N
  is the standard deviation);
* mean-field Normal guides (locs: theta 0, beta 0, alpha the PCA representation; scales 1),
  Normal guides for ``mu_*`` (loc 0, scale 1) and Gamma guides for ``u_*`` (1, 1);
* Adam (lr 0.1) with an exponential learning-rate decay of 0.9999 per epoch, 2,000 full-batch
  epochs, and the posterior means kept **at the epoch with the lowest loss**.

``method="map"`` is a cheaper, non-Bayesian alternative (Gaussian priors = L2 weight decay,
spec §4.2 "Why the regularization matters"); it is not the paper's method and, with its default
``l2 = 1`` on a summed likelihood, it ranks held-out models much worse in our cross-validation
(predict-mode Spearman 0.52-0.75 against 0.81-0.94 for ``vi``, benchmarks/README.md), so the
commands and assets always use ``vi``.

Everything is seeded and runs on the CPU in float32 under a forked torch RNG, so the same
inputs and seed give the same parameters (on the same machine and thread count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "THRESHOLD_GRID",
    "IRTFit",
    "binarization_threshold",
    "binarize",
    "fit_ability",
    "fit_mirt",
    "logits",
    "predict_proba",
]

# The authors' candidate thresholds (spec §3.3): np.linspace(0.01, 0.99, 100), strict ">".
THRESHOLD_GRID = np.linspace(0.01, 0.99, 100)
CLIP = 30.0  # per-summand clip of the logit at prediction time (spec §4.2)
EPS = 1e-10  # inside the logs of the ability fit (spec §5.2)


def _as_matrix(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"expected a (models x samples) matrix, got shape {y.shape}")
    return y


def binarization_threshold(scores: np.ndarray, grid: np.ndarray = THRESHOLD_GRID) -> float:
    """The threshold c on ``grid`` that makes each model's share of ``score > c`` closest to its
    mean score (spec §3.3, Eq. 3): ``argmin_c mean_i |mean_j 1[Y_ij > c] - mean_j Y_ij|``.

    ``scores`` is (models x samples) in [0, 1]; NaN marks a missing score and is left out of
    both means. The first minimum on the grid wins (``np.argmin``), as in the authors' code.
    """
    y = _as_matrix(scores)
    observed = ~np.isnan(y)
    if not observed.any():
        raise ValueError("no observed scores to choose a binarization threshold from")
    if np.nanmin(y) < 0 or np.nanmax(y) > 1:
        raise ValueError("scores must lie in [0, 1] (min-max normalize other metrics first, spec §3.3)")
    n_obs = observed.sum(axis=1)
    keep = n_obs > 0
    means = np.nansum(y, axis=1)[keep] / n_obs[keep]
    filled = np.where(observed, y, -np.inf)[keep]  # missing never counts as "> c"
    objective = [np.mean(np.abs((filled > c).sum(axis=1) / n_obs[keep] - means)) for c in grid]
    return float(grid[int(np.argmin(objective))])


def binarize(scores: np.ndarray, threshold: float) -> np.ndarray:
    """``1[score > threshold]`` as float, NaN (missing) kept as NaN."""
    y = np.asarray(scores, dtype=np.float64)
    return np.where(np.isnan(y), np.nan, (y > threshold).astype(np.float64))


def logits(theta: np.ndarray, alpha: np.ndarray, beta: np.ndarray, clip: float | None = CLIP) -> np.ndarray:
    """``sum_k clip(alpha_jk * theta_ik - beta_j)`` for every model i (rows) and sample j (columns).

    ``theta`` is (d,) or (m, d); ``alpha`` (n, d); ``beta`` (n,). A 1-d theta gives an (n,) result.
    """
    theta = np.asarray(theta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    single = theta.ndim == 1
    t = theta[None, :] if single else theta
    if clip is None:
        out = t @ alpha.T - alpha.shape[1] * beta[None, :]
    else:
        terms = alpha[None, :, :] * t[:, None, :] - beta[None, :, None]  # (m, n, d)
        out = np.clip(terms, -clip, clip).sum(axis=2)
    return out[0] if single else out


def predict_proba(theta: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """P(correct) under the clipped 2PL (see :func:`logits`)."""
    z = logits(theta, alpha, beta)
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class IRTFit:
    """Fitted parameters: ``alpha`` (n, d), ``beta`` (n,), ``theta`` (m, d) for the training
    models, the epoch whose parameters were kept and its loss, and the loss per epoch."""

    alpha: np.ndarray
    beta: np.ndarray
    theta: np.ndarray
    best_epoch: int
    best_loss: float
    method: str
    losses: list[float] = field(default_factory=list, repr=False)


def fit_mirt(
    responses: np.ndarray,
    alpha_init: np.ndarray | None = None,
    *,
    dims: int = 10,
    epochs: int = 2000,
    lr: float = 0.1,
    lr_decay: float = 0.9999,
    seed: int = 42,
    method: str = "vi",
    l2: float = 1.0,
    soft: bool = False,
) -> IRTFit:
    """Fit the multidimensional 2PL on binary ``responses`` (models x samples; NaN = missing).

    ``alpha_init`` (samples x dims) initializes the discriminations (MiniLongBench: the PCA-10
    representation of each sample); ``None`` starts them at 0 like py-irt without an initializer.
    ``method``: ``"vi"`` (the paper's hierarchical Bayesian model, see the module docstring) or
    ``"map"`` (Gaussian priors of precision ``l2`` on every parameter, point estimates).
    """
    import torch

    y = _as_matrix(responses)
    m, n = y.shape
    if m < 1 or n < 1:
        raise ValueError(f"need at least one model and one sample, got {y.shape}")
    mask_np = ~np.isnan(y)
    vals = y[mask_np]
    if soft:
        if vals.size and (vals.min() < 0 or vals.max() > 1):
            raise ValueError("soft responses must lie in [0, 1]")
    elif not np.isin(vals, (0.0, 1.0)).all():
        raise ValueError("responses must be binary (0/1); binarize continuous scores first (or pass soft=True)")
    if alpha_init is not None:
        alpha_init = np.asarray(alpha_init, dtype=np.float64)
        if alpha_init.shape != (n, dims):
            raise ValueError(f"alpha_init has shape {alpha_init.shape}, expected {(n, dims)}")
    if method not in ("vi", "map"):
        raise ValueError(f"method must be 'vi' or 'map', not {method!r}")
    if epochs < 1:
        raise ValueError("epochs must be >= 1")

    dt = torch.float32  # py-irt trains in float32; float64 costs 2-7x on a CPU for nothing here
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        obs = torch.tensor(np.nan_to_num(y), dtype=dt)
        mask = torch.tensor(mask_np, dtype=dt)
        full = bool(mask_np.all())
        a0 = torch.zeros(n, dims, dtype=dt) if alpha_init is None else torch.tensor(alpha_init, dtype=dt)

        def nll(theta, alpha, beta):
            z = theta @ alpha.T - dims * beta.reshape(1, -1)
            # Bernoulli(logits=z).log_prob(y) = y*z - softplus(z)
            ll = torch.nn.functional.softplus(z) - obs * z
            return ll.sum() if full else (ll * mask).sum()

        if method == "vi":
            params, step_loss, export = _vi_problem(torch, dt, m, n, dims, a0, nll)
        else:
            params, step_loss, export = _map_problem(torch, dt, m, n, dims, a0, nll, l2, seed)

        opt = torch.optim.Adam(params, lr=lr)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=lr_decay)
        best_loss, best_epoch, best = math.inf, -1, None
        losses: list[float] = []
        for epoch in range(epochs):
            opt.zero_grad(set_to_none=True)
            loss = step_loss()
            loss.backward()
            opt.step()
            sched.step()
            value = float(loss.detach())
            losses.append(value)
            # py-irt exports the parameters right after the step that reported the best loss.
            if value < best_loss:
                best_loss, best_epoch, best = value, epoch, export()
    assert best is not None
    theta, alpha, beta = best
    return IRTFit(alpha=alpha, beta=beta, theta=theta, best_epoch=best_epoch, best_loss=best_loss,
                  method=method, losses=losses)


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _vi_problem(torch, dt, m, n, dims, a0, nll):
    """Parameters, one-sample negative ELBO, and the exporter of posterior means (py-irt).

    The Normal densities are written out (z = loc + scale * eps, so log q = -eps^2/2 - log scale
    - log(2 pi)/2); this is the same objective as pyro's Trace_ELBO with reparameterized samples.
    """
    D = torch.distributions

    def zeros(*shape):
        return torch.zeros(shape, dtype=dt, requires_grad=True)

    # Guides; positive parameters live on the log scale (pyro's constraints.positive).
    p = {
        "loc_ability": zeros(m, dims),
        "log_scale_ability": zeros(m, dims),
        "loc_disc": a0.clone().requires_grad_(True),
        "log_scale_disc": zeros(n, dims),
        "loc_diff": zeros(n, 1),
        "log_scale_diff": zeros(n, 1),
    }
    for name, size in (("theta", dims), ("gamma", dims), ("b", 1)):
        for kind in ("loc_mu", "log_scale_mu", "log_alpha", "log_beta"):
            p[f"{kind}_{name}"] = zeros(size)
    prior_u = D.Gamma(torch.tensor(1.0, dtype=dt), torch.tensor(1.0, dtype=dt))
    mu_sd = 10.0

    def normal_sample(loc, log_scale):
        eps = torch.randn(loc.shape, dtype=dt)
        z = loc + log_scale.exp() * eps
        log_q = (-0.5 * eps.pow(2) - log_scale).sum() - _HALF_LOG_2PI * eps.numel()
        return z, log_q

    def normal_log_prob(z, mu, u):  # N(mu, sd = 1/u)
        return (-0.5 * ((z - mu) * u).pow(2) + torch.log(u)).sum() - _HALF_LOG_2PI * z.numel()

    def step_loss():
        log_p = torch.zeros((), dtype=dt)
        log_q = torch.zeros((), dtype=dt)
        hyper = {}
        for name in ("theta", "gamma", "b"):
            mu, lq_mu = normal_sample(p[f"loc_mu_{name}"], p[f"log_scale_mu_{name}"])
            q_u = D.Gamma(p[f"log_alpha_{name}"].exp(), p[f"log_beta_{name}"].exp())
            u = q_u.rsample()
            log_q = log_q + lq_mu + q_u.log_prob(u).sum()
            log_p = log_p + (-0.5 * (mu / mu_sd).pow(2)).sum() - (math.log(mu_sd) + _HALF_LOG_2PI) * mu.numel()
            log_p = log_p + prior_u.log_prob(u).sum()
            hyper[name] = (mu, u)
        latents = {}
        for name, loc, log_scale in (
            ("theta", "loc_ability", "log_scale_ability"),
            ("gamma", "loc_disc", "log_scale_disc"),
            ("b", "loc_diff", "log_scale_diff"),
        ):
            z, lq = normal_sample(p[loc], p[log_scale])
            mu, u = hyper[name]
            log_q = log_q + lq
            log_p = log_p + normal_log_prob(z, mu, u)
            latents[name] = z
        return nll(latents["theta"], latents["gamma"], latents["b"]) - log_p + log_q

    def export():
        return (
            p["loc_ability"].detach().numpy().astype(np.float64),
            p["loc_disc"].detach().numpy().astype(np.float64),
            p["loc_diff"].detach().numpy().reshape(-1).astype(np.float64),
        )

    return list(p.values()), step_loss, export


def _map_problem(torch, dt, m, n, dims, a0, nll, l2, seed):
    """Point estimates with Gaussian priors (L2) on theta, alpha and beta."""
    gen = torch.Generator().manual_seed(seed)
    theta = torch.randn(m, dims, dtype=dt, generator=gen).requires_grad_(True)  # theta ~ N(0, I)
    alpha = a0.clone().requires_grad_(True)
    beta = torch.zeros(n, dtype=dt, requires_grad=True)

    def step_loss():
        penalty = 0.5 * l2 * (theta.pow(2).sum() + alpha.pow(2).sum() + beta.pow(2).sum())
        return nll(theta, alpha, beta) + penalty

    def export():
        return tuple(t.detach().numpy().astype(np.float64) for t in (theta, alpha, beta))

    return [theta, alpha, beta], step_loss, export


def fit_ability(
    scores: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    x0: np.ndarray | None = None,
) -> np.ndarray:
    """A new model's ability theta from its scores on some samples, item parameters frozen.

    Spec §5.2: BFGS from theta = 0 on the cross-entropy
    ``-sum_j [y_j log(P_j + eps) + (1 - y_j) log(1 - P_j + eps)]`` with the clipped logit;
    ``scores`` are the raw scores in [0, 1] used as soft targets (the authors' code does not
    binarize them). ``alpha``/``beta`` are the rows of the observed samples, in the same order.
    """
    from scipy.optimize import minimize

    y = np.asarray(scores, dtype=np.float64).reshape(-1)
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    if not (len(y) == alpha.shape[0] == beta.shape[0]):
        raise ValueError(f"scores ({len(y)}), alpha ({alpha.shape[0]}) and beta ({beta.shape[0]}) disagree in length")
    if len(y) == 0:
        raise ValueError("no observed scores to fit an ability on")
    if np.isnan(y).any() or y.min() < 0 or y.max() > 1:
        raise ValueError("scores must be observed values in [0, 1]")
    d = alpha.shape[1]

    def objective(theta):
        terms = alpha * theta[None, :] - beta[:, None]
        inside = np.abs(terms) < CLIP
        z = np.clip(terms, -CLIP, CLIP).sum(axis=1)
        p = 1.0 / (1.0 + np.exp(-z))
        loss = -np.sum(y * np.log(p + EPS) + (1 - y) * np.log(1 - p + EPS))
        dl_dp = -y / (p + EPS) + (1 - y) / (1 - p + EPS)
        dl_dz = dl_dp * p * (1 - p)
        grad = (dl_dz[:, None] * alpha * inside).sum(axis=0)
        return loss, grad

    start = np.zeros(d) if x0 is None else np.asarray(x0, dtype=np.float64)
    res = minimize(objective, start, jac=True, method="BFGS")
    return res.x
