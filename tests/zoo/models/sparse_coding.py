"""Sparse coding (Olshausen & Field 1996) in PyTorch (see sparse_coding.energy)."""
import torch

import zoo

CITATION = ('Olshausen & Field 1996, "Emergence of simple-cell receptive field properties '
            'by learning a sparse code for natural images", Nature 381:607-609, eqs. 1-5: '
            'E = 0.5 ||x - D a||^2 + lambda sum_i S(a_i / sigma), S(u) = log(1 + u^2); '
            'Nesterov descent of the codes, the dictionary learns the reconstruction error')
TEST_DIMS = dict(B=3, P=5, K=6)
BENCH_DIMS = dict(B=256, P=256, K=512)
STEPS = 20
TEST_STEPS = 3
LAMBDA = 0.1
SIGMA = 1.0
TRAINED = ['D']


def make_inputs(dims, rng):
    b, p, k = (dims[n] for n in 'BPK')
    return {
        'x': rng.standard_normal((b, p)),
        'a': 0.5 * rng.standard_normal((b, k)),
        'D': 0.5 * rng.standard_normal((p, k)) / p ** 0.5,
    }


def energy(t, step):
    x, a, d = t['x'], t['a'], t['D']
    information = 0.5 * (x - a @ d.T).pow(2).sum()
    sparseness = LAMBDA * torch.log(1 + (a / SIGMA) ** 2).sum()
    return information + sparseness


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'a': ('nesterov', 0.3, 0.8)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(t['x'], final['a'] @ t['D'].T)
