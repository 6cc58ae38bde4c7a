"""Causal multi-head attention with ALiBi in PyTorch (see alibi_attention.energy)."""
import torch

import zoo

CITATION = ('Press, Smith and Lewis 2022, "Train Short, Test Long: Attention with Linear Biases '
            'Enables Input Length Extrapolation", ICLR, sec. 3: causal scores q_i.k_j/sqrt(d) - m_h (i - j), '
            'geometric slopes m_h = 2^(-8(h+1)/H); E = -sum_{b,h,i} log sum_{j<=i} exp(score), '
            'gradient descent on the queries\' states')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=256, D=128, H=4, Y=32)
STEPS = 2
TEST_STEPS = 2
LR = 1.0
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


def slopes(heads):
    start = 2.0 ** (-8.0 / heads)
    return torch.tensor([start ** (k + 1) for k in range(heads)], dtype=torch.float64)


def energy(t, step):
    x, h = t['x'], t['h']
    heads, y = t['Wq'].shape[0], t['Wq'].shape[1]
    n = x.shape[1]
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], x)
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], h)
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    bias = -slopes(heads).to(x.dtype).view(heads, 1, 1) * (i - j).to(x.dtype)   # [H, N, N]
    scores = q @ k.transpose(-1, -2) / y ** 0.5 + bias
    scores = scores.masked_fill(j > i, float('-inf'))
    return -torch.logsumexp(scores, dim=-1).sum()


def run(t, steps, create_graph):
    # x starts as h (COPIES) and may be the same tensor object; a clone keeps
    # the gradient through the copy but makes x a node of its own, so that the
    # gradient in x does not also count the keys' dependence on h.
    t = dict(t, x=t['x'].clone())
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return 0.5 * (final['x'] - t['target']).pow(2).sum(-1).mean()
