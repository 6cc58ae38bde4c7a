"""Multi-head attention with T5's relative position biases in PyTorch (see
relative_bias_attention.energy): the bias of each (query, key) pair is
gathered from the [H, 2N - 1] table by the relative-position matrix."""
import torch

import zoo

CITATION = ('Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified '
            'Text-to-Text Transformer", JMLR 21, sec. 2.1, and Shaw, Uszkoreit and Vaswani 2018, '
            '"Self-Attention with Relative Position Representations", NAACL, eq. 4: scores '
            'q_i.k_j/sqrt(d) + b_h(i - j), a learned scalar per head and offset (unbucketed, '
            '[H, 2N-1]); E = -sum_{b,h,i} log sum_j exp(score), gradient descent on the tokens')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=128, D=64, H=4, Y=16)
STEPS = 4
TEST_STEPS = 2
LR = 0.2
COPIES = {'x': 'x0'}
TRAINED = ['Wq', 'Wk', 'bias']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'x0': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
        'bias': 0.5 * rng.standard_normal((h, 2 * n - 1)),
    }


def relative_bias(table, n):
    """[H, N, N]: entry (h, i, j) is the table's scalar for head h and
    offset i - j, the table's column i - j + N - 1."""
    position = torch.arange(n)
    offset = position.view(n, 1) - position.view(1, n)     # i - j
    return table[:, offset + n - 1]


def energy(t, step):
    x = t['x']
    y = t['Wq'].shape[1]
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], x)
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], x)
    scores = q @ k.transpose(-1, -2) / y ** 0.5 + relative_bias(t['bias'], x.shape[1])
    return -torch.logsumexp(scores, dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
