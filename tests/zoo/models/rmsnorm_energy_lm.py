"""An energy Transformer language model with RMSNorm, in PyTorch (see
rmsnorm_energy_lm.energy)."""
import torch

import zoo

CITATION = ('Hoover et al. 2023, "Energy Transformer", NeurIPS, eqs. 2-5 (energy attention, '
            'ReLU^2 Hopfield module), with Zhang and Sennrich 2019, "Root Mean Square Layer '
            'Normalization", NeurIPS, eq. 4 (RMSNorm with gain) in place of the layer norm; causal '
            'attention (j <= i, keys from the embedded inputs), next-token cross-entropy')
TEST_DIMS = dict(B=2, T=5, D=6, H=2, Y=3, M=4, V=5)
BENCH_DIMS = dict(B=8, T=128, D=128, H=4, Y=32, M=256, V=128)
STEPS = 4
TEST_STEPS = 2
LR = 0.2
EPS = 1e-5
COPIES = {'x': 'h'}
TRAINED = ['Wq', 'Wk', 'xi', 'gamma', 'R']


def make_inputs(dims, rng):
    b, t, d, h, y, m, v = (dims[k] for k in 'BTDHYMV')
    tokens = rng.integers(0, v, size=(b, t + 1))
    embedding = rng.standard_normal((v, d))
    return {
        'h': embedding[tokens[:, :-1]],                 # the embedded inputs
        'y': torch.nn.functional.one_hot(torch.from_numpy(tokens[:, 1:]), v).numpy().astype(float),
        'Wq': rng.standard_normal((h, y, d)) / d ** 0.5,
        'Wk': rng.standard_normal((h, y, d)) / d ** 0.5,
        'xi': rng.standard_normal((m, d)) / d ** 0.5,
        'gamma': 1 + 0.1 * rng.standard_normal(d),
        'R': rng.standard_normal((v, d)) / d ** 0.5,
    }


def rms_norm(v):
    return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + EPS)


def energy(t, step):
    g = t['gamma'] * rms_norm(t['x'])
    gh = t['gamma'] * rms_norm(t['h'])
    q = torch.einsum('hyd,btd->bhty', t['Wq'], g)
    k = torch.einsum('hyd,btd->bhty', t['Wk'], gh)
    beta = 1 / t['Wq'].shape[1] ** 0.5
    n = g.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    scores = (beta * q @ k.transpose(-1, -2)).masked_fill(~causal, float('-inf'))
    attention = -torch.logsumexp(scores, dim=-1).sum() / beta
    hopfield = -0.5 * torch.relu(g @ t['xi'].T).pow(2).sum()
    return attention + hopfield


def run(t, steps, create_graph):
    return zoo.descend_from_copy(energy, t, LR, steps, create_graph)


def loss(final, t):
    logits = rms_norm(final['x']) @ t['R'].T
    return -(t['y'] * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
