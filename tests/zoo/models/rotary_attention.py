"""Causal multi-head attention with rotary position embeddings in PyTorch (see rotary_attention.energy)."""
import torch

import zoo

CITATION = ('Su et al. 2024, "RoFormer: Enhanced Transformer with Rotary Position Embedding", '
            'Neurocomputing, sec. 3.4: queries and keys rotated pairwise by t theta_k, '
            'theta_k = 10000^(-k/Y) (rotate-half layout); E = -sum_{b,h,i} log sum_{j<=i} '
            'exp(q\'_i.k\'_j/sqrt(2Y)), gradient descent on the queries\' states')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=256, D=128, H=4, Y=16)
STEPS = 2
TEST_STEPS = 2
LR = 1.0
COPIES = {'x': 'h'}
TRAINED = ['Wq1', 'Wq2', 'Wk1', 'Wk2']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'h': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        **{name: rng.standard_normal((h, y, d)) / d ** 0.5 for name in TRAINED},
    }


def rotate(first, second, cos, sin):
    """The rotate-half RoPE of [..., N, Y] halves by the angles' [N, Y] cos and sin."""
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def energy(t, step):
    x, h = t['x'], t['h']
    n, y = x.shape[1], t['Wq1'].shape[1]
    theta = 10000.0 ** (-torch.arange(y, dtype=x.dtype) / y)
    angle = torch.arange(n, dtype=x.dtype).unsqueeze(1) * theta          # [N, Y]
    cos, sin = torch.cos(angle), torch.sin(angle)
    project = lambda w, v: torch.einsum('hyd,bnd->bhny', w, v)          # noqa: E731
    q = rotate(project(t['Wq1'], x), project(t['Wq2'], x), cos, sin)     # [B, H, N, 2Y]
    k = rotate(project(t['Wk1'], h), project(t['Wk2'], h), cos, sin)
    return -zoo.causal_log_normalisers(q @ k.transpose(-1, -2) / (2 * y) ** 0.5)


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
