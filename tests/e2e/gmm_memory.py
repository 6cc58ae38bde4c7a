#!/usr/bin/env python3
"""One EM iteration of the gmm example at N = 100 000 in memory linear in N.

Runs `energy-run ARTIFACT --eval run --steps 1` on a compiled f32 artifact of
examples/gmm.energy (full covariances, K = 16, D = 16) at N = 25 000 and
N = 100 000 on the same kind of data, and measures the peak resident memory
of each run (os.wait4). The M-step streams over the points, so memory may
grow with N only by a few copies of the data (N * D floats: 4.8 MiB more at
100 000 than at 25 000); anything of size N * N (an N x N matrix of f32
would be 37 GiB) or even N * N / 16 would break the bounds:
  - peak at N = 100 000 under 256 MiB;
  - growth from 25 000 to 100 000 under 8 copies of the added data (38 MiB).
The parameters after the step are checked against one EM iteration computed
independently in float64 NumPy (the E-step from the log densities, then
means, covariances about the new means + 1e-6 I, inverted, and log counts),
to a relative 2e-3 (f32 sums of 1e5 terms; covariance inversion).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tools', 'python'))
from attention_numpy import read_safetensors, write_safetensors  # noqa: E402

K, D = 16, 16
RIDGE = 1e-6


def data(n, seed):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((K, D)) * 4.0
    x = centres[rng.integers(0, K, n)] + rng.standard_normal((n, D))
    mu = centres + 0.5 * rng.standard_normal((K, D))
    prec = np.tile(np.eye(D), (K, 1, 1))
    w = np.zeros(K)
    return {name: value.astype(np.float32)
            for name, value in (('x', x), ('mu', mu), ('prec', prec), ('w', w))}


def em_step(x, mu, prec, w):
    """One EM iteration in float64, as the gmm example defines it."""
    log_weights = w - np.logaddexp.reduce(w)
    log_prob = np.empty((x.shape[0], K))
    for k in range(K):
        diff = x - mu[k]
        quad = np.einsum('nd,de,ne->n', diff, prec[k], diff)
        log_prob[:, k] = (log_weights[k] + 0.5 * np.linalg.slogdet(prec[k])[1]
                          - 0.5 * quad)
    log_norm = np.logaddexp.reduce(log_prob, axis=1)
    resp = np.exp(log_prob - log_norm[:, None])
    counts = resp.sum(axis=0)
    new_mu = resp.T @ x / counts[:, None]
    new_prec = np.empty_like(prec)
    for k in range(K):
        diff = x - new_mu[k]
        cov = (resp[:, k, None] * diff).T @ diff / counts[k] + RIDGE * np.eye(D)
        new_prec[k] = np.linalg.inv(cov)
    return new_mu, new_prec, np.log(counts)


def run(energy_run, artifact, tensors, directory, name):
    inputs = os.path.join(directory, name + '.in.safetensors')
    output = os.path.join(directory, name + '.out.safetensors')
    write_safetensors(inputs, tensors)
    command = [energy_run, artifact, '--in', inputs, '--eval', 'run',
               '--steps', '1', '--out', output]
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    stderr = process.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit('FAILED: %s\n%s' % (' '.join(command), stderr))
    return usage.ru_maxrss * 1024, read_safetensors(output)


def main():
    energy_run, artifact = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as directory:
        small = data(25000, 1)
        large = data(100000, 2)
        small_peak, _ = run(energy_run, artifact, small, directory, 'small')
        large_peak, result = run(energy_run, artifact, large, directory, 'large')
    added = (100000 - 25000) * D * 4
    growth = large_peak - small_peak
    print('peak resident memory: %.1f MiB at N = 25 000, %.1f MiB at '
          'N = 100 000 (growth %.1f MiB; the added points are %.1f MiB)' % (
              small_peak / 2**20, large_peak / 2**20, growth / 2**20,
              added / 2**20))
    if large_peak >= 256 * 2**20:
        sys.exit('peak resident memory at N = 100 000 is over 256 MiB')
    if growth >= 8 * added:
        sys.exit('memory grows faster than linearly in N')

    x = large['x'].astype(np.float64)
    expected = em_step(x, large['mu'].astype(np.float64),
                       large['prec'].astype(np.float64),
                       large['w'].astype(np.float64))
    for name, want in zip(('mu', 'prec', 'w'), expected):
        got = result[name].astype(np.float64)
        if name == 'w':
            # Log weights are defined up to a constant (log_softmax).
            got, want = got - got.max(), want - want.max()
        error = np.abs(got - want).max() / np.abs(want).max()
        print('%-4s max relative difference %.2e' % (name, error))
        if not error <= 2e-3:
            sys.exit('%s differs from the float64 EM iteration' % name)


if __name__ == '__main__':
    main()
