"""Perceiver's latent cross-attention as an energy, in PyTorch (see
perceiver_latents.energy)."""
import numpy as np
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Jaegle et al. 2021, "Perceiver: General Perception with Iterative Attention", '
            'ICML, sec. 2, Fig. 1: a learned latent array (M << N) cross-attends to the byte '
            'array, queries from LN(latents), keys from LN(inputs), scale 1/sqrt(Y): '
            'E = -sum_{b,h,m} lse_n q_hm.k_hn/sqrt(Y) + 0.5 sum ||z - L||^2, '
            'gradient descent on the latents from L, squared-error loss of the final latents')
TEST_DIMS = dict(B=2, N=7, C=3, M=3, D=4, H=2, Y=3)
BENCH_DIMS = dict(B=4, N=2048, C=64, M=64, D=128, H=4, Y=32)
STEPS = 4
TEST_STEPS = 2
LR = 0.5
TRAINED = ['L', 'Wq', 'Wk']


def make_inputs(dims, rng):
    b, n, c, m, d, h, y = (dims[k] for k in 'BNCMDHY')
    return {
        'x': rng.standard_normal((b, n, c)),
        'target': rng.standard_normal((b, m, d)),
        'L': rng.standard_normal((m, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, c)) / c ** 0.5,
        'd': np.zeros((b, m, d)),                   # the state starts at zero: z = L
    }


def latents(t):
    return t['L'].unsqueeze(0) + t['d']            # [B, M, D]: every example starts at L


def energy(t, step):
    width = t['Wq'].shape[1]
    z = F.layer_norm(latents(t), (t['L'].shape[-1],), eps=1e-5)
    x = F.layer_norm(t['x'], (t['x'].shape[-1],), eps=1e-5)
    q = torch.einsum('hyd,bmd->bhmy', t['Wq'], z)    # queries: few latents
    k = torch.einsum('hyc,bnc->bhny', t['Wk'], x)    # keys: many inputs
    logits = q @ k.transpose(-1, -2) / width ** 0.5  # [B, H, M, N]
    cross = -torch.logsumexp(logits, dim=-1).sum()   # each latent's softmax over the inputs
    anchor = 0.5 * t['d'].pow(2).sum()
    return cross + anchor


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'d': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    z = t['L'].unsqueeze(0) + final['d']
    return 0.5 * (z - t['target']).pow(2).sum((1, 2)).mean()
