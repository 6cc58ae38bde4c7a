#!/usr/bin/env python3
"""Diagonal-plus-low-rank interactions (paper 001 §2.3, eq. 12) on compiled code.

Usage: lowrank_attention.py ENERGY_RUN lowrank_attention.f64.so

Checked against NumPy float64 (tests/e2e/models_check/cem.py, from eqs. 2-3
with dense A_k = diag(d_k) + W_k^Q^T W_k^K):
 1. the compiled energy equals eq. 2;
 2. the compiled step from x = h equals eq. 4,
    h'_i = h_i + eta sum_k sum_{j<=i} alpha_ij^k A_k h_j;
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-11 (relative) on energy and step: double precision on both
sides, sums of at most N * H = 12 terms of size O(1).
"""
import numpy as np

from cem import interaction_energy, interaction_gradient
from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 6, 'D': 6, 'H': 2}
    n, d, heads = dims['N'], dims['D'], dims['H']
    dh = d // heads
    tau, eta = 1.5, 0.8
    rng = np.random.default_rng(12)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'x': h.copy(),
               'Wq': rng.standard_normal((heads, dh, d)),
               'Wk': rng.standard_normal((heads, dh, d)),
               'd': rng.standard_normal((heads, d))}
    consts = {'tau': tau, 'eta': eta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled, tensors, ['x', 'h', 'Wq', 'Wk', 'd'],
                    seed=4, consts=consts)

    a = [np.diag(tensors['d'][k]) + tensors['Wq'][k].T @ tensors['Wk'][k]
         for k in range(heads)]
    failures.check('energy vs eq. 2 with A_k = diag(d_k) + Wq_k^T Wk_k',
                   relative_error(compiled.energy(tensors, consts),
                                  interaction_energy(h, h, a, tau)), 1e-11)
    expected = h - eta * interaction_gradient(h, h, a, tau)
    result = compiled.run(tensors, 1, consts)
    failures.check('one step from x = h vs eq. 4', relative_error(
        result['x'], expected), 1e-11)
    low_rank_only = h - eta * interaction_gradient(
        h, h, [tensors['Wq'][k].T @ tensors['Wk'][k] for k in range(heads)],
        tau)
    failures.check_at_least('(control) the diagonal term matters',
                            relative_error(low_rank_only, expected), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
