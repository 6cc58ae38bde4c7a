#!/usr/bin/env python3
"""Paper 004 §2 (eq. 5 and the M-step below it): EM on the GMM energy.

Claim: the compiled EM dynamics of examples/gmm.energy (closed-form M-steps
of means, precisions and weights) on well-separated synthetic clusters
  (a) recover the true means, matched by a permutation, and
  (b) never decrease the log-likelihood, which is minus the energy:
      log p(x) = sum_i log sum_k pi_k N(x_i | mu_k, P_k^-1)
               = -E - N D / 2 log(2 pi),
      with log_softmax(w)_k = log pi_k and P_k the precision.

Oracles (independent of the compiler):
  - the true means of the generator;
  - the sample means of each true cluster's points (the labels are known);
  - a float64 NumPy EM written from the paper's equations (E-step
    responsibilities softmax_k of the log densities; means, covariances about
    the new means + 1e-6 I as docs/dynamics.md documents, log counts), whose
    log-likelihood after every step must equal minus the compiled energy.

Run on an f64 artifact (monotonicity is a statement about differences of
energies near convergence, which f32 rounding would swamp) and on an f32
artifact (mean recovery only).
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

K, D = 3, 2
PER_CLUSTER = 200
STEPS = 30
RIDGE = 1e-6  # the covariance ridge of the M-step (docs/dynamics.md)
CENTRES = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0]])
# The start: every mean near the centre of the data (central_init).
# Cluster shapes: covariance = L L^T, the largest standard deviation along a
# coordinate is at most 1.2 (sigma below).
FACTORS = np.array([[[1.0, 0.0], [0.5, 0.6]],
                    [[0.7, 0.0], [0.0, 1.2]],
                    [[1.1, 0.0], [-0.4, 0.5]]])
SIGMA = 1.2


def synthetic_data(seed):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(K), PER_CLUSTER)
    rng.shuffle(labels)
    noise = rng.standard_normal((len(labels), D))
    x = CENTRES[labels] + np.einsum('nij,nj->ni', FACTORS[labels], noise)
    return x, labels


def central_init(x, seed):
    """Means all near the centre of the data (0.1 apart): a poor start, from
    which EM needs a dozen steps to separate the components."""
    rng = np.random.default_rng(seed)
    return x.mean(axis=0) + 0.1 * rng.standard_normal((K, D))


def log_densities(x, mu, prec, w):
    """log pi_k + 0.5 log det P_k - 0.5 (x - mu_k)^T P_k (x - mu_k)."""
    log_pi = w - np.logaddexp.reduce(w)
    result = np.empty((len(x), K))
    for k in range(K):
        diff = x - mu[k]
        result[:, k] = (log_pi[k] + 0.5 * np.linalg.slogdet(prec[k])[1]
                        - 0.5 * np.einsum('nd,de,ne->n', diff, prec[k], diff))
    return result


def log_likelihood(x, mu, prec, w):
    return (np.logaddexp.reduce(log_densities(x, mu, prec, w), axis=1).sum()
            - 0.5 * len(x) * D * np.log(2 * np.pi))


def em_step(x, mu, prec, w):
    log_prob = log_densities(x, mu, prec, w)
    resp = np.exp(log_prob - np.logaddexp.reduce(log_prob, axis=1)[:, None])
    counts = resp.sum(axis=0)
    new_mu = resp.T @ x / counts[:, None]
    new_prec = np.empty_like(prec)
    for k in range(K):
        diff = x - new_mu[k]
        cov = (resp[:, k, None] * diff).T @ diff / counts[k] + RIDGE * np.eye(D)
        new_prec[k] = np.linalg.inv(cov)
    return new_mu, new_prec, np.log(counts)


def match_means(estimated, reference):
    """The permutation p minimising max |estimated[p[k]] - reference[k]|."""
    from itertools import permutations
    best = min(permutations(range(K)),
               key=lambda p: np.abs(estimated[list(p)] - reference).max())
    return estimated[list(best)]


def main():
    energyc, energy_run, examples, artifacts = sys.argv[1:5]
    x, labels = synthetic_data(seed=4)
    mu0 = central_init(x, seed=1)
    prec0 = np.tile(np.eye(D), (K, 1, 1))
    w0 = np.zeros(K)
    n = len(x)
    sample_means = np.array([x[labels == k].mean(axis=0) for k in range(K)])

    # NumPy float64 EM, the oracle of the trajectory.
    state = (mu0, prec0, w0)
    reference_ll = [log_likelihood(x, *state)]
    for _ in range(STEPS):
        state = em_step(x, *state)
        reference_ll.append(log_likelihood(x, *state))
    reference_ll = np.array(reference_ll)
    # How far EM's final responsibilities are from the true labels (the
    # largest responsibility any point gives a component not its own).
    log_prob = log_densities(x, *state)
    resp = np.exp(log_prob - np.logaddexp.reduce(log_prob, axis=1)[:, None])
    own = [int(np.argmin(((state[0] - centre) ** 2).sum(axis=1))) for centre in CENTRES]
    wrong = np.where(np.eye(K, dtype=bool)[labels], 0.0, resp[:, own]).max()
    print('NumPy EM, final: largest responsibility of a wrong component %.1e' % wrong)

    failures = []
    if not wrong < 1e-30:
        failures.append('the clusters are not separated enough for this test')
    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory, artifacts)
        for dtype in ('f64', 'f32'):
            artifact = tools.compile(os.path.join(examples, 'gmm.energy'), dtype)
            inputs = {'x': x, 'mu': mu0}
            start = tools.energy(artifact, inputs=inputs, dtype=dtype)
            printed, result = tools.run(artifact, inputs=inputs, dtype=dtype,
                                        steps=STEPS)
            energies = np.array([start] + printed['trace'])
            ll = -energies - 0.5 * n * D * np.log(2 * np.pi)
            taken = printed['steps']
            print('[%s] EM steps taken: %d (until maxabs(grad) < 1e-6, at most %d)'
                  % (dtype, taken, STEPS))
            print('[%s] log-likelihood: start %.6f, after 1 step %.6f, final %.6f'
                  % (dtype, ll[0], ll[1], ll[-1]))

            # (a) The means, matched to the true centres by a permutation.
            # Each true cluster has 200 points and a standard deviation of at
            # most SIGMA = 1.2 along any coordinate, so the maximum-likelihood
            # mean differs from the true centre by N(0, sigma^2 / 200) per
            # coordinate: sigma / sqrt(200) = 0.085. Tolerance: 5 standard
            # errors, 0.42 (a 5-sigma event in any of the 6 coordinates has
            # probability 3.5e-6). The centres are 12 apart (10 sigma): no
            # point gives a wrong component a measurable responsibility
            # (printed above), so assignment errors add nothing.
            mu = match_means(result['mu'], CENTRES)
            error_true = np.abs(mu - CENTRES).max()
            tolerance_true = 5 * SIGMA / np.sqrt(PER_CLUSTER)
            # Against the sample means of the true clusters: EM's mean is
            # sum_i r_ik x_i / sum_i r_ik, which differs from the sample mean
            # of cluster k by at most sum_i |r_ik - [label_i = k]| |x_i - mu_k|
            # / 200 < 1e-30 here (responsibilities printed above), and EM
            # has reached its fixed point (the increments below are 0). What
            # remains is rounding of sums of 200 terms of size ~12: 1e-12 in
            # f64, 1e-4 in f32.
            error_sample = np.abs(mu - match_means(sample_means, CENTRES)).max()
            tolerance_sample = {'f64': 1e-12, 'f32': 1e-4}[dtype]
            print('[%s] means: max |mu - true centre| = %.4f (tolerance %.3f), '
                  'max |mu - sample mean of the true cluster| = %.2e (tolerance %.0e)'
                  % (dtype, error_true, tolerance_true, error_sample, tolerance_sample))
            if not error_true <= tolerance_true:
                failures.append('%s: means not recovered' % dtype)
            if not error_sample <= tolerance_sample:
                failures.append('%s: means differ from the clusters\' sample means' % dtype)

            if dtype != 'f64':
                continue
            # The compiled log-likelihood trajectory against NumPy's EM step
            # for step (both float64; relative 1e-9: sums of 600 terms in a
            # different order, and 25 dependent steps).
            count = len(ll)
            deviation = np.abs(ll - reference_ll[:count]).max() / np.abs(reference_ll).max()
            print('[f64] log-likelihood vs the NumPy EM, step for step: '
                  'max relative difference %.2e (tolerance 1e-9)' % deviation)
            if not deviation <= 1e-9:
                failures.append('f64: the EM trajectory differs from NumPy\'s')
            # (b) Monotone: EM never lowers the likelihood. Exact EM
            # increases it at every step; what may show as a decrease is
            # (i) f64 rounding of the energy, a sum of 600 terms of size
            # <= 1e2: below 600 * 1e2 * 2.2e-16 = 1.3e-11, and (ii) the ridge
            # 1e-6 I of the covariance, which moves the M-step off the exact
            # maximiser by a second-order amount, N D ridge^2 / (4 sigma_min^4)
            # = 3.7e-8 at sigma_min = 0.3 (the smallest here is 0.46).
            # Allowed decrease: 1e-7.
            increments = np.diff(ll)
            print('[f64] log-likelihood increments: smallest %.3e, largest %.3e, '
                  'total %.4f over %d steps' % (increments.min(), increments.max(),
                                                 ll[-1] - ll[0], len(increments)))
            if not increments.min() >= -1e-7:
                failures.append('f64: the log-likelihood decreased by %.3e'
                                % -increments.min())
            print('[f64] increments, step by step: %s' % ' '.join(
                '%.3g' % value for value in increments))
            # Not vacuous: EM climbs over many steps from the central start.
            climbing = int(np.sum(increments > 1e-3))
            print('[f64] steps that raise the log-likelihood by more than 1e-3: %d'
                  % climbing)
            if not climbing >= 5:
                failures.append('f64: EM converged too fast to show monotonicity')
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
