#!/usr/bin/env python3
"""`min` and `leaky_relu` against NumPy closed forms.

`min(k: K) e` is written on top of `max` (as -max(-e)) and `leaky_relu(x,
a)` on top of `relu` (as a x + (1 - a) relu(x)), so the interpreter, which
runs the same IR, is no independent check of what they mean. Here the
compiled f64 results are compared with NumPy:
- the k-means objective sum_i min_k |x_i - mu_k|^2 and its gradient in the
  centres, 2 sum over the points nearest each centre of (mu_k - x_i);
- sum_i w_i leaky_relu(x_i, a) and its gradient in x, w_i for x_i > 0 and
  a w_i otherwise, at 0 too (PyTorch's convention), and in the slope a,
  sum over x_i < 0 of w_i x_i.
Tolerance 1e-12 relative: a few roundings of sums of O(100) terms.

Usage: reductions_and_slopes.py ENERGYC ENERGY_RUN
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

KMEANS = '''
model kmeans {
  dim N, K, D;
  input x : [N, D];
  state mu : [K, D];
  energy quantisation = sum(i: N) min(k: K) sum(d: D) (x[i, d] - mu[k, d]) ^ 2;
}
'''
LEAKY = '''
model leaky {
  dim N;
  input w : [N];
  state x : [N];
  param a : [];
  energy e = sum(i: N) w[i] * leaky_relu(x[i], a);
}
'''


def main():
    energyc, energy_run = sys.argv[1:3]
    failures = []

    def check(what, got, expected):
        error = np.max(np.abs(np.asarray(got) - expected)) / max(1.0, np.max(np.abs(expected)))
        print('%-44s relative error %.2e' % (what, error))
        if not error <= 1e-12:
            failures.append(what)

    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory)
        rng = np.random.default_rng(3)

        path = os.path.join(directory, 'kmeans.energy')
        with open(path, 'w') as f:
            f.write(KMEANS)
        artifact = tools.compile(path, 'f64')
        x, mu = rng.normal(size=(40, 3)), rng.normal(size=(5, 3))
        distances = ((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1)     # [N, K]
        nearest = distances.argmin(1)
        gradient = np.zeros_like(mu)
        for i, k in enumerate(nearest):
            gradient[k] += 2 * (mu[k] - x[i])
        _, grads = tools.run(artifact, {'x': x, 'mu': mu}, evaluate='grad', wrt='mu')
        check('k-means energy', tools.energy(artifact, inputs={'x': x, 'mu': mu}),
              distances.min(1).sum())
        check('k-means gradient in the centres', grads['grad.mu'], gradient)

        path = os.path.join(directory, 'leaky.energy')
        with open(path, 'w') as f:
            f.write(LEAKY)
        artifact = tools.compile(path, 'f64')
        x = np.concatenate([rng.normal(size=20), [0.0, 0.0]])
        w, a = rng.normal(size=22), np.array(0.2)
        values = {'x': x, 'w': w, 'a': a}
        _, grads = tools.run(artifact, values, evaluate='grad', wrt='x,a')
        check('leaky_relu energy', tools.energy(artifact, inputs=values),
              (w * np.where(x > 0, x, a * x)).sum())
        check('leaky_relu gradient in x (a at 0)', grads['grad.x'],
              np.where(x > 0, w, a * w))
        check('leaky_relu gradient in its slope', grads['grad.a'],
              (w * np.where(x > 0, 0.0, x)).sum())

    if failures:
        print('FAILED: ' + ', '.join(failures))
        return 1
    print('all agree with NumPy')
    return 0


if __name__ == '__main__':
    sys.exit(main())
