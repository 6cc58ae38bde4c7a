#!/usr/bin/env python3
"""Paper 001 §2.1 (eqs. 1-5) and §2.3 (eq. 16): weight-tied causal MHA as one
gradient step of an interaction energy, and within-layer recursion.

Claim 1 (eqs. 3-5): one gradient step with eta = 1 from x = h on
  eps(x_i | h_1:i) = -tau sum_k log sum_{j<=i} exp((Wq_k x_i) . (Wk_k h_j) / tau)
(examples/tied_mha.energy, gd(lr = 1), steps 1) gives h'_i = h_i + MHA(h_1:i),
standard causal multi-head attention (eq. 1) with the tied parameterisation
W_V = W_K, W_O = W_Q, and tau = sqrt(D_r) (eq. 5). Signs and scales: the
energy's gradient is -sum_k Wq_k^T sum_j alpha_ij^k Wk_k h_j (eq. 4), so the
step adds +MHA; at another tau the scores are divided by tau instead of
sqrt(D_r) (checked at the example's tau = 8 too).
Oracle: standard MHA written independently in float64 NumPy the usual way:
per-head Q = h Wq_k^T, K = h Wk_k^T, V = h Wv_k^T, causal softmax of
Q K^T / scale, heads concatenated and multiplied by the output projection
W_O (H D_r x D), plus the residual.

Claim 2 (eq. 16, T = 2): two recursive steps (--steps 2) update only x; the
keys and values stay those of the layer's input h:
  x2_i = x1_i + sum_k Wq_k^T sum_{j<=i} softmax_j((Wq_k x1_i) . (Wk_k h_j) / tau) Wk_k h_j.
Re-applying the layer instead computes h'' = h' + MHA(h'), whose keys and
values come from h' = x1. Compared: the compiled x after 2 steps against the
NumPy recursion above, the compiled layer run on h' (one step with input h')
against NumPy's h' + MHA(h'), and the two against each other, which must
differ by far more than the tolerance. The recursion lowers the layer's
energy at each step: eps is concave in x (minus a log-sum-exp of linear
functions), so a step x - g lowers it by at least |g|^2 (checked on the
compiled trace, g from NumPy).
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

N, D, H = 7, 8, 2
DR = D // H


def causal_softmax(scores):
    mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def standard_mha(h, wq, wk, wv, wo, scale):
    """Causal MHA, eq. 1: concat_k(softmax(Q_k K_k^T / scale) V_k) W_O."""
    heads = []
    for k in range(H):
        q, key, value = h @ wq[k].T, h @ wk[k].T, h @ wv[k].T
        heads.append(causal_softmax(q @ key.T / scale) @ value)
    return np.concatenate(heads, axis=1) @ wo


def recursion_step(x, h, wq, wk, tau):
    """One more gradient step on eps(x | h): keys and values from h."""
    update = np.zeros_like(x)
    for k in range(H):
        weights = causal_softmax((x @ wq[k].T) @ (h @ wk[k].T).T / tau)
        update += (weights @ (h @ wk[k].T)) @ wq[k]
    return x + update


def interaction_energy(x, h, wq, wk, tau):
    total = 0.0
    for k in range(H):
        scores = (x @ wq[k].T) @ (h @ wk[k].T).T / tau
        mask = np.tril(np.ones((N, N), dtype=bool))
        total -= tau * np.logaddexp.reduce(np.where(mask, scores, -np.inf), axis=1).sum()
    return total


def main():
    energyc, energy_run, examples, artifacts = sys.argv[1:5]
    rng = np.random.default_rng(11)
    h = rng.standard_normal((N, D))
    wq = 1.5 * rng.standard_normal((H, DR, D)) / np.sqrt(D)
    wk = 1.5 * rng.standard_normal((H, DR, D)) / np.sqrt(D)
    # The tied parameterisation of eq. 5: W_V = W_K and W_O = W_Q, the output
    # projection being the head blocks W_O,k = Wq_k stacked (H D_r x D).
    wv, wo = wk, wq.reshape(H * DR, D)
    dims = {'N': N, 'D': D, 'H': H}

    failures = []

    def compare(label, got, want, tolerance):
        deviation = np.abs(got - want).max() / np.abs(want).max()
        print('%-62s max relative difference %.1e (tolerance %.0e)'
              % (label, deviation, tolerance))
        if not deviation <= tolerance:
            failures.append(label)
        return deviation

    with tempfile.TemporaryDirectory() as directory:
        tools = EnergyTools(energyc, energy_run, directory, artifacts)
        for dtype in ('f64', 'f32'):
            # f64: summation order only; f32: unit roundoff 6e-8 through
            # projections, a softmax with scores of size ~5 and sums of <= 7
            # terms: 1e-5 relative.
            tolerance = {'f64': 1e-12, 'f32': 1e-5}[dtype]
            artifact = tools.compile(os.path.join(examples, 'tied_mha.energy'), dtype)
            weights = {'Wq': wq, 'Wk': wk}
            for tau in (np.sqrt(DR), 8.0):
                _, result = tools.run(artifact, inputs=dict(weights, h=h), dtype=dtype,
                                      dims=dims, consts={'tau': tau}, steps=1)
                expected = h + standard_mha(h, wq, wk, wv, wo, scale=tau)
                compare('[%s] tau = %g: one step vs h + MHA(h) (W_V=W_K, W_O=W_Q)'
                        % (dtype, tau), result['x'], expected, tolerance)
                attention = np.abs(expected - h).max()
                if not attention > 0.1:
                    failures.append('the attention update is too small to test')

            tau = np.sqrt(DR)
            printed, two = tools.run(artifact, inputs=dict(weights, h=h), dtype=dtype,
                                     dims=dims, consts={'tau': tau}, steps=2)
            x1 = h + standard_mha(h, wq, wk, wv, wo, scale=tau)
            x2 = recursion_step(x1, h, wq, wk, tau)
            compare('[%s] T = 2 recursion vs NumPy eq. 16' % dtype, two['x'], x2, tolerance)
            _, again = tools.run(artifact, inputs=dict(weights, h=x1), dtype=dtype,
                                 dims=dims, consts={'tau': tau}, steps=1)
            reapplied = x1 + standard_mha(x1, wq, wk, wv, wo, scale=tau)
            compare('[%s] layer re-applied vs NumPy h\' + MHA(h\')' % dtype,
                    again['x'], reapplied, tolerance)
            difference = np.abs(two['x'] - again['x']).max() / np.abs(again['x']).max()
            print('[%s] recursion vs re-application (compiled): max relative difference '
                  '%.3f (must exceed 1000 x the tolerance)' % (dtype, difference))
            if not difference > 1000 * tolerance:
                failures.append('[%s] recursion and re-application agree' % dtype)

            if dtype != 'f64':
                continue
            # The recursion descends eps(. | h): E(x - g) <= E(x) - |g|^2.
            start = tools.energy(artifact, inputs=dict(weights, h=h), dims=dims,
                                 consts={'tau': tau})
            energies = [start] + printed['trace']
            reference = [interaction_energy(x, h, wq, wk, tau) for x in (h, x1, x2)]
            compare('[f64] energies eps(h), eps(x1), eps(x2) vs NumPy',
                    np.array(energies), np.array(reference), 1e-12)
            for step, (before, after, x) in enumerate(zip(energies, energies[1:], (h, x1))):
                decrease_bound = np.sum((recursion_step(x, h, wq, wk, tau) - x) ** 2)
                print('[f64] step %d: energy %.6f -> %.6f, decrease %.4f >= |g|^2 = %.4f'
                      % (step + 1, before, after, before - after, decrease_bound))
                if not before - after >= decrease_bound * (1 - 1e-9):
                    failures.append('step %d does not descend the energy' % (step + 1))
    if failures:
        sys.exit('FAILED: ' + '; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
