"""Naive mean-field theory of a Boltzmann machine (Peterson & Anderson
1987) in PyTorch (see mean_field_ising.energy)."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Peterson & Anderson 1987, "A mean field theory learning algorithm for neural '
            'networks", Complex Systems 1, sec. 2-3; Hopfield 1984, "Neurons with graded '
            'response", PNAS 81: F(s) = -1/2 s^T W s - b^T s + T sum [s log s + (1-s) log(1-s)], '
            's = sigmoid(u), W = (A + A^T)/2, gradient descent in u, cross-entropy loss')
TEST_DIMS = dict(B=3, N=6)
BENCH_DIMS = dict(B=64, N=1024)
STEPS = 10
TEST_STEPS = 3
LR = 2.0
TEMPERATURE = 0.8
COPIES = {'u': 'u0'}
TRAINED = ['A', 'b']


def make_inputs(dims, rng):
    b, n = dims['B'], dims['N']
    patterns = (rng.random((b, n)) < 0.5).astype(float)
    return {
        'u0': 2.0 * (2 * patterns - 1) + 1.5 * rng.standard_normal((b, n)),   # corrupted logits
        'y': patterns,
        'A': rng.standard_normal((n, n)) / n ** 0.5,
        'b': 0.1 * rng.standard_normal(n),
    }


def energy(t, step):
    u = t['u']
    s = torch.sigmoid(u)
    w = 0.5 * (t['A'] + t['A'].T)
    interaction = -0.5 * ((s @ w) * s).sum() - (s @ t['b']).sum()
    # s log s + (1 - s) log(1 - s), with the logs of s = sigmoid(u) taken stably
    negentropy = (s * F.logsigmoid(u) + (1 - s) * F.logsigmoid(-u)).sum()
    return interaction + TEMPERATURE * negentropy


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'u': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return F.binary_cross_entropy_with_logits(final['u'], t['y'], reduction='sum') / t['y'].shape[0]
