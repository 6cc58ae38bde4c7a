#!/usr/bin/python3
"""Reference data from scikit-learn's GaussianMixture for the EM unit test.

What it makes
-------------
A JSON object (printed to stdout) holding

* a fixed data set ``x``: N = 60 points in D = 2 drawn with
  ``numpy.random.default_rng(20261122)`` from K = 3 well-separated Gaussian
  clusters with different covariances (20 points each, then shuffled);
* fixed initial parameters ``init``: ``means`` (K x D, three distinct data
  points chosen by the same rng, all from the first cluster), ``precisions``
  (K x D x D, identity matrices) and ``weights`` (K, uniform 1/K).  The
  deliberately poor start (all three means in one cluster) keeps EM moving
  for all 20 steps, so the log-likelihood rises strictly at every step and
  every recorded iteration is informative; a start with one mean per
  cluster converges in ~3 steps and then only shows round-off noise;
* ``initial_mean_log_likelihood``: (1/N) * sum_n log sum_k
  pi_k N(x_n | mu_k, P_k^-1) for the initial parameters, computed directly
  with scipy/numpy;
* ``iterations``: 20 entries; entry k-1 holds ``means``, ``precisions``,
  ``weights`` and ``mean_log_likelihood`` (``GaussianMixture.score(x)``)
  after exactly k EM steps, taken from
  ``GaussianMixture(n_components=3, covariance_type='full', reg_covar=1e-6,
  tol=0, max_iter=k, init_params='random', means_init=..., precisions_init=...,
  weights_init=..., random_state=0).fit(x)``.

All floats are written with Python's shortest round-trip repr (full double
precision).

Checks (reported on stderr, exit status 1 on failure)
-----------------------------------------------------
* the mean log-likelihood never decreases over the 20 iterations;
* one hand-written numpy EM step (the semantics the compiler must reproduce)
  maps the parameters after k steps to those after k + 1 steps (and the
  initial parameters to those after 1 step) to within 1e-10.

The EM step (full covariances, regularisation reg_covar):
  E-step:  r_nk = pi_k N(x_n | mu_k, Sigma_k) / sum_j pi_j N(x_n | mu_j, Sigma_j)
           with Sigma_k = P_k^-1 (evaluated in log space with log-sum-exp)
  M-step:  n_k     = sum_n r_nk
           pi_k'   = n_k / N
           mu_k'   = (1/n_k) sum_n r_nk x_n
           Sigma_k' = (1/n_k) sum_n r_nk (x_n - mu_k')(x_n - mu_k')^T
                      + reg_covar * I
           P_k'    = (Sigma_k')^-1
(scikit-learn adds 10 * machine-epsilon to n_k before dividing, which is a
~1e-15 relative effect and far below the test tolerance.)

How to re-run
-------------
Requires Debian's python3 with python3-sklearn (``apt-get install -y
python3-sklearn``); from the repository root:

    /usr/bin/python3 tests/unit/compiler/Dynamics/gmm_reference.py > tests/unit/compiler/Dynamics/gmm_reference.json
"""

import json
import sys
import warnings

import numpy as np
import sklearn
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

N, D, K = 60, 2, 3
REG_COVAR = 1e-6
N_ITER = 20
SEED = 20261122
TOLERANCE = 1e-10


def make_data():
    rng = np.random.default_rng(SEED)
    centers = np.array([[0.0, 0.0], [7.0, 1.0], [3.0, 7.0]])
    covariances = np.array(
        [
            [[1.0, 0.3], [0.3, 0.5]],
            [[0.4, -0.2], [-0.2, 1.2]],
            [[0.8, 0.0], [0.0, 0.3]],
        ]
    )
    per_cluster = N // K
    x = np.concatenate(
        [
            rng.multivariate_normal(centers[k], covariances[k], size=per_cluster)
            for k in range(K)
        ]
    )
    labels = np.repeat(np.arange(K), per_cluster)
    perm = rng.permutation(N)
    x, labels = x[perm], labels[perm]
    first_cluster = np.flatnonzero(labels == 0)
    means_init = x[rng.choice(first_cluster, size=K, replace=False)].copy()
    precisions_init = np.array([np.eye(D) for _ in range(K)])
    weights_init = np.full(K, 1.0 / K)
    return x, means_init, precisions_init, weights_init


def log_joint(x, means, precisions, weights):
    """log pi_k + log N(x_n | mu_k, P_k^-1), shape (N, K)."""
    return np.stack(
        [
            np.log(weights[k])
            + multivariate_normal(means[k], np.linalg.inv(precisions[k])).logpdf(x)
            for k in range(len(weights))
        ],
        axis=1,
    )


def mean_log_likelihood(x, means, precisions, weights):
    return float(np.mean(logsumexp(log_joint(x, means, precisions, weights), axis=1)))


def em_step(x, means, precisions, weights, reg_covar):
    """One EM step, written out by hand (the semantics to reproduce)."""
    n, d = x.shape
    lj = log_joint(x, means, precisions, weights)
    resp = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))  # E-step
    nk = resp.sum(axis=0)
    new_weights = nk / n
    new_means = (resp.T @ x) / nk[:, None]
    new_precisions = np.empty((len(nk), d, d))
    for k in range(len(nk)):
        diff = x - new_means[k]
        cov = (resp[:, k, None] * diff).T @ diff / nk[k] + reg_covar * np.eye(d)
        new_precisions[k] = np.linalg.inv(cov)
    return new_means, new_precisions, new_weights


def fit_sklearn(x, means_init, precisions_init, weights_init, k):
    gm = GaussianMixture(
        n_components=K,
        covariance_type="full",
        reg_covar=REG_COVAR,
        tol=0,
        max_iter=k,
        init_params="random",
        means_init=means_init,
        precisions_init=precisions_init,
        weights_init=weights_init,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=ConvergenceWarning)
        gm.fit(x)
    assert gm.n_iter_ == k, (gm.n_iter_, k)
    return gm


def main():
    x, means_init, precisions_init, weights_init = make_data()
    init_ll = mean_log_likelihood(x, means_init, precisions_init, weights_init)

    iterations = []
    for k in range(1, N_ITER + 1):
        gm = fit_sklearn(x, means_init, precisions_init, weights_init, k)
        iterations.append(
            {
                "means": gm.means_.tolist(),
                "precisions": gm.precisions_.tolist(),
                "weights": gm.weights_.tolist(),
                "mean_log_likelihood": float(gm.score(x)),
            }
        )

    ok = True
    log = sys.stderr
    print(f"sklearn {sklearn.__version__}, numpy {np.__version__}", file=log)

    # Check 1: the log-likelihood never decreases.
    trace = [init_ll] + [it["mean_log_likelihood"] for it in iterations]
    increments = [trace[i + 1] - trace[i] for i in range(N_ITER)]
    print("mean log-likelihood trace (init, iter 1..20):", file=log)
    for i, v in enumerate(trace):
        print(f"  {i:2d}: {v!r}", file=log)
    monotone = min(increments) >= 0.0
    print(f"check monotone non-decreasing: {'OK' if monotone else 'FAILED'}"
          f" (smallest increment {min(increments):.3e})", file=log)
    ok &= monotone

    # Check 2: max_iter = k + 1 is one EM step from max_iter = k.
    states = [(means_init, precisions_init, weights_init)] + [
        (np.array(it["means"]), np.array(it["precisions"]), np.array(it["weights"]))
        for it in iterations
    ]
    max_dev = 0.0
    for i in range(N_ITER):
        step = em_step(x, *states[i], REG_COVAR)
        dev = max(
            float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))
            for a, b in zip(step, states[i + 1])
        )
        max_dev = max(max_dev, dev)
    step_ok = max_dev <= TOLERANCE
    print(f"check hand-written EM step vs sklearn (max |a-b|/max(1,|b|) over "
          f"all {N_ITER} steps): {max_dev:.3e} {'OK' if step_ok else 'FAILED'}",
          file=log)
    ok &= step_ok

    # Check 3: the direct log-likelihood agrees with sklearn's score.
    score_dev = max(
        abs(mean_log_likelihood(x, *states[i + 1]) - iterations[i]["mean_log_likelihood"])
        for i in range(N_ITER)
    )
    print(f"check direct log-likelihood vs sklearn score: {score_dev:.3e}", file=log)
    ok &= score_dev <= TOLERANCE

    out = {
        "N": N,
        "D": D,
        "K": K,
        "reg_covar": REG_COVAR,
        "x": x.tolist(),
        "init": {
            "means": means_init.tolist(),
            "precisions": precisions_init.tolist(),
            "weights": weights_init.tolist(),
        },
        "initial_mean_log_likelihood": init_ll,
        "iterations": iterations,
    }
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
