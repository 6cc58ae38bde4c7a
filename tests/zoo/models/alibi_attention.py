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
    return -zoo.causal_log_normalisers(q @ k.transpose(-1, -2) / y ** 0.5 + bias)


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
