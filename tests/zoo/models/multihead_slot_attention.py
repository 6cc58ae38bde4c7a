"""Multi-head Slot Attention as an energy, in PyTorch (see multihead_slot_attention.energy)."""
import torch
import torch.nn.functional as F

import zoo

CITATION = ('Locatello et al. 2020, "Object-Centric Learning with Slot Attention", NeurIPS, '
            'sec. 2.1, Algorithm 1, eq. 1 (softmax over slots of LN(x) keys against LN(slots) '
            'queries, scale 1/sqrt(D)): E = -sum_{b,h,j} lse_i k_hj.q_hi/sqrt(Y) + 0.5 sum ||mu||^2, '
            'gradient descent on the slots, mixture readout loss (sec. 2.2)')
TEST_DIMS = dict(B=2, N=5, S=3, D=6, H=2, Y=3)
BENCH_DIMS = dict(B=16, N=256, S=8, D=64, H=4, Y=16)
STEPS = 3
TEST_STEPS = 3
LR = 0.5
COPIES = {'mu': 'mu0'}
TRAINED = ['Wq', 'Wk', 'Wm', 'Wd']


def make_inputs(dims, rng):
    b, n, s, d, h, y = (dims[k] for k in 'BNSDHY')
    return {
        'x': rng.standard_normal((b, n, d)),
        'mu0': rng.standard_normal((b, s, d)),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wm': rng.standard_normal((d, d)) / d ** 0.5,
        'Wd': rng.standard_normal((d, d)) / d ** 0.5,
    }


def layer_norm(v):
    return F.layer_norm(v, v.shape[-1:], eps=1e-5)


def energy(t, step):
    k = torch.einsum('hyd,bnd->bhny', t['Wk'], layer_norm(t['x']))    # [B, H, N, Y]
    q = torch.einsum('hyd,bsd->bhsy', t['Wq'], layer_norm(t['mu']))   # [B, H, S, Y]
    logits = k @ q.transpose(-1, -2) / t['Wq'].shape[1] ** 0.5         # [B, H, N, S]
    slots = -torch.logsumexp(logits, dim=-1).sum()                     # over the slots
    prior = 0.5 * t['mu'].pow(2).sum()
    return slots + prior


def run(t, steps, create_graph):
    return zoo.descend(energy, t, {'mu': ('gd', LR)}, steps, create_graph)


def loss(final, t):
    mu, x = final['mu'], t['x']
    masks = torch.softmax(torch.einsum('bsd,de,bne->bns', mu, t['Wm'], x), dim=-1)   # [B, N, S]
    parts = torch.einsum('ed,bsd->bse', t['Wd'], mu)                                   # Wd mu_i
    recon = masks @ parts                                                              # [B, N, D]
    return zoo.half_squared_error(x, recon)
