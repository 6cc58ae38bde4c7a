#!/usr/bin/env python3
"""MHA2nd1st (paper 000 §3.2, Appendix A.7.1, eqs. 26-30) on compiled code.

Usage: mha_2nd1st.py ENERGY_RUN mha_2nd1st.f64.so

examples/mha_2nd1st.energy takes, per layer, the step
z <- z - lr (2I - Hess) grad of newton(taylor = 1) on
E = sum_c sum_h F_h(z_c), F_h = -T log sum_i exp(-||W_Q,h z - W_K,h h_i||^2 / 2T),
then sets the attended tokens to the new tokens. Checked here, against
NumPy float64:
 1. for random weights, two layers equal z - lr (2I - Hess) grad with the
    closed forms grad_c = sum_h W_Q,h^T (q_h - kbar_h) and
    Hess_c = sum_h W_Q,h^T [I - C_h / T] W_Q,h (eq. 27) built as matrices;
 2. when W_Q is one orthogonal D x D matrix split into heads, one layer
    equals eq. 30 with the paper's range-space pseudo-inverse
    P_h = W_Q,h^T (W_Q,h W_Q,h^T)^-1 [I + C_h / T] (computed with
    numpy.linalg.inv) and the sign of descent: z - (eta/H) sum_h P_h (q_h - kbar_h)
    (eqs. 29-32 print "+", a slip: grad F_h = W_Q,h^T (q_h - kbar_h));
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-10 (relative): double precision on both sides, sums of a few
dozen terms, two dependent layers; an inverse of a 3 x 3 orthogonal Gram
matrix (condition number 1) in 2.
"""
import numpy as np

from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def head_quantities(zc, hk, w1, w2, temperature):
    """q, kbar and the weighted key covariance C of one head, one token."""
    q = w1 @ zc
    k = hk @ w2.T                                    # [N, Dh]
    s = -0.5 * np.sum((q - k) ** 2, axis=1) / temperature
    p = np.exp(s - s.max())
    p /= p.sum()
    kbar = p @ k
    d = k - kbar
    covariance = (d * p[:, None]).T @ d
    return q, kbar, covariance


def newton_taylor1_step(z, hk, wq, wk, temperature, lr):
    heads, dh, dim = wq.shape
    out = np.empty_like(z)
    for c in range(z.shape[0]):
        g = np.zeros(dim)
        hess = np.zeros((dim, dim))
        for h in range(heads):
            q, kbar, cov = head_quantities(z[c], hk, wq[h], wk[h], temperature)
            g += wq[h].T @ (q - kbar)
            hess += wq[h].T @ (np.eye(dh) - cov / temperature) @ wq[h]
        out[c] = z[c] - lr * (2 * g - hess @ g)
    return out


def eq30_step(z, hk, wq, wk, temperature, eta):
    heads, dh, dim = wq.shape
    out = z.copy()
    for c in range(z.shape[0]):
        for h in range(heads):
            q, kbar, cov = head_quantities(z[c], hk, wq[h], wk[h], temperature)
            p = wq[h].T @ np.linalg.inv(wq[h] @ wq[h].T) @ (
                np.eye(dh) + cov / temperature)
            out[c] -= eta / heads * p @ (q - kbar)
    return out


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 5, 'D': 6, 'H': 2, 'L': 2}
    n, d, heads, layers = dims['N'], dims['D'], dims['H'], dims['L']
    dh = d // heads
    temperature = np.sqrt(2 * dh)
    eta = 0.9
    rng = np.random.default_rng(7)
    h = rng.standard_normal((n, d))
    tensors = {'h': h, 'z': h.copy(), 'hk': h.copy(),
               'Wq': 0.8 * rng.standard_normal((layers, heads, dh, d)),
               'Wk': 0.8 * rng.standard_normal((layers, heads, dh, d))}
    consts = {'eta': eta}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()

    check_gradients(failures, compiled, tensors, ['z', 'hk', 'Wq', 'Wk'],
                    seed=3, consts=consts)

    z, hk = h.copy(), h.copy()
    for layer in range(layers):
        z = newton_taylor1_step(z, hk, tensors['Wq'][layer],
                                tensors['Wk'][layer], temperature, eta / heads)
        hk = z.copy()
    result = compiled.run(tensors, layers, consts)
    failures.check('z after %d layers vs z - lr (2I - Hess) grad (eq. 27)'
                   % layers, relative_error(result['z'], z), 1e-10)
    failures.check('attended tokens hk = z', relative_error(result['hk'], hk),
                   1e-10)

    # W_Q orthogonal: the step is eq. 30 (sign of descent).
    orthogonal = np.stack([np.linalg.qr(rng.standard_normal((d, d)))[0]
                           .reshape(heads, dh, d) for _ in range(layers)])
    tensors_o = dict(tensors, Wq=orthogonal)
    expected = eq30_step(h, h, orthogonal[0], tensors['Wk'][0], temperature,
                         eta)
    result = compiled.run(tensors_o, 1, consts)
    failures.check('orthogonal W_Q: one layer vs eq. 30 (range-space P_h)',
                   relative_error(result['z'], expected), 1e-10)
    plain = h.copy()
    for hd in range(heads):
        for c in range(n):
            q, kbar, _ = head_quantities(h[c], h, orthogonal[0][hd],
                                         tensors['Wk'][0][hd], temperature)
            plain[c] -= eta / heads * orthogonal[0][hd].T @ (q - kbar)
    failures.check_at_least('(control) eq. 30 differs from a gradient step',
                            relative_error(plain, expected), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
