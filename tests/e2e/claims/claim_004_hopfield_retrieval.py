#!/usr/bin/env python3
"""Paper 004 §4 (eqs. 9-10): retrieval in the modern Hopfield energy.

Claim: gradient descent on E = -sum_i lse_mu(beta x_i . m_mu) (compiled
examples/hopfield.energy, lr = 1, its 5 steps) retrieves stored patterns:
with K = 16 random +-1 patterns in D = 64 and queries that are a pattern with
25 % of its coordinates (16) flipped, at least 99 % of the queries end with
sign(x) equal to their pattern in every coordinate.

Choice of beta (the example's default, 1): by eq. 10 one step adds
beta * sum_mu softmax_mu(beta x . m_mu) m_mu to x. The query's overlap with
its own pattern is 64 - 2 * 16 = 32; with another random pattern it is a sum
of 64 random signs (standard deviation 8), typically <= 20 for the best of
15, so at beta = 1 the softmax puts all but ~e^-12 of its weight on the right
pattern, and each step adds ~beta * m to x. A flipped coordinate (-m_j)
changes sign once the accumulated pull exceeds 1: steps * beta > 1. Hence
beta = 1 and 5 steps; the contrast run at beta = 0.1 (steps * beta = 0.5)
must retrieve nothing, which shows that the result comes from the dynamics.

Oracle: the same 5 gradient steps in float64 NumPy from eq. 10, compared with
the compiled states, and the stored patterns themselves. Queries that are
closer (in overlap) to another pattern than to their own cannot be
retrieved by any method; they are counted and reported.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

K, D, N, FLIPS, STEPS = 16, 64, 1000, 16, 5


def synthetic_data(seed):
    rng = np.random.default_rng(seed)
    patterns = rng.choice([-1.0, 1.0], size=(K, D))
    targets = rng.integers(K, size=N)
    queries = patterns[targets].copy()
    for i in range(N):
        queries[i, rng.choice(D, FLIPS, replace=False)] *= -1
    return patterns, targets, queries


def gradient_descent(x, patterns, beta, steps):
    """x <- x + beta sum_mu softmax_mu(beta x . m_mu) m_mu (eq. 10, lr = 1)."""
    for _ in range(steps):
        scores = beta * x @ patterns.T
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        x = x + beta * weights @ patterns
    return x


def retrieved(x, patterns, targets):
    return np.all(np.sign(x) == patterns[targets], axis=1)


def main():
    energyc, energy_run, examples, artifacts = sys.argv[1:5]
    patterns, targets, queries = synthetic_data(seed=5)
    overlaps = queries @ patterns.T
    own = overlaps[np.arange(N), targets]
    others = np.where(np.arange(K)[None] == targets[:, None], -np.inf, overlaps).max(axis=1)
    ambiguous = int(np.sum(others >= own))
    print('queries: %d, each a pattern with %d of %d coordinates flipped; '
          '%d queries are at least as close to another pattern' % (N, FLIPS, D, ambiguous))
    print('exact matches before the dynamics: %d' % retrieved(queries, patterns, targets).sum())

    failures = []
    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory, artifacts)
        artifact = tools.compile(os.path.join(examples, 'hopfield.energy'), 'f32')
        for beta, required in ((1.0, 0.99), (0.1, None)):
            _, result = tools.run(artifact, inputs={'x': queries, 'm': patterns},
                                  dtype='f32', consts={'beta': beta}, steps=STEPS)
            x = result['x']
            expected = gradient_descent(queries, patterns, beta, STEPS)
            # f32 against float64: |x| <= 1 + 5 beta and each step sums 16
            # patterns with softmax weights; rounding ~6e-8 relative per
            # operation, a few hundred operations: 1e-5 * max|x|.
            deviation = np.abs(x - expected).max()
            tolerance = 1e-5 * np.abs(expected).max()
            rate = retrieved(x, patterns, targets).mean()
            oracle_rate = retrieved(expected, patterns, targets).mean()
            print('beta = %g, %d steps: retrieved %.1f %% of the queries (NumPy float64: '
                  '%.1f %%); compiled vs NumPy states: max |diff| %.1e (tolerance %.1e)'
                  % (beta, STEPS, 100 * rate, 100 * oracle_rate, deviation, tolerance))
            if not deviation <= tolerance:
                failures.append('beta = %g: the compiled states differ from NumPy' % beta)
            if required is not None and not rate >= required:
                failures.append('beta = %g: retrieved %.1f %% < %.0f %%'
                                % (beta, 100 * rate, 100 * required))
            if required is None and rate != 0.0:
                failures.append('beta = %g: steps * beta < 1 cannot flip a coordinate, '
                                'yet %.1f %% were retrieved' % (beta, 100 * rate))
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
