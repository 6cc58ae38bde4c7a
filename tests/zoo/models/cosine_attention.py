"""QKNorm (cosine) multi-head attention in PyTorch (see cosine_attention.energy):
queries and keys l2-normalised per head with F.normalize, scaled by g."""
import math

import numpy as np
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Henry, Dachapally, Pawar and Chen 2020, "Query-Key Normalization for Transformers", '
            'Findings of EMNLP (QKNorm): scores g * (q_i/||q_i||).(k_j/||k_j||) per head, a learned '
            'scale g initialised at log2(L^2 - L); E = -sum_{b,h,i} log sum_j exp(score), '
            'gradient descent on the tokens')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=128, D=64, H=4, Y=16)
STEPS = 4
TEST_STEPS = 2
LR = 0.2
COPIES = {'x': 'x0'}
TRAINED = ['Wq', 'Wk', 'g']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'x0': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
        'g': np.float64(math.log2(n * n - n)),
    }


def energy(t, step):
    x = t['x']
    q = F.normalize(torch.einsum('hyd,bnd->bhny', t['Wq'], x), dim=-1)
    k = F.normalize(torch.einsum('hyd,bnd->bhny', t['Wk'], x), dim=-1)
    scores = t['g'] * (q @ k.transpose(-1, -2))
    return -torch.logsumexp(scores, dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
