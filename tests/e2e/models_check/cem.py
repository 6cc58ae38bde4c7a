"""NumPy float64 references for paper 001 (Causal Energy Minimization).

Written from the paper's equations, independently of the compiler:
interaction energy (eq. 2) and its gradient (eq. 3) for interaction
matrices A_k, with an optional score bias (Appendix B, Alibi), and the
element-wise MLP energy's gradient (eq. 8) with phi' = SiLU.
"""
import numpy as np


def causal_softmax(scores):
    """softmax_j over j <= i of scores[i, j]."""
    n = scores.shape[0]
    masked = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    p = np.exp(masked - masked.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def interaction_energy(x, h, matrices, tau, bias=None):
    """eq. 2: -tau sum_k sum_i log sum_{j<=i} exp(x_i^T A_k h_j / tau + b_kij)."""
    n = x.shape[0]
    total = 0.0
    for k, a in enumerate(matrices):
        s = x @ a @ h.T / tau + (0.0 if bias is None else bias[k])
        for i in range(n):
            row = s[i, :i + 1]
            m = row.max()
            total -= tau * (m + np.log(np.sum(np.exp(row - m))))
    return total


def interaction_gradient(x, h, matrices, tau, bias=None):
    """eq. 3: -sum_k sum_{j<=i} alpha_ij^k A_k h_j, one row per token i."""
    g = np.zeros_like(x)
    for k, a in enumerate(matrices):
        s = x @ a @ h.T / tau + (0.0 if bias is None else bias[k])
        alpha = causal_softmax(s)
        g -= alpha @ (h @ a.T)
    return g


def silu(v):
    return v / (1.0 + np.exp(-v))


def mlp_gradient(x, h, w, v):
    """eq. 8: grad of -sum_i (W h_i)^T phi(V x_i) = -V^T ((W h_i) * SiLU(V x_i))."""
    return -((h @ w.T) * silu(x @ v.T)) @ v


def tied_matrices(wq, wk):
    """A_k = W_k^Q^T W_k^K (eq. 5's low-rank factorisation)."""
    return [wq[k].T @ wk[k] for k in range(wq.shape[0])]
