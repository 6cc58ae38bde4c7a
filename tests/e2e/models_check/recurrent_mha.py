#!/usr/bin/env python3
"""Within-layer recursion with T = 2 (paper 001 §2.3, eq. 16) on compiled code.

Usage: recurrent_mha.py ENERGY_RUN recurrent_mha.f64.so

Checked:
 1. the model's run of T = 2 steps equals two applications of the step
    x <- x - eta grad eps(x | h) computed in NumPy float64 from eq. 3
    (cem.py), keys and values h held fixed; its first step is eq. 4 (one
    tied MHA layer);
 2. on compiled code, the run of 2 steps gives the same bits as one step,
    saved (--out) and resumed (--in) for one more: the recursion is two
    applications of the same step;
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-11 (relative) in 1: double precision, two dependent steps of
sums of at most N * H = 12 terms.
"""
import numpy as np

from cem import interaction_gradient, tied_matrices
from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 6, 'D': 6, 'H': 2, 'T': 2}
    n, d, heads = dims['N'], dims['D'], dims['H']
    dh = d // heads
    tau, eta = 1.2, 0.9
    rng = np.random.default_rng(14)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'x': h.copy(),
               'Wq': rng.standard_normal((heads, dh, d)),
               'Wk': rng.standard_normal((heads, dh, d))}
    consts = {'tau': tau, 'eta': eta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled, tensors, ['x', 'h', 'Wq', 'Wk'],
                    seed=8, consts=consts)

    a = tied_matrices(tensors['Wq'], tensors['Wk'])
    x1 = h - eta * interaction_gradient(h, h, a, tau)
    x2 = x1 - eta * interaction_gradient(x1, h, a, tau)
    one = compiled.run(tensors, 1, consts)
    failures.check('step 1 vs eq. 4 (one tied MHA layer)',
                   relative_error(one['x'], x1), 1e-11)
    two = compiled.run(tensors, 2, consts)
    failures.check('T = 2 (the model\'s steps) vs eq. 16 applied twice',
                   relative_error(two['x'], x2), 1e-11)
    failures.check_at_least('(control) the second step moves x',
                            relative_error(x1, x2), 1e-3)
    resumed = compiled.run(dict(tensors, x=one['x'], step=one['step']), 1,
                           consts)
    failures.check('2 steps vs 1 step resumed for 1 more (max |diff|)',
                   float(np.max(np.abs(resumed['x'] - two['x']))), 0.0)
    failures.close()


if __name__ == '__main__':
    main()
