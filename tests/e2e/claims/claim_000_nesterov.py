#!/usr/bin/env python3
"""Paper 000 §3.1 (eq. 10, NagMHA) on the attention energy of Theorem 3.

Claim: on one fixed attention energy, Nesterov's accelerated gradient reaches
a target energy in fewer steps than plain gradient descent with the same
step size.

The energy (models/elastic_free_energy_*.energy, one head of Theorem 3):
  F(z) = -sum_c T log sum_i exp(-||W1 z_c - W2 h_i||^2 / (2 T)),
the free energy whose gradient step is softmax attention. Both models have
this energy, character for character; one steps z by gd(lr = 1), the other
by nesterov(lr = 1, beta = 0.9), the paper's initial eta and beta (eq. 10:
p <- beta p + grad F(z - beta p), z <- z - eta p). The nesterov model run
with --const beta=0 must reproduce the gd model's energies exactly, which
checks that the two share their energy and step size.

Why the target is meaningful: unlike the dot-product energy (unbounded
below), F is bounded below (F >= -N T log M) and here strictly convex. Its
Hessian per child is W1^T (I - Cov_p(W2 h) / T) W1 (000 eq. 8 with one head),
and the covariance of points of diameter d under any weights p has
eigenvalues <= d^2 / 4 (Popoviciu), so d^2 / 4 < T (checked: 2.47 < 4) makes
the Hessian >= (1 - d^2 / (4 T)) W1^T W1 > 0 everywhere; W1 has singular
values from 1 down to 0.1, an ill-conditioned problem (Hessian eigenvalues
at the minimum [0.0096, 0.95], by finite differences of the NumPy gradient)
where momentum matters. Both methods therefore converge to the same unique
minimiser z*, and F* is computed independently (float64 NumPy, run until
the gradient is below 1e-12). The targets are F* + f (F(z0) - F*) for f = 1e-2, 1e-4, 1e-6: a fixed
fraction of the initial gap, so reaching one means convergence, not a lucky
first step; the smallest gap (~2e-5) is ten orders of magnitude above f64
rounding of F (~1e-14), so no crossing is decided by rounding; and all are
reached by both methods within the 600 steps run (lr = 1 < 2 / 0.95 keeps GD
stable). The step size is the same (lr = 1 <= 1 / L) for both.

Oracles: the energy trajectories of both methods computed in float64 NumPy
from the equations above (compared with the compiled traces), and F*.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

N, M, D, T = 4, 6, 8, 4.0
STEPS = 600
FRACTIONS = (1e-2, 1e-4, 1e-6)


def problem(seed):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((D, D)))
    v, _ = np.linalg.qr(rng.standard_normal((D, D)))
    w1 = u @ np.diag(np.geomspace(1.0, 0.1, D)) @ v.T
    w2 = 0.5 * rng.standard_normal((D, D)) / np.sqrt(D)
    h = rng.standard_normal((M, D))
    z0 = 3.0 * rng.standard_normal((N, D))
    return w1, w2, h, z0


class FreeEnergy:
    def __init__(self, w1, w2, h):
        self.w1, self.keys = w1, h @ w2.T

    def _scores(self, z):
        difference = (z @ self.w1.T)[:, None, :] - self.keys[None]
        return difference, -0.5 * (difference ** 2).sum(axis=-1) / T

    def __call__(self, z):
        _, scores = self._scores(z)
        return -(T * np.logaddexp.reduce(scores, axis=1)).sum()

    def gradient(self, z):
        difference, scores = self._scores(z)
        weights = np.exp(scores - np.logaddexp.reduce(scores, axis=1)[:, None])
        return np.einsum('ci,cid->cd', weights, difference) @ self.w1

    def nesterov(self, z, beta, steps):
        """000 eq. 10 with eta = 1; beta = 0 is gradient descent."""
        p = np.zeros_like(z)
        energies = [self(z)]
        for _ in range(steps):
            p = beta * p + self.gradient(z - beta * p)
            z = z - p
            energies.append(self(z))
        return np.array(energies), z


def steps_to_reach(energies, target):
    below = np.nonzero(energies <= target)[0]
    return int(below[0]) if len(below) else None


def main():
    energyc, energy_run = sys.argv[1:3]
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models')
    w1, w2, h, z0 = problem(seed=2)
    free = FreeEnergy(w1, w2, h)

    # F*: NumPy Nesterov for long enough that the gradient vanishes.
    _, z_star = free.nesterov(z0, 0.9, 3000)
    gradient_norm = np.abs(free.gradient(z_star)).max()
    f_star = free(z_star)
    hessian = np.empty((D, D))
    for j in range(D):
        step = np.zeros((N, D))
        step[0, j] = 1e-5
        hessian[:, j] = (free.gradient(z_star + step)[0]
                         - free.gradient(z_star - step)[0]) / 2e-5
    eigenvalues = np.linalg.eigvalsh(0.5 * (hessian + hessian.T))
    keys = h @ w2.T
    diameter = np.sqrt(((keys[:, None] - keys[None]) ** 2).sum(axis=-1)).max()
    print('convexity certificate: diameter^2 / 4 of the keys W2 h_i = %.3f < T = %g'
          % (diameter ** 2 / 4, T))
    failures = []
    if not diameter ** 2 / 4 < T:
        failures.append('the energy is not certified convex')
    print('F(z0) = %.10f, F* = %.10f (max |grad F| there %.1e); Hessian eigenvalues '
          'at z*: [%.4f, %.4f]' % (free(z0), f_star, gradient_norm,
                                   eigenvalues[0], eigenvalues[-1]))
    if not (gradient_norm < 1e-12 and eigenvalues[0] > 0 and eigenvalues[-1] < 1):
        failures.append('the NumPy minimum is not a strict minimum with L < 1')

    inputs = {'z': z0, 'h': h, 'W1': w1, 'W2': w2}
    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory)
        gd = tools.compile(os.path.join(models, 'elastic_free_energy_gd.energy'), 'f64')
        nag = tools.compile(os.path.join(models, 'elastic_free_energy_nesterov.energy'), 'f64')
        start = tools.energy(gd, inputs=inputs)
        traces = {}
        for label, artifact, consts in (('gd', gd, None),
                                        ('nesterov', nag, {'beta': 0.9}),
                                        ('nesterov beta=0', nag, {'beta': 0.0})):
            printed, _ = tools.run(artifact, inputs=inputs, consts=consts, steps=STEPS)
            traces[label] = np.array([start] + printed['trace'])

    # The two models share the energy and the step: beta = 0 is gd (in exact
    # arithmetic; 1e-12 relative leaves room for two artifacts summing in
    # different orders, ~1e-15 per step).
    same = np.abs(traces['nesterov beta=0'] - traces['gd']).max() / abs(f_star)
    print('nesterov with beta = 0 vs gd: max relative energy difference over %d steps '
          '%.1e (tolerance 1e-12)' % (STEPS, same))
    if not same <= 1e-12:
        failures.append('nesterov(beta = 0) does not reproduce gd')

    # Compiled traces against NumPy's (float64 both; relative 1e-9 of the
    # energy scale: a sum of 24 lse terms per step, 600 dependent steps of a
    # contracting map, which does not amplify rounding).
    scale = abs(f_star)
    for label, beta in (('gd', 0.0), ('nesterov', 0.9)):
        reference, _ = free.nesterov(z0, beta, STEPS)
        deviation = np.abs(traces[label] - reference).max() / scale
        print('%-8s compiled trace vs NumPy: max relative difference %.1e (tolerance 1e-9)'
              % (label, deviation))
        if not deviation <= 1e-9:
            failures.append('%s: the compiled trace differs from NumPy' % label)

    print('steps to reach F* + f (F(z0) - F*), lr = 1 for both:')
    print('  %-8s %-8s %-10s' % ('f', 'gd', 'nesterov'))
    for fraction in FRACTIONS:
        target = f_star + fraction * (traces['gd'][0] - f_star)
        gd_steps = steps_to_reach(traces['gd'], target)
        nag_steps = steps_to_reach(traces['nesterov'], target)
        print('  %-8g %-8s %-10s' % (fraction, gd_steps, nag_steps))
        if gd_steps is None or nag_steps is None:
            failures.append('f = %g: a method did not reach the target in %d steps'
                            % (fraction, STEPS))
        elif not nag_steps < gd_steps:
            failures.append('f = %g: Nesterov took %d steps, gd %d'
                            % (fraction, nag_steps, gd_steps))
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
