"""Multi-head sigmoid self-attention in PyTorch (see sigmoid_attention.energy)."""
import math

import torch
import torch.nn.functional as F

import zoo

CITATION = ('Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid '
            'Self-Attention", arXiv:2409.04431: sigma(q_i.k_j/sqrt(d) + b) V '
            'with b = -log(n); E = -sum_{b,h,i,j} softplus(q_hi.k_hj/sqrt(Y) - log N), '
            'gradient descent on the tokens')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=4, N=256, D=128, H=4, Y=32)
STEPS = 3
TEST_STEPS = 2
LR = 0.5
COPIES = {'x': 'h'}
TRAINED = ['Wq', 'Wk']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'h': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
    }


def energy(t, step):
    x = t['x']
    n, y = x.shape[1], t['Wq'].shape[1]
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], x)
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], x)
    logits = q @ k.transpose(-1, -2) / math.sqrt(y) - math.log(n)     # [B, H, N, N]
    # softplus(z) = log(1 + e^z) = -log sigma(-z), exact at any z (F.softplus
    # switches to the identity past a threshold)
    return F.logsigmoid(-logits).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
