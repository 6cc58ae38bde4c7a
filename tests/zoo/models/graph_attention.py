"""Multi-head graph attention (GAT) in PyTorch (see graph_attention.energy)."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Veličković et al. 2018, "Graph Attention Networks", ICLR, eqs. 1-5: edge scores '
            'LeakyReLU(a^T [W h_i || W h_j]) (slope 0.2) softmax-normalised over each node\'s '
            'neighbours, per head; E = -sum_{b,h,i} log sum_j exp(e_ij + adj_ij), gradient '
            'descent on the nodes\' states')
TEST_DIMS = dict(B=2, N=5, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=8, N=256, D=64, H=4, Y=16)
STEPS = 2
TEST_STEPS = 2
LR = 1.0
COPIES = {'x': 'h'}
TRAINED = ['W', 'asrc', 'adst']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    # A random graph of about 8 neighbours per node, with self-loops: a bias
    # of 0 on its edges and -1e4 elsewhere.
    edges = rng.random((b, n, n)) < min(1.0, 8.0 / n)
    edges |= torch.eye(n, dtype=torch.bool).numpy()[None]
    return {
        'h': rng.standard_normal((b, n, d)),
        'adj': (~edges) * -1e4,
        'target': rng.standard_normal((b, n, d)),
        'W': rng.standard_normal((h, y, d)) / d ** 0.5,
        'asrc': rng.standard_normal((h, y)) / y ** 0.5,
        'adst': rng.standard_normal((h, y)) / y ** 0.5,
    }


def energy(t, step):
    x, h = t['x'], t['h']
    source = torch.einsum('gy,gyd,bnd->bgn', t['asrc'], t['W'], x)      # [B, H, N]
    target = torch.einsum('gy,gyd,bnd->bgn', t['adst'], t['W'], h)
    scores = F.leaky_relu(source.unsqueeze(-1) + target.unsqueeze(-2), 0.2)
    scores = scores + t['adj'].unsqueeze(1)                              # [B, H, N, N]
    return -torch.logsumexp(scores, dim=-1).sum()


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
