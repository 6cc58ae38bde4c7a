#!/usr/bin/env python3
"""Slot attention by coordinate ascent (paper 004 §9) on compiled code.

Usage: slot_attention_em.py ENERGY_RUN slot_attention_em.f64.so

Checked against NumPy float64, for 1, 2 and 3 rounds: the E-step
mu <- mu + lr sum_j A_ji W_Q^T W_K x_j (lr = 0.1, A at the round's entry),
then A at the new slots, then the §9 least-squares M-step
W_Q = (sum A W_K x_j mu_i^T)(sum A mu_i mu_i^T)^-1 and, with the new W_Q,
W_K = (sum A W_Q mu_i x_j^T)(sum A x_j x_j^T)^-1. A control: after the
M-step the least-squares objective sum A ||W_K x_j - W_Q mu_i||^2 is no
larger than before it (W_Q and W_K are its exact minimisers in turn), while
the energy, a different objective, is not what the M-step lowers. The
compiled gradients against finite differences of the compiled energy.
Tolerance 1e-9 (relative): double precision through two 3 x 3 inverses of
well-conditioned matrices per round.
"""
import numpy as np

from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def attention(x, mu, wk, wq):
    scores = (x @ wk.T) @ (mu @ wq.T).T
    a = np.exp(scores - scores.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


def least_squares(x, mu, a, wk, wq):
    diff = (x @ wk.T)[:, None, :] - (mu @ wq.T)[None, :, :]
    return float(np.sum(a * np.sum(diff ** 2, axis=2)))


def round_(x, mu, wk, wq, lr=0.1):
    a = attention(x, mu, wk, wq)
    mu = mu + lr * a.T @ (x @ wk.T) @ wq               # E-step: -dE/dmu
    a = attention(x, mu, wk, wq)
    before = least_squares(x, mu, a, wk, wq)
    wq = (wk @ x.T @ a @ mu) @ np.linalg.inv(mu.T @ np.diag(a.sum(axis=0)) @ mu)
    wk = (wq @ mu.T @ a.T @ x) @ np.linalg.inv(x.T @ np.diag(a.sum(axis=1)) @ x)
    return mu, wk, wq, a, before, least_squares(x, mu, a, wk, wq)


def main():
    energy_exec, artifact = main_arguments()
    # W_Q's solve needs sum_i (sum_j A_ji) mu_i mu_i^T invertible: S >= D.
    dims = {'N': 12, 'S': 5, 'D': 3}
    rng = np.random.default_rng(23)
    x = rng.standard_normal((12, 3))
    tensors = {'x': x, 'mu': rng.standard_normal((5, 3)),
               'Wk': np.eye(3) + 0.1 * rng.standard_normal((3, 3)),
               'Wq': np.eye(3) + 0.1 * rng.standard_normal((3, 3)),
               'A': np.zeros((12, 5))}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    check_gradients(failures, compiled, tensors, ['mu', 'Wk', 'Wq', 'x'], seed=31)
    mu, wk, wq = tensors['mu'], tensors['Wk'], tensors['Wq']
    for rounds in range(1, 4):
        mu, wk, wq, a, before, after = round_(x, mu, wk, wq)
        result = compiled.run(tensors, rounds)
        for name, expected in [('mu', mu), ('A', a), ('Wq', wq), ('Wk', wk)]:
            failures.check('%d round(s): %s vs NumPy §9' % (rounds, name),
                           relative_error(result[name], expected), 1e-9)
        failures.check('%d round(s): the M-step lowers the least-squares '
                       'objective (increase)' % rounds,
                       max(after - before, 0.0), 1e-12 * before)
    failures.check_at_least('(control) the M-step changes W_Q',
                            relative_error(tensors['Wq'], wq), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
