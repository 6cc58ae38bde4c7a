#!/usr/bin/env python3
"""Paper 003 (Free Energy Mixer): the free-energy read's limits and Lemma 2.2.

examples/free_energy_mixer.energy computes, per position t and channel j,
  F[t, j] = (1 / beta_j) log sum_{i<=t} p_t(i) exp(beta_j v[i, j]),
  p_t(i) = softmax_{i<=t}(q_t . k_i / sqrt(D))   (the causal attention prior).

Claim 1 (beta -> 0): F equals the attention average sum_i p_t(i) v[i, j].
Closed-form bound: F - E_p[v] = (1/beta) log E_p exp(beta (v - E_p v)) lies
in [0, beta R_tj^2 / 8] (Jensen below, Hoeffding's lemma above; R_tj the
range of v[., j] over i <= t). Checked at beta = 1e-2, 1e-3, 1e-4 in f64:
the compiled F must lie in that interval and match F computed in float64
NumPy, both up to f64 rounding: the lse is ~beta * E v computed from terms
of size ~5 (log p), ~1e-15 absolute, then divided by beta: tolerance
1e-14 / beta. (f32 would give ~1e-6 / beta, the formula's own cancellation,
so small beta is checked in f64 only.)

Claim 2 (beta large): F approaches the per-channel maximum over the prior's
support (all i <= t, since p_t > 0): v*_tj + log p_t(i*) / beta <= F[t, j]
<= v*_tj, with v*_tj = max_{i<=t} v[i, j] at i*. Checked at beta = 1e3 in
f64 and f32 (rounding: the lse of terms of size ~beta * 3 = 3e3, f32
absolute ~2e-4, divided by beta: 2e-7).

Claim 3 (Lemma 2.2, a per-channel argmax task): values with each channel's
maximum at a different position (channel j spikes to ~2 at position
SPIKES[j], else ~-1). Once t has seen every spike, the per-channel maximum
m_t is not in conv{v_1..v_t}; certificate: the functional sum_j, whose
maximum over the hull is max_{i<=t} sum_j v[i, j] (about 2 - 3 = -1), while
sum_j m_tj is about 8. The compiled large-beta read must lie outside the
hull by that certificate (sum_j F[t, j] > max_i sum_j v[i, j]) and be within
the Claim 2 bound of m_t; the compiled small-beta read, a convex combination
(attention), must be inside it. A run with beta = (1e-4, 1e-4, 1e3, 1e3)
shows the channels' temperatures act independently (the first two average,
the last two select).

Inputs: N = 12, D = 4, q and k N(0, 1) (scores of size ~1: a prior far from
one-hot), v as above or N(0, 1).
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

N, D = 12, 4
SPIKES = (2, 5, 7, 10)  # the position of channel j's maximum


def causal_prior(q, k):
    scores = q @ k.T / np.sqrt(D)
    scores = np.where(np.tril(np.ones((N, N), dtype=bool)), scores, -np.inf)
    return np.exp(scores - np.logaddexp.reduce(scores, axis=1)[:, None])


def free_energy(prior, v, beta):
    """(1/beta_j) log sum_i p_t(i) exp(beta_j v_ij), float64, stable."""
    with np.errstate(divide='ignore'):
        log_prior = np.log(prior)
    return np.logaddexp.reduce(log_prior[:, :, None] + beta[None, None, :] * v[None],
                               axis=1) / beta


def running(values, reduce):
    return np.array([reduce(values[:t + 1], axis=0) for t in range(N)])


def main():
    energyc, energy_run, examples, artifacts = sys.argv[1:5]
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((N, D)), rng.standard_normal((N, D))
    prior = causal_prior(q, k)
    v_random = rng.standard_normal((N, D))
    v_spikes = -1.0 + 0.3 * rng.standard_normal((N, D))
    for channel, position in enumerate(SPIKES):
        v_spikes[position, channel] = 2.0 + 0.1 * rng.standard_normal()
    failures = []

    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory, artifacts)

        def read(v, beta, dtype):
            artifact = tools.compile(os.path.join(examples, 'free_energy_mixer.energy'), dtype)
            _, result = tools.run(artifact, dtype=dtype,
                                  inputs={'q': q, 'k': k, 'v': v, 'beta': beta})
            return result['F']

        # Claim 1: beta -> 0, the attention average.
        average = prior @ v_random
        spread = running(v_random, np.max) - running(v_random, np.min)
        print('beta -> 0 (f64): F against the attention average sum_i p_t(i) v_ij')
        for beta in (1e-2, 1e-3, 1e-4):
            got = read(v_random, np.full(D, beta), 'f64')
            exact = free_energy(prior, v_random, np.full(D, beta))
            rounding = 1e-14 / beta
            gap = got - average
            upper = beta * spread ** 2 / 8
            exact_deviation = np.abs(got - exact).max()
            print('  beta %-6g max |F - average| %.2e, Hoeffding bound beta R^2/8 <= %.2e; '
                  'max |F - NumPy F| %.1e (tolerance %.0e)'
                  % (beta, np.abs(gap).max(), upper.max(), exact_deviation, rounding))
            if not np.all((gap >= -rounding) & (gap <= upper + rounding)):
                failures.append('beta %g: F outside [average, average + beta R^2/8]' % beta)
            if not exact_deviation <= rounding:
                failures.append('beta %g: F differs from NumPy' % beta)

        # Claim 2: beta large, the per-channel maximum over i <= t.
        beta = 1e3
        maximum = running(v_random, np.max)
        best = running(v_random, np.argmax)
        lower = maximum + np.log(prior[np.arange(N)[:, None], best]) / beta
        for dtype in ('f64', 'f32'):
            got = read(v_random, np.full(D, beta), dtype)
            rounding = {'f64': 1e-12, 'f32': 1e-6}[dtype]
            inside = np.all((got >= lower - rounding) & (got <= maximum + rounding))
            print('beta = %g (%s): max (max_i v - F) = %.2e, largest allowed '
                  '-log p_t(i*) / beta = %.2e; within the bounds: %s'
                  % (beta, dtype, (maximum - got).max(), (maximum - lower).max(), inside))
            if not inside:
                failures.append('%s: large-beta read outside [max + log p / beta, max]' % dtype)

        # Claim 3: Lemma 2.2, per-channel maxima at different positions.
        hull_max = running(v_spikes.sum(axis=1), np.max)   # max over the hull of sum_j
        target = running(v_spikes, np.max)
        best = running(v_spikes, np.argmax)
        bound = -np.log(prior[np.arange(N)[:, None], best]) / 1e3
        seen_all = np.arange(N) >= max(SPIKES)
        for dtype in ('f64', 'f32'):
            rounding = {'f64': 1e-12, 'f32': 1e-5}[dtype]
            selecting = read(v_spikes, np.full(D, 1e3), dtype)
            averaging = read(v_spikes, np.full(D, 1e-4), dtype) if dtype == 'f64' else None
            for t in np.nonzero(seen_all)[0]:
                print('[%s] t = %d: argmax positions per channel %s; m_t = %s; '
                      'F(beta = 1e3) = %s' % (dtype, t, best[t].tolist(),
                                              np.round(target[t], 4).tolist(),
                                              np.round(selecting[t], 4).tolist()))
                print('[%s] t = %d: sum_j m_t = %.3f, sum_j F = %.3f > max over the hull '
                      'of sum_j = %.3f' % (dtype, t, target[t].sum(), selecting[t].sum(),
                                           hull_max[t]))
                if not selecting[t].sum() > hull_max[t] + 1.0:
                    failures.append('[%s] t = %d: the read is not outside the hull' % (dtype, t))
                if not np.all(np.abs(selecting[t] - target[t]) <= bound[t] + rounding):
                    failures.append('[%s] t = %d: the read is not the per-channel maximum'
                                    % (dtype, t))
                if averaging is not None:
                    print('[f64] t = %d: attention-like read (beta = 1e-4) sum_j = %.3f <= '
                          '%.3f, max_j |F - m_t| = %.3f'
                          % (t, averaging[t].sum(), hull_max[t],
                             np.abs(averaging[t] - target[t]).max()))
                    if not averaging[t].sum() <= hull_max[t] + 1e-6:
                        failures.append('t = %d: the small-beta read left the hull' % t)

        # Per-channel temperatures act independently.
        mixed = np.array([1e-4, 1e-4, 1e3, 1e3])
        got = read(v_spikes, mixed, 'f64')
        exact = free_energy(prior, v_spikes, mixed)
        deviation = np.abs(got - exact).max()
        averaged = np.abs(got[:, :2] - (prior @ v_spikes)[:, :2]).max()
        hoeffding = (1e-4 * (running(v_spikes, np.max) - running(v_spikes, np.min)) ** 2
                     / 8)[:, :2].max()
        selected = np.abs(got[:, 2:] - target[:, 2:]).max()
        print('beta = (1e-4, 1e-4, 1e3, 1e3) (f64): channels 0-1 vs the average %.1e '
              '(bound %.1e), channels 2-3 vs the running maximum %.1e (bound %.1e); '
              'vs NumPy %.1e (tolerance 1e-10)'
              % (averaged, hoeffding, selected, bound[:, 2:].max(), deviation))
        if not (deviation <= 1e-10 and averaged <= hoeffding + 1e-10
                and selected <= bound[:, 2:].max() + 1e-12):
            failures.append('per-channel temperatures do not act independently')
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
