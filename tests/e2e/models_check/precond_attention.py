#!/usr/bin/env python3
"""The learned preconditioner (paper 001 §2.3, eqs. 13-14) on compiled code.

Usage: precond_attention.py ENERGY_RUN precond_attention.f64.so

Checked against NumPy float64 (cem.py, eq. 3 for the gradient):
 1. one compiled step from x = h equals x - eta P grad eps with
    P = diag(softplus(d)) + U V^T + V U^T built densely, i.e. eq. 14 with
    every head's P_k = P, for random d, U and V (V != 0, so the low-rank
    part acts);
 2. with the declared initialisers (d = 1, V = 0) P is diag(softplus(1)):
    the step is the plain gradient step scaled by log(1 + e);
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-11 (relative): double precision, sums of at most N * H + D
terms of size O(1).
"""
import numpy as np

from cem import interaction_gradient, tied_matrices
from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 6, 'D': 6, 'H': 2, 'R': 2}
    n, d, heads, rank = dims['N'], dims['D'], dims['H'], dims['R']
    dh = d // heads
    tau, eta = 1.5, 0.7
    rng = np.random.default_rng(13)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'x': h.copy(),
               'Wq': rng.standard_normal((heads, dh, d)),
               'Wk': rng.standard_normal((heads, dh, d)),
               'd': rng.standard_normal(d),
               'U': 0.5 * rng.standard_normal((d, rank)),
               'V': 0.5 * rng.standard_normal((d, rank))}
    consts = {'tau': tau, 'eta': eta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled, tensors,
                    ['x', 'h', 'Wq', 'Wk', 'd', 'U', 'V'], seed=6,
                    consts=consts)

    g = interaction_gradient(h, h, tied_matrices(tensors['Wq'], tensors['Wk']),
                             tau)
    p = (np.diag(np.log1p(np.exp(tensors['d']))) +
         tensors['U'] @ tensors['V'].T + tensors['V'] @ tensors['U'].T)
    expected = h - eta * g @ p.T
    result = compiled.run(tensors, 1, consts)
    failures.check('one step vs x - eta P grad (eqs. 13-14, P_k = P)',
                   relative_error(result['x'], expected), 1e-11)
    failures.check_at_least('(control) the low-rank part of P matters',
                            relative_error(h - eta * np.log1p(np.exp(
                                tensors['d'])) * g, expected), 1e-3)

    initial = dict(tensors, d=np.ones(d), V=np.zeros((d, rank)))
    result = compiled.run(initial, 1, consts)
    failures.check('d = 1, V = 0: step = x - eta log(1 + e) grad',
                   relative_error(result['x'], h - eta * np.log1p(np.e) * g),
                   1e-11)
    failures.close()


if __name__ == '__main__':
    main()
