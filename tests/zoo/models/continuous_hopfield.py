"""The continuous Hopfield network in PyTorch (see continuous_hopfield.energy)."""
import math

import torch

import zoo

CITATION = ('Hopfield 1984, "Neurons with graded response have collective computational '
            'properties like those of two-state neurons", PNAS 81, eq. 7: '
            'E = -0.5 V^T W V - I^T V + sum int_0^V g^-1, V = tanh(u) '
            '(integral u tanh u - log cosh u); gradient flow in u by Heun steps')
TEST_DIMS = dict(B=3, N=5)
BENCH_DIMS = dict(B=64, N=512)
STEPS = 20
TEST_STEPS = 2
DT = 0.1
COPIES = {'u': 'u0'}
TRAINED = ['W', 'bias']


def make_inputs(dims, rng):
    b, n = dims['B'], dims['N']
    return {
        'u0': rng.standard_normal((b, n)),
        'target': rng.choice([-1.0, 1.0], size=(b, n)),
        'W': rng.standard_normal((n, n)) / n ** 0.5,
        'bias': 0.1 * rng.standard_normal(n),
    }


def energy(t, step):
    u = t['u']
    v = torch.tanh(u)
    synapses = -0.5 * torch.einsum('bi,ij,bj->', v, t['W'], v)
    currents = -(v @ t['bias']).sum()
    log_cosh = torch.logaddexp(u, -u) - math.log(2)   # log cosh u, without overflow
    leak = (u * v - log_cosh).sum()
    return synapses + currents + leak


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'u': ('heun', DT)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(torch.tanh(final['u']), t['target'])
