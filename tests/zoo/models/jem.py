"""JEM (Grathwohl et al. 2020) in PyTorch (see jem.energy)."""
import numpy as np
import torch

import zoo

CITATION = ('Grathwohl et al. 2020, "Your Classifier is Secretly an Energy Based Model and '
            'You Should Treat it Like One", ICLR, secs. 2-4: E(x) = -LogSumExp_y f(x)[y], '
            'noiseless SGLD samples, loss = cross-entropy + E(x_data) - E(x_sample)')
TEST_DIMS = dict(B=3, D=5, H=4, C=3)
BENCH_DIMS = dict(B=128, D=784, H=512, C=10)
STEPS = 20
TEST_STEPS = 2
ALPHA = 1.0
COPIES = {'x': 'x0'}
TRAINED = ['W1', 'b1', 'W2', 'b2']


def make_inputs(dims, rng):
    b, d, h, c = (dims[k] for k in 'BDHC')
    return {
        'x0': rng.uniform(-1, 1, (b, d)),
        'xd': rng.standard_normal((b, d)),
        'y': np.eye(c)[rng.integers(0, c, b)],
        'W1': rng.standard_normal((h, d)) / d ** 0.5,
        'b1': 0.1 * rng.standard_normal(h),
        'W2': rng.standard_normal((c, h)) / h ** 0.5,
        'b2': 0.1 * rng.standard_normal(c),
    }


def logits(t, v):
    return torch.relu(v @ t['W1'].T + t['b1']) @ t['W2'].T + t['b2']


def energy(t, step):
    return -torch.logsumexp(logits(t, t['x']), dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'x': ('gd', ALPHA)}, steps, create_graph)


def loss(final, t):
    data = logits(t, t['xd'])
    xent = -(t['y'] * torch.log_softmax(data, dim=-1)).sum(-1).mean()
    contrastive = (torch.logsumexp(logits(t, final['x']), dim=-1)
                   - torch.logsumexp(data, dim=-1)).mean()
    return xent + contrastive
