#!/usr/bin/env python3
"""LightMHA2nd1st (paper 000 §3.2, Appendix A.7.2) on compiled code.

Usage: light_mha_2nd1st.py ENERGY_RUN light_mha_2nd1st.f64.so

Checked against NumPy float64:
 1. L = 2 layers of the compiled rule equal the paper's formula
    z + sum_h W_O,h (vbar_h + tau_h b_h) with
    b_h = sum_i p_ih v_ih v_ih^T vbar_h - vbar_h vbar_h^T vbar_h, layer by
    layer with the attended tokens set to the new tokens (Algorithm 2);
 2. with W_O,h = -(eta eps / (H T)) W'_O,h and tau_h = -1/eps (the
    substitution of A.7.2), one layer equals the unsimplified first-order
    Taylor form z - (eta eps / (H T)) sum_h W'_O,h [vbar_h - (1/eps) Cov_h vbar_h],
    Cov_h = sum_i p_ih (v_ih - vbar_h)(v_ih - vbar_h)^T, computed from the
    centred values (an independent route to the same number);
 3. the gradients of the model's energy (the upper bound F~) against
    finite differences of the compiled energy.
Tolerance 1e-10 (relative): double precision on both sides, sums over
N = 5 tokens and d_h = 3, two dependent layers; in 2 the factor 1/eps = 4
amplifies rounding by no more than that.
"""
import numpy as np

from common import (Compiled, Failures, check_gradients, main_arguments,
                    relative_error)


def softmax_rows(s):
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def light_layer(z, hk, wq, wk, wv, wo, tau):
    heads, dh, _ = wq.shape
    out = z.copy()
    for h in range(heads):
        p = softmax_rows((z @ wq[h].T) @ (hk @ wk[h].T).T / np.sqrt(dh))
        v = hk @ wv[h].T                                  # [N, Dh]
        vbar = p @ v                                      # [N, Dh]
        second = np.einsum('ci,id,ie,ce->cd', p, v, v, vbar)
        b = second - np.sum(vbar * vbar, axis=1, keepdims=True) * vbar
        out += (vbar + tau[h] * b) @ wo[h].T
    return out


def taylor_layer(z, hk, wq, wk, wv, wo_prime, eta, eps):
    heads, dh, _ = wq.shape
    temperature = np.sqrt(dh)
    out = z.copy()
    for c in range(z.shape[0]):
        for h in range(heads):
            s = (wk[h] @ hk.T).T @ (wq[h] @ z[c]) / temperature
            p = np.exp(s - s.max())
            p /= p.sum()
            v = hk @ wv[h].T
            vbar = p @ v
            centred = v - vbar
            cov = (centred * p[:, None]).T @ centred
            out[c] -= eta * eps / (heads * temperature) * wo_prime[h] @ (
                vbar - cov @ vbar / eps)
    return out


def main():
    energy_exec, artifact = main_arguments()
    dims = {'N': 5, 'D': 6, 'H': 2, 'L': 2}
    n, d, heads, layers = dims['N'], dims['D'], dims['H'], dims['L']
    dh = d // heads
    rng = np.random.default_rng(11)
    h = rng.standard_normal((n, d))
    shape = (layers, heads, dh, d)
    tensors = {'h': h, 'z': h.copy(), 'hk': h.copy(),
               'Wq': rng.standard_normal(shape),
               'Wk': rng.standard_normal(shape),
               'Wv': rng.standard_normal(shape),
               'Wo': 0.5 * rng.standard_normal((layers, heads, d, dh)),
               'tau': 0.3 * rng.standard_normal((layers, heads))}
    compiled = Compiled(energy_exec, artifact, dims)
    failures = Failures()

    check_gradients(failures, compiled, tensors, ['z', 'hk', 'Wq', 'Wk'],
                    seed=9)

    z, hk = h.copy(), h.copy()
    for layer in range(layers):
        z = light_layer(z, hk, tensors['Wq'][layer], tensors['Wk'][layer],
                        tensors['Wv'][layer], tensors['Wo'][layer],
                        tensors['tau'][layer])
        hk = z.copy()
    result = compiled.run(tensors, layers)
    failures.check('z after %d layers vs z + sum_h W_O,h (vbar_h + tau_h b_h)'
                   % layers, relative_error(result['z'], z), 1e-10)
    failures.check('attended tokens hk = z', relative_error(result['hk'], hk),
                   1e-10)

    eta, eps = 1.3, 0.25
    wo_prime = rng.standard_normal((layers, heads, d, dh))
    scale = -eta * eps / (heads * np.sqrt(dh))
    substituted = dict(tensors, Wo=scale * wo_prime,
                       tau=np.full((layers, heads), -1.0 / eps))
    expected = taylor_layer(h, h, tensors['Wq'][0], tensors['Wk'][0],
                            tensors['Wv'][0], wo_prime[0], eta, eps)
    result = compiled.run(substituted, 1)
    failures.check('W_O = -(eta eps/HT) W\'_O, tau = -1/eps: vs Taylor form',
                   relative_error(result['z'], expected), 1e-10)
    without = light_layer(h, h, tensors['Wq'][0], tensors['Wk'][0],
                          tensors['Wv'][0], scale * wo_prime[0],
                          np.zeros(heads))
    failures.check_at_least('(control) the second-order term b_h matters',
                            relative_error(without, expected), 1e-3)
    failures.close()


if __name__ == '__main__':
    main()
