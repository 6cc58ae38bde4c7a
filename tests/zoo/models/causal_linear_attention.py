"""Causal linear attention in PyTorch (see causal_linear_attention.energy),
written in the paper's recurrent form: the prefix sums Z_i by cumsum."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers '
            'with Linear Attention", ICML, eqs. 4-9, phi(x) = elu(x) + 1 (eq. 7): '
            'E = -sum_{b,h,i} log(phi(Q_i)^T sum_{j<=i} phi(K_j)), gradient descent on the queries\' states')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=1024, D=64, H=4, Y=16)
STEPS = 4
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


def phi(v):
    return F.elu(v) + 1


def energy(t, step):
    q = phi(torch.einsum('hyd,bnd->bhny', t['Wq'], t['x']))
    k = phi(torch.einsum('hyd,bnd->bhny', t['Wk'], t['h']))
    z = torch.cumsum(k, dim=2)                      # Z_i = sum_{j <= i} phi(K_j)
    return -torch.log((q * z).sum(-1)).sum()


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
