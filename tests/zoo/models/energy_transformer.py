"""The Energy Transformer in PyTorch (see energy_transformer.energy)."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Hoover et al. 2023, "Energy Transformer", NeurIPS, eqs. 2-5: '
            'multi-head energy attention and a ReLU^2 Hopfield module on layer-normed tokens')
TEST_DIMS = dict(B=2, N=4, D=6, H=2, Y=3, M=5)
BENCH_DIMS = dict(B=8, N=64, D=128, H=4, Y=32, M=512)
STEPS = 12
TEST_STEPS = 2
TEMPERATURE = 0.5
COPIES = {'x': 'x0'}
TRAINED = ['Wq', 'Wk', 'xi', 'gamma', 'delta']


def make_inputs(dims, rng):
    b, n, d, h, y, m = (dims[k] for k in 'BNDHYM')
    return {
        'x0': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
        'xi': rng.standard_normal((m, d)) / d ** 0.5,
        'gamma': 1 + 0.1 * rng.standard_normal(d),
        'delta': 0.1 * rng.standard_normal(d),
    }


def energy(t, step):
    x = t['x']
    g = t['gamma'] * F.layer_norm(x, x.shape[-1:], eps=1e-5) + t['delta']
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], g)
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], g)
    scores = q @ k.transpose(-1, -2) / TEMPERATURE
    n = x.shape[1]
    scores = scores.masked_fill(torch.eye(n, dtype=torch.bool), float('-inf'))
    attention = -TEMPERATURE * torch.logsumexp(scores, dim=-1).sum()
    hopfield = -0.5 * torch.relu(g @ t['xi'].T).pow(2).sum()
    return attention + hopfield


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', 0.1)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
