"""A 3-layer predictive coding network (Whittington & Bogacz 2017) in PyTorch
(see predictive_coding_3layer.energy)."""
import torch

import zoo

CITATION = ('Whittington & Bogacz 2017, "An approximation of the error backpropagation '
            'algorithm in a predictive coding network with local Hebbian synaptic plasticity", '
            'Neural Computation 29, sec. 2.2: E = sum_l 0.5 ||x_{l+1} - W_l tanh(x_l) - b_l||^2, '
            'gradient relaxation of the value nodes with the input clamped')
TEST_DIMS = dict(B=3, N0=5, N1=4, N2=4, N3=2)
BENCH_DIMS = dict(B=128, N0=784, N1=256, N2=256, N3=10)
STEPS = 20
TEST_STEPS = 3
LR = 0.2
TRAINED = ['W0', 'b0', 'W1', 'b1', 'W2', 'b2']


def make_inputs(dims, rng):
    b, n0, n1, n2, n3 = (dims[k] for k in ('B', 'N0', 'N1', 'N2', 'N3'))
    labels = rng.integers(0, n3, b)
    return {
        'x0': rng.standard_normal((b, n0)),
        'y': torch.nn.functional.one_hot(torch.tensor(labels), n3).double().numpy(),
        'x1': 0.5 * rng.standard_normal((b, n1)),
        'x2': 0.5 * rng.standard_normal((b, n2)),
        'x3': 0.5 * rng.standard_normal((b, n3)),
        'W0': rng.standard_normal((n1, n0)) / n0 ** 0.5,
        'b0': 0.1 * rng.standard_normal(n1),
        'W1': rng.standard_normal((n2, n1)) / n1 ** 0.5,
        'b1': 0.1 * rng.standard_normal(n2),
        'W2': rng.standard_normal((n3, n2)) / n2 ** 0.5,
        'b2': 0.1 * rng.standard_normal(n3),
    }


def energy(t, step):
    total = 0
    for l in range(3):
        prediction = torch.tanh(t['x%d' % l]) @ t['W%d' % l].T + t['b%d' % l]
        total = total + 0.5 * (t['x%d' % (l + 1)] - prediction).pow(2).sum()
    return total


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x1': ('gd', LR), 'x2': ('gd', LR), 'x3': ('gd', LR)},
                       steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x3'], t['y'])
