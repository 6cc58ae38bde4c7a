#!/usr/bin/env python3
"""Alibi biases in tied causal attention (paper 001, Appendix B) on compiled code.

Usage: alibi_attention.py ENERGY_RUN alibi_attention.f64.so

Checked against NumPy float64 (cem.py, eqs. 2-3 with a score bias):
 1. the compiled energy equals eq. 2 with scores
    s_ijk = beta_kj^T x_i / tau - m_k |i - j| + b_{i=j} [i = j] + b_{i!=j} [i != j],
    m_k = 2^-k (k = 1..H), for non-zero bself and bcross;
 2. one compiled step from x = h equals x - eta grad eps with those scores;
 3. the compiled gradients (x, h, Wq, Wk, bself, bcross) against finite
    differences of the compiled energy.
Tolerance 1e-11 (relative): double precision, sums of at most N * H = 14
terms of size O(1).
"""
import numpy as np

from cem import interaction_energy, interaction_gradient, tied_matrices
from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 7, 'D': 6, 'H': 2}
    n, d, heads = dims['N'], dims['D'], dims['H']
    dh = d // heads
    tau, eta = 1.5, 0.8
    rng = np.random.default_rng(15)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'x': h.copy(),
               'Wq': rng.standard_normal((heads, dh, d)),
               'Wk': rng.standard_normal((heads, dh, d)),
               'bself': np.array(0.7), 'bcross': np.array(-0.4)}
    consts = {'tau': tau, 'eta': eta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled, tensors,
                    ['x', 'h', 'Wq', 'Wk', 'bself', 'bcross'], seed=10,
                    consts=consts)

    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')
    bias = [-2.0 ** -(k + 1) * np.abs(i - j) +
            np.where(i == j, 0.7, -0.4) for k in range(heads)]
    a = tied_matrices(tensors['Wq'], tensors['Wk'])
    failures.check('energy vs eq. 2 with Alibi and self/cross biases',
                   relative_error(compiled.energy(tensors, consts),
                                  interaction_energy(h, h, a, tau, bias)),
                   1e-11)
    expected = h - eta * interaction_gradient(h, h, a, tau, bias)
    result = compiled.run(tensors, 1, consts)
    failures.check('one step from x = h vs eq. 4 with the biased scores',
                   relative_error(result['x'], expected), 1e-11)
    failures.check_at_least('(control) the biases change the step',
                            relative_error(h - eta * interaction_gradient(
                                h, h, a, tau), expected), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
