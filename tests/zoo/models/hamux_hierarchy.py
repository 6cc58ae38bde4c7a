"""A three-layer hierarchical associative memory (HAMUX) in PyTorch (see
hamux_hierarchy.energy)."""
import torch

import zoo

CITATION = ('Hoover et al. 2022, "A Universal Abstraction for Hierarchical Hopfield Networks" '
            '(HAMUX), after Krotov 2021, "Hierarchical Associative Memory": '
            'E = sum_l (x_l . g_l - L_l) - g1^T W1 g2 - g2^T W2 g3, Lagrangians layernorm, '
            'softplus (sigmoid), lse (softmax); gradient descent on all layers')
TEST_DIMS = dict(B=2, D1=5, D2=4, D3=3)
BENCH_DIMS = dict(B=64, D1=784, D2=512, D3=10)
STEPS = 10
TEST_STEPS = 3
LR = 0.1
EPS = 1e-5
COPIES = {'x1': 'v1', 'x2': 'v2', 'x3': 'v3'}
TRAINED = ['W1', 'W2']


def make_inputs(dims, rng):
    b, d1, d2, d3 = (dims[k] for k in ('B', 'D1', 'D2', 'D3'))
    return {
        'v1': rng.standard_normal((b, d1)),
        'v2': rng.standard_normal((b, d2)),
        'v3': rng.standard_normal((b, d3)),
        'labels': torch.nn.functional.one_hot(torch.tensor(rng.integers(0, d3, size=b)),
                                              d3).double().numpy(),
        'W1': rng.standard_normal((d1, d2)) / d1 ** 0.5,
        'W2': rng.standard_normal((d2, d3)) / d2 ** 0.5,
    }


def layer_norm_lagrangian(x):
    """L(x) = D sqrt(Var x + eps) and its gradient g = (x - mean) / sqrt(Var x + eps)."""
    centred = x - x.mean(-1, keepdim=True)
    sd = torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + EPS)
    return x.shape[-1] * sd.squeeze(-1), centred / sd


def energy(t, step):
    x1, x2, x3 = t['x1'], t['x2'], t['x3']
    lagrangian1, g1 = layer_norm_lagrangian(x1)
    lagrangian2, g2 = torch.nn.functional.softplus(x2).sum(-1), torch.sigmoid(x2)
    lagrangian3, g3 = torch.logsumexp(x3, -1), torch.softmax(x3, -1)
    layers = ((x1 * g1).sum(-1) - lagrangian1 + (x2 * g2).sum(-1) - lagrangian2
              + (x3 * g3).sum(-1) - lagrangian3).sum()
    synapses = -((g1 @ t['W1']) * g2).sum() - ((g2 @ t['W2']) * g3).sum()
    return layers + synapses


def run(t, steps, create_graph):
    rules = {n: ('gd', LR) for n in ('x1', 'x2', 'x3')}
    return zoo.descend(energy, t, rules, steps, create_graph)


def loss(final, t):
    return -(t['labels'] * torch.log_softmax(final['x3'], -1)).sum(-1).mean()
