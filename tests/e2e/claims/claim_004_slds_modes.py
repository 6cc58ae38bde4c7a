#!/usr/bin/env python3
"""Paper 004 §7 (eq. 17): the SLDS energy's mode responsibilities.

Claim: on data drawn from a switching linear dynamical system, the mode
responsibilities of the compiled SLDS energy,
  alpha[t, k] = softmax_k(log pi_k - 0.5 (x_{t+1} - A_k x_t - b_k)^T
                          Sigma_k^-1 (x_{t+1} - A_k x_t - b_k)),
evaluated at the observed trajectory with the generator's parameters, pick
the true mode far above chance.

How the responsibilities come out of compiled code: models/slds_modes.energy
is examples/slds.energy with the same energy and dynamics and one output
added, `alpha[t: S, k: K]` (S = T - 1) = exp(sim[t, k] - lse_k2 sim[t, k2])
with sim the energy's own similarity. It is run with `--steps 0` (the
observed trajectory is the state; no dynamics), f64 and f32. That the output
is the energy's softmax is checked on the unmodified example: for
E = -sum_t lse_k sim[t, k], -dE/dlogpi_k = sum_t alpha[t, k], so the
compiled gradient of examples/slds.energy with respect to logpi must equal
the column sums of the output.

Oracles: the true modes of the generator, and alpha computed in float64
NumPy from the formula above.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

K, D, T = 3, 2, 300
SIGMA = 0.2   # the noise's standard deviation
STAY = 0.9    # probability of keeping the mode from one step to the next


def rotation(angle):
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


A = np.array([0.95 * rotation(0.4), 0.95 * rotation(-0.4), 0.8 * np.eye(D)])
B = np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.8]])


def synthetic_data(seed):
    """A trajectory of T points and the mode z[t] that made x[t + 1]."""
    rng = np.random.default_rng(seed)
    modes = np.zeros(T - 1, dtype=int)
    for t in range(1, T - 1):
        modes[t] = modes[t - 1] if rng.random() < STAY else rng.integers(K)
    x = np.zeros((T, D))
    x[0] = rng.standard_normal(D)
    for t in range(T - 1):
        x[t + 1] = A[modes[t]] @ x[t] + B[modes[t]] + SIGMA * rng.standard_normal(D)
    return x, modes


def responsibilities(x, logpi, prec):
    residual = x[1:, None, :] - np.einsum('kde,te->tkd', A, x[:-1]) - B[None]
    sim = logpi - 0.5 * np.einsum('tkd,kde,tke->tk', residual, prec, residual)
    return np.exp(sim - np.logaddexp.reduce(sim, axis=1)[:, None])


def main():
    energyc, energy_run, examples, artifacts = sys.argv[1:5]
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models')
    x, modes = synthetic_data(seed=3)
    logpi = np.log(np.full(K, 1.0 / K))
    prec = np.tile(np.eye(D) / SIGMA ** 2, (K, 1, 1))
    params = {'x': x, 'A': A, 'b': B, 'logpi': logpi, 'prec': prec}
    expected = responsibilities(x, logpi, prec)
    # Chance: the best guess that ignores the data, the most frequent mode.
    chance = np.bincount(modes, minlength=K).max() / len(modes)

    failures = []
    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory, artifacts)
        for dtype in ('f64', 'f32'):
            artifact = tools.compile(os.path.join(models, 'slds_modes.energy'), dtype)
            _, result = tools.run(artifact, inputs=params, dtype=dtype, steps=0)
            alpha = result['alpha']
            # Against NumPy: f64 differs by summation order only (1e-12);
            # f32 rounds the quads (residuals of size <= ~3 under a wrong
            # mode, precision 25: quads <= ~2e2) to ~6e-8 * 2e2 = 1.2e-5 in
            # an exponent, which moves a probability by at most as much;
            # tolerance 1e-4.
            tolerance = {'f64': 1e-12, 'f32': 1e-4}[dtype]
            deviation = np.abs(alpha - expected).max()
            accuracy = np.mean(alpha.argmax(axis=1) == modes)
            print('[%s] responsibilities vs NumPy: max |diff| %.2e (tolerance %.0e)'
                  % (dtype, deviation, tolerance))
            print('[%s] argmax_k alpha[t, k] == true mode for %d of %d transitions: '
                  'accuracy %.3f (chance, the most frequent mode: %.3f; '
                  'mean max responsibility %.3f)'
                  % (dtype, np.sum(alpha.argmax(axis=1) == modes), len(modes),
                     accuracy, chance, alpha.max(axis=1).mean()))
            if not deviation <= tolerance:
                failures.append('%s: responsibilities differ from NumPy' % dtype)
            # Far above chance: responsibilities unrelated to the modes would
            # score at most the chance rate (0.43 here) in expectation, with
            # a binomial standard deviation <= sqrt(0.25 / 299) = 0.029 over
            # 299 transitions; 0.8 is more than 12 of those above it. (The
            # Bayes rate at this noise is what NumPy's alpha scores.)
            if not accuracy >= 0.8:
                failures.append('%s: accuracy %.3f is not far above chance' % (dtype, accuracy))

            # The output is the energy's softmax: -dE/dlogpi of the
            # unmodified example equals the output's column sums (f64: 1e-10
            # relative, sums of 299 terms; f32: 1e-4 relative).
            example = tools.compile(os.path.join(examples, 'slds.energy'), dtype)
            _, gradient = tools.run(example, inputs=params, dtype=dtype,
                                    evaluate='grad', wrt='logpi')
            column_sums = alpha.sum(axis=0)
            mismatch = np.abs(-gradient['grad.logpi'] - column_sums).max() / len(modes)
            print('[%s] -dE/dlogpi of examples/slds.energy: %s; column sums of alpha: %s '
                  '(max |diff| / (T - 1) = %.1e)'
                  % (dtype, np.round(-gradient['grad.logpi'], 4), np.round(column_sums, 4),
                     mismatch))
            if not mismatch <= {'f64': 1e-10, 'f32': 1e-4}[dtype]:
                failures.append('%s: the output is not the energy\'s softmax' % dtype)
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
