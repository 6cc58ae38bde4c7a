"""The Hopfield layer in PyTorch (see modern_hopfield_layer.energy)."""
import torch

import zoo

CITATION = ('Ramsauer et al. 2021, "Hopfield Networks is All You Need", ICLR, eqs. 2-3 and the Hopfield layer (sec. 3): '
            'E = -(1/beta) lse(beta K . Wq xi) + 0.5 |xi|^2 with keys K = Wk Y, '
            'gradient step lr = 1 (the update xi <- Wq^T K^T softmax(beta K Wq xi)), readout Wv xi')
TEST_DIMS = dict(B=2, S=4, Q=3, D=5, A=3, O=2)
BENCH_DIMS = dict(B=16, S=256, Q=64, D=128, A=64, O=64)
STEPS = 3
TEST_STEPS = 2
BETA = 0.5
COPIES = {'xi': 'R'}
TRAINED = ['Wq', 'Wk', 'Wv']


def make_inputs(dims, rng):
    b, s, q, d, a, o = (dims[k] for k in 'BSQDAO')
    return {
        'Y': rng.standard_normal((b, s, d)),
        'R': rng.standard_normal((b, q, d)),
        'target': rng.standard_normal((b, q, o)),
        'Wq': rng.standard_normal((a, d)) / d ** 0.5,
        'Wk': rng.standard_normal((a, d)) / d ** 0.5,
        'Wv': rng.standard_normal((o, d)) / d ** 0.5,
    }


def energy(t, step):
    xi = t['xi']
    keys = t['Y'] @ t['Wk'].T                    # [B, S, A]
    queries = xi @ t['Wq'].T                     # [B, Q, A]
    scores = queries @ keys.transpose(-1, -2)    # [B, Q, S]
    retrieval = -(1 / BETA) * torch.logsumexp(BETA * scores, dim=-1).sum()
    bound = 0.5 * (xi * xi).sum()
    return retrieval + bound


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'xi': ('gd', 1.0)}, steps, create_graph)


def loss(final, t):
    readout = final['xi'] @ t['Wv'].T            # [B, Q, O]
    return zoo.half_squared_error(readout, t['target'])
