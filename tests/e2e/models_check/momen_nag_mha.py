#!/usr/bin/env python3
"""MomenMHA and NagMHA (paper 000 §3.1, eqs. 9 and 10) on compiled code.

Usage: momen_nag_mha.py ENERGY_RUN ARTIFACT.f64.so momentum|nesterov

The artifact (examples/momen_mha.energy or examples/nag_mha.energy) runs L
layers; layer k is one momentum (eq. 9) or Nesterov (eq. 10) step on the
multi-head free energy F(z) = -(1/H) sum_h T log sum_i exp(q_h . k_ih / T)
(000 §2.3, with the inner-product energy of F~ and T = sqrt(d_h)) with the
weights of layer k, after which the attended tokens become the new tokens
(000 Appendix A.1, Algorithm 2: h^(k+1) = z^(k+1)). The reference below
computes the same recursion in NumPy float64 from the closed-form gradient
grad_z F = -(1/H) sum_h W_Q,h^T sum_i p_ih W_K,h h_i (000 §3.1), starting
from a non-zero momentum p^(0) so that every term of the recursion matters.

Tolerance 1e-10 (relative to the largest entry): both sides compute in
double precision and differ only in the order of additions over at most a
few hundred terms, through L = 3 dependent layers.
"""
import sys

import numpy as np

from common import Compiled, Failures, check_gradients, relative_error


def gradient(z, hk, wq, wk, temperature):
    """grad_z of -(1/H) sum_c sum_h T lse_i (q_ch . k_ih / T)."""
    heads = wq.shape[0]
    g = np.zeros_like(z)
    for h in range(heads):
        q = z @ wq[h].T                   # [N, Dh]
        k = hk @ wk[h].T                  # [N, Dh]
        s = q @ k.T / temperature         # [N, N]
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g -= (p @ k) @ wq[h] / heads
    return g


def main():
    energy_exec, artifact, rule = sys.argv[1:4]
    dims = {'N': 5, 'D': 6, 'H': 2, 'L': 3}
    n, d, heads, layers = dims['N'], dims['D'], dims['H'], dims['L']
    dh = d // heads
    temperature = np.sqrt(dh)
    eta, beta = 0.7, 0.8
    rng = np.random.default_rng(2024)
    h = rng.standard_normal((n, d))
    tensors = {
        'h': h, 'z': h.copy(), 'hk': h.copy(),
        'z.velocity': 0.3 * rng.standard_normal((n, d)),
        'Wq': rng.standard_normal((layers, heads, dh, d)),
        'Wk': rng.standard_normal((layers, heads, dh, d)),
    }
    consts = {'eta': eta, 'beta': beta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()

    check_gradients(failures, compiled, tensors, ['z', 'hk', 'Wq', 'Wk', 'h'],
                    seed=5, consts=consts)

    z, hk, p = h.copy(), h.copy(), tensors['z.velocity'].copy()
    for layer in range(layers):
        wq, wk = tensors['Wq'][layer], tensors['Wk'][layer]
        if rule == 'momentum':      # eq. 9
            g = gradient(z, hk, wq, wk, temperature)
        else:                       # eq. 10: the gradient at z - beta p
            g = gradient(z - beta * p, hk, wq, wk, temperature)
        p = beta * p + g
        z = z - eta * p
        hk = z.copy()
    result = compiled.run(tensors, layers, consts)
    failures.check('z after %d layers vs eq. %s' %
                   (layers, '9' if rule == 'momentum' else '10'),
                   relative_error(result['z'], z), 1e-10)
    failures.check('momentum p after %d layers' % layers,
                   relative_error(result['z.velocity'], p), 1e-10)
    failures.check('attended tokens hk = z after the last layer',
                   relative_error(result['hk'], hk), 1e-10)
    # The recursion is not plain attention: without the momentum it would
    # end elsewhere (guards against a test that cannot fail).
    z_plain, hk_plain = h.copy(), h.copy()
    for layer in range(layers):
        z_plain = z_plain - eta * gradient(z_plain, hk_plain, tensors['Wq'][layer],
                                           tensors['Wk'][layer], temperature)
        hk_plain = z_plain.copy()
    failures.check_at_least('(control) |z - z of plain gradient steps|',
                            relative_error(z_plain, z), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
