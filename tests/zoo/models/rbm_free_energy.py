"""Denoising by descent of an RBM's free energy, in PyTorch (see
rbm_free_energy.energy)."""
import torch.nn.functional as F

import zoo

CITATION = ('Hinton 2002, "Training products of experts by minimizing contrastive divergence", '
            'Neural Computation 14; Hinton 2010, "A Practical Guide to Training Restricted '
            'Boltzmann Machines", sec. 16.1: F(v) = -b.v - sum_j softplus(c_j + W_j.v), '
            'continuous v, gradient descent from corrupted inputs')
TEST_DIMS = dict(B=3, D=5, H=4)
BENCH_DIMS = dict(B=128, D=784, H=512)
STEPS = 10
TEST_STEPS = 2
LR = 0.1
COPIES = {'v': 'noisy'}
TRAINED = ['W', 'b', 'c']


def make_inputs(dims, rng):
    b, d, h = dims['B'], dims['D'], dims['H']
    clean = (rng.random((b, d)) < 0.5).astype(float)
    return {
        'noisy': clean + 0.3 * rng.standard_normal((b, d)),
        'clean': clean,
        'W': rng.standard_normal((h, d)) / d ** 0.5,
        'b': 0.1 * rng.standard_normal(d),
        'c': 0.1 * rng.standard_normal(h),
    }


def energy(t, step):
    v = t['v']
    hidden = v @ t['W'].T + t['c']               # [B, H]
    return -(v @ t['b']).sum() - F.softplus(hidden).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'v': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['v'], t['clean'])
