#!/usr/bin/env python3
"""The CEM Transformer block (paper 001 §2.4, Algorithm 1) on compiled code.

Usage: transformer_block.py ENERGY_RUN transformer_block.f64.so

Checked against NumPy float64 (cem.py):
 1. the compiled energy at the start (x = hm = h, u = 0) equals
    eps(h | h) (eq. 2) + xi(h | h) (eq. 7), with phi = silu_int computed by
    Gauss-Legendre quadrature of SiLU over [-40, v] (the tail below -40 is
    under 1e-15);
 2. after the block's one step, x is tied MHA (eq. 4) and the output y is
    the tied gated MLP applied to it (eq. 9-10):
    y_i = x_i + eta_mlp V^T ((W x_i) * SiLU(V x_i));
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-11 (relative) in 2 and 1e-10 in 1 (the quadrature is good to
about 1e-14; the energy sums N * (H + Dv) terms): double precision
throughout.
"""
import numpy as np

from cem import (interaction_energy, interaction_gradient, mlp_gradient,
                 silu, tied_matrices)
from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def silu_int(values):
    """phi(v) = int_{-inf}^v SiLU(t) dt by 200-point Gauss-Legendre on [-40, v]."""
    nodes, weights = np.polynomial.legendre.leggauss(200)
    out = np.empty_like(values)
    for index, v in np.ndenumerate(values):
        half = (v + 40.0) / 2
        t = half * nodes + (v - 40.0) / 2
        out[index] = half * np.sum(weights * silu(t))
    return out


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 5, 'D': 6, 'H': 2, 'Dv': 8}
    n, d, heads, dv = dims['N'], dims['D'], dims['H'], dims['Dv']
    dh = d // heads
    tau, eta_attn, eta_mlp = 1.3, 0.8, 0.6
    rng = np.random.default_rng(16)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'x': h.copy(), 'hm': h.copy(), 'u': np.zeros((n, d)),
               'Wq': rng.standard_normal((heads, dh, d)),
               'Wk': rng.standard_normal((heads, dh, d)),
               'W': 0.5 * rng.standard_normal((dv, d)),
               'V': 0.5 * rng.standard_normal((dv, d))}
    consts = {'tau': tau, 'eta_attn': eta_attn, 'eta_mlp': eta_mlp}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled,
                    dict(tensors, u=0.3 * rng.standard_normal((n, d))),
                    ['x', 'h', 'hm', 'u', 'Wq', 'Wk', 'W', 'V'], seed=12,
                    consts=consts)

    a = tied_matrices(tensors['Wq'], tensors['Wk'])
    xi = -np.sum((h @ tensors['W'].T) * silu_int(h @ tensors['V'].T))
    failures.check('energy vs eq. 2 + eq. 7 (silu_int by quadrature)',
                   relative_error(compiled.energy(tensors, consts),
                                  interaction_energy(h, h, a, tau) + xi), 1e-10)

    x1 = h - eta_attn * interaction_gradient(h, h, a, tau)
    y = x1 - eta_mlp * mlp_gradient(x1, x1, tensors['W'], tensors['V'])
    result = compiled.run(tensors, 1, consts)
    failures.check('x after the block vs tied MHA (eq. 4)',
                   relative_error(result['x'], x1), 1e-11)
    failures.check('output y vs the tied gated MLP of x (eqs. 9-10)',
                   relative_error(result['y'], y), 1e-11)
    failures.check_at_least('(control) the MLP moves the tokens',
                            relative_error(x1, y), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
