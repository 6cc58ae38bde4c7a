"""Entropic optimal transport by gradient ascent on its semi-dual in PyTorch
(see entropic_ot.energy)."""
import numpy as np
import torch

import zoo

CITATION = ('Cuturi 2013, "Sinkhorn Distances: Lightspeed Computation of Optimal Transport", NIPS, '
            'the entropy-regularised problem, and Genevay, Cuturi, Peyre & Bach 2016, "Stochastic Optimization for Large-scale '
            'Optimal Transport", NIPS, the semi-dual H(g) = sum_j b_j g_j + sum_i a_i '
            'g^{c,eps}(x_i), g^{c,eps}(x) = -eps log sum_j b_j exp((g_j - ||x - y_j||^2)/eps), '
            'uniform weights; E = -H (up to a constant), gradient descent on g, loss H, y trained')
TEST_DIMS = dict(N=6, M=5, D=3)
BENCH_DIMS = dict(N=1024, M=1024, D=8)
STEPS = 10
TEST_STEPS = 3
EPS = 0.1
TRAINED = ['y']


def make_inputs(dims, rng):
    n, m, d = (dims[k] for k in 'NMD')
    return {
        'x': rng.standard_normal((n, d)) / d ** 0.5,
        'y': 0.5 * rng.standard_normal((m, d)) / d ** 0.5 + 0.5,
        'g': np.zeros(m),
    }


def cost(x, y):
    """C_ij = ||x_i - y_j||^2, [N, M]."""
    return (x * x).sum(1, keepdim=True) + (y * y).sum(1) - 2 * x @ y.T


def semidual(t):
    g = t['g']
    # The smoothed c-transform of g at every x_i, without the log b_j = -log M
    # inside the log (the additive constant eps log M, left out of the
    # .energy's form too).
    g_c = -EPS * torch.logsumexp((g - cost(t['x'], t['y'])) / EPS, dim=1)
    return g.mean() + g_c.mean()


def energy(t, step):
    return -semidual(t)


def run(t, steps, create_graph):
    m = t['y'].shape[0]
    return zoo.descend(energy, t, {'g': ('gd', EPS * m)}, steps, create_graph)


def loss(final, t):
    return semidual(dict(t, g=final['g']))
