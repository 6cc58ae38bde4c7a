"""Causal sliding-window attention in PyTorch (see
sliding_window_attention.energy), written as the block-banded computation
of Longformer's sliding chunks: the queries in blocks of W, each block
scored against the keys of its own block and the one before (2W keys, one
batched matrix product), the keys outside i - W < j <= i masked."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Beltagy et al. 2020, "Longformer: The Long-Document Transformer", sec. 3.1 (sliding '
            'window), and Jiang et al. 2023, "Mistral 7B", sec. 2 (sliding window attention): '
            'query i attends to keys i - W < j <= i, q_i.k_j/sqrt(d), W = 64; '
            'E = -sum_{b,h,i} log sum_{i-W<j<=i} exp(score), gradient descent on the queries\' states')
WINDOW = 64      # the .energy's dim W (its default), bound in no tensor's shape
TEST_DIMS = dict(B=2, N=80, D=6, H=2, Y=3)   # N > W: the window cuts the later queries
BENCH_DIMS = dict(B=8, N=1024, D=128, H=4, Y=32)
STEPS = 3
TEST_STEPS = 2
LR = 1.0
COPIES = {'x': 'h'}
TRAINED = ['Wq', 'Wk']


def make_inputs(dims, rng):
    b, n, d, h, y = (dims[k] for k in 'BNDHY')
    return {
        'h': rng.standard_normal((b, n, d)),
        'target': rng.standard_normal((b, n, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
    }


def energy(t, step):
    x, h = t['x'], t['h']
    batch, n, _ = x.shape
    heads, y, _ = t['Wq'].shape
    w = WINDOW
    blocks = -(-n // w)
    q = torch.einsum('hyd,bnd->bhny', t['Wq'], x)            # [B, H, N, Y]
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], h)
    # N padded at the end to whole blocks (those queries are dropped), and
    # the keys by one block in front (keys before the first, masked)
    q = F.pad(q, (0, 0, 0, blocks * w - n)).reshape(batch, heads, blocks, w, y)
    k = F.pad(k, (0, 0, w, blocks * w - n)).reshape(batch, heads, blocks + 1, w, y)
    keys = torch.cat([k[:, :, :-1], k[:, :, 1:]], dim=3)      # [B, H, C, 2W, Y]: blocks c-1, c
    scores = q @ keys.transpose(-1, -2) / y ** 0.5            # [B, H, C, W, 2W]
    # query i = cW + a, key j = (c - 1)W + s: i - W < j <= i is a < s <= a + W
    a = torch.arange(w).view(w, 1)
    s = torch.arange(2 * w).view(1, 2 * w)
    outside = (s <= a) | (s > a + w)
    before_start = torch.zeros(blocks, 1, 2 * w, dtype=torch.bool)
    before_start[0, :, :w] = True                             # block -1: no keys
    scores = scores.masked_fill(outside | before_start, float('-inf'))
    lse = torch.logsumexp(scores, dim=-1).reshape(batch, heads, blocks * w)[:, :, :n]
    return -lse.sum()


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    return zoo.half_squared_error(final['x'], t['target'])
