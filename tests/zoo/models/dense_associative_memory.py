"""Dense Associative Memory in PyTorch (see dense_associative_memory.energy)."""
import torch

import zoo

CITATION = ('Krotov & Hopfield 2016, "Dense Associative Memory for Pattern Recognition", '
            'NeurIPS, sec. 2: E = -sum_mu F(xi_mu . sigma), rectified polynomial '
            'F(z) = relu(z)^3/3 (n = 3); binary states relaxed to sigma = tanh(x), plus '
            '0.5 |x|^2, gradient descent on x')
TEST_DIMS = dict(B=3, M=5, D=4)
BENCH_DIMS = dict(B=64, M=1024, D=256)
STEPS = 10
TEST_STEPS = 2
LR = 0.1
COPIES = {'x': 'x0'}
TRAINED = ['xi']


def make_inputs(dims, rng):
    b, m, d = (dims[k] for k in 'BMD')
    return {
        'x0': rng.standard_normal((b, d)),
        'target': rng.choice([-1.0, 1.0], size=(b, d)),
        'xi': rng.standard_normal((m, d)) / d ** 0.5,
    }


def energy(t, step):
    x = t['x']
    sigma = torch.tanh(x)
    overlaps = sigma @ t['xi'].T                 # [B, M]
    memories = -(torch.relu(overlaps) ** 3 / 3).sum()
    bound = 0.5 * (x * x).sum()
    return memories + bound


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(torch.tanh(final['x']), t['target'])
