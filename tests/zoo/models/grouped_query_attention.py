"""Grouped-query attention in PyTorch (see grouped_query_attention.energy),
written with the query heads in one axis, h = g R + r, and the key heads
repeated to match them (key head h // R), as decoder implementations do."""
import torch

import zoo

CITATION = ('Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from '
            'Multi-Head Checkpoints", EMNLP, sec. 2.2 and fig. 2: H query heads in G groups, query '
            'head h scored against key head h // (H/G), q_hi.k_gj/sqrt(d); '
            'E = -sum_{b,h,i} log sum_j exp(score), gradient descent on the tokens')
TEST_DIMS = dict(B=2, N=5, D=6, G=2, R=2, Y=3)
BENCH_DIMS = dict(B=8, N=256, D=128, G=2, R=4, Y=32)
STEPS = 3
TEST_STEPS = 2
LR = 0.5
COPIES = {'x': 'x0'}
TRAINED = ['Wq', 'Wk']


def make_inputs(dims, rng):
    b, n, d, g, r, y = (dims[k] for k in 'BNDGRY')
    return {
        'x0': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((g, r, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((g, y, d)) / d ** 0.5,
    }


def energy(t, step):
    x = t['x']
    groups, per_group, y, d = t['Wq'].shape
    heads = groups * per_group
    wq = t['Wq'].reshape(heads, y, d)                     # query head h = g R + r
    q = torch.einsum('hyd,bnd->bhny', wq, x)              # [B, H, N, Y]
    k = torch.einsum('gyd,bnd->bgny', t['Wk'], x)         # [B, G, N, Y]
    k = k.repeat_interleave(heads // groups, dim=1)       # key head of query head h: h // R
    scores = q @ k.transpose(-1, -2) / y ** 0.5
    return -torch.logsumexp(scores, dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
