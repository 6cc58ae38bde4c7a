#!/usr/bin/env python3
"""Capsule-style routing as an energy (paper 004 §1, eqs. 2-4) on compiled code.

Usage: capsule_routing.py ENERGY_RUN capsule_routing.f64.so

Checked against NumPy float64:
 1. each of the model's 3 gradient steps (lr = 1) is one routing
    iteration v_j <- sum_i c_ij uhat_j|i with c_ij = softmax_j(uhat_j|i . v_j)
    at the current v (uhat_j|i = W_ij u_i), starting from v = 0, where the
    first iteration averages the predictions with uniform c_ij = 1/M;
 2. the compiled energy equals -sum_i log sum_j exp(uhat_j|i . v_j)
    + (1/2) sum_j ||v_j||^2 at a random v;
 3. the compiled gradients against finite differences of the compiled energy.
Tolerance 1e-11 (relative): double precision, sums over N = 6 children,
three dependent iterations.
"""
import numpy as np

from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def predictions(w, u):
    return np.einsum('ijpd,id->ijp', w, u)          # uhat[i, j] = W_ij u_i


def routing_iteration(uhat, v):
    logits = np.einsum('ijp,jp->ij', uhat, v)
    c = np.exp(logits - logits.max(axis=1, keepdims=True))
    c /= c.sum(axis=1, keepdims=True)              # softmax over parents j
    return np.einsum('ij,ijp->jp', c, uhat)


def energy(uhat, v):
    logits = np.einsum('ijp,jp->ij', uhat, v)
    m = logits.max(axis=1)
    lse = m + np.log(np.sum(np.exp(logits - m[:, None]), axis=1))
    return -np.sum(lse) + 0.5 * np.sum(v * v)


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 6, 'M': 3, 'D': 4, 'Dp': 3}
    n, m, d, dp = dims['N'], dims['M'], dims['D'], dims['Dp']
    rng = np.random.default_rng(17)
    tensors = {'u': rng.standard_normal((n, d)), 'v': np.zeros((m, dp)),
               'W': 0.7 * rng.standard_normal((n, m, dp, d))}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()
    random_v = dict(tensors, v=rng.standard_normal((m, dp)))
    check_gradients(failures, compiled, random_v, ['u', 'v', 'W'], seed=14)

    uhat = predictions(tensors['W'], tensors['u'])
    failures.check('energy vs -sum_i lse_j(uhat . v_j) + |v|^2 / 2',
                   relative_error(compiled.energy(random_v),
                                  energy(uhat, random_v['v'])), 1e-11)
    v = np.zeros((m, dp))
    for iteration in range(1, 4):
        v = routing_iteration(uhat, v)
        result = compiled.run(tensors, iteration)
        failures.check('%d gradient step(s) vs %d routing iteration(s)' %
                       (iteration, iteration), relative_error(result['v'], v),
                       1e-11)
        if iteration == 1:
            failures.check('first iteration: c = 1/M, v_j = sum_i uhat_j|i / M',
                           relative_error(result['v'], uhat.sum(axis=0) / m),
                           1e-11)
    failures.check_at_least('(control) routing moves away from uniform c',
                            relative_error(uhat.sum(axis=0) / m, v), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
