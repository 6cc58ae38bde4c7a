"""RBF-kernel attention in PyTorch (see rbf_attention.energy)."""
import torch

import zoo

CITATION = ('Tsai et al. 2019, "Transformer Dissection: An Unified Understanding for '
            'Transformer\'s Attention via the Lens of Kernel", EMNLP, sec. 2 (attention as a kernel '
            'smoother) with the RBF kernel exp(-||x_q W_q - x_k W_k||^2 / (2 sigma^2)): '
            'E = -sum_{b,h,i} log sum_j k(x_i, x_j), gradient descent on the tokens')
TEST_DIMS = dict(B=2, N=4, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=128, D=64, H=4, Y=16)
STEPS = 4
TEST_STEPS = 2
SIGMA = 2.0
LR = 0.5
COPIES = {'x': 'x0'}
TRAINED = ['Wq', 'Wk']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'x0': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
    }


def energy(t, step):
    x = t['x']
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], x)
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], x)
    # ||q_i - k_j||^2 expanded, [B, H, N, N]
    d2 = q.pow(2).sum(-1).unsqueeze(-1) + k.pow(2).sum(-1).unsqueeze(-2) - 2 * q @ k.transpose(-1, -2)
    return -torch.logsumexp(-d2 / (2 * SIGMA ** 2), dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
