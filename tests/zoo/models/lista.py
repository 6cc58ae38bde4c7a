"""LISTA (Gregor & LeCun 2010) in PyTorch (see lista.energy)."""
import numpy as np
import torch

import zoo

CITATION = ('Gregor & LeCun 2010, "Learning Fast Approximations of Sparse Coding", ICML, '
            'sec. 3 and Fig. 3: Z(k+1) = h_theta(We X + S Z(k)), '
            'h_theta(V) = sign(V)(|V| - theta)_+, L = 0.5 ||Z* - Z(T)||^2')
TEST_DIMS = dict(B=3, P=4, K=5)
BENCH_DIMS = dict(B=256, P=256, K=512)
STEPS = 7
TEST_STEPS = 3
ALPHA = 0.1
EPS = 1e-2
TRAINED = ['We', 'S', 'theta']


def make_inputs(dims, rng):
    b, p, k = (dims[n] for n in 'BPK')
    wd = rng.standard_normal((p, k)) / p ** 0.5
    lipschitz = 1.05 * np.linalg.norm(wd, 2) ** 2
    # signals made from sparse codes, which stand for the optimal codes Z*
    zstar = rng.standard_normal((b, k)) * (rng.random((b, k)) < 0.1)
    return {
        'x': zstar @ wd.T + 0.1 * rng.standard_normal((b, p)),
        'zstar': zstar,
        'Wd': wd,
        'z': np.zeros((b, k)),
        # ISTA's values (sec. 2: We = Wd^T / L, S = I - Wd^T Wd / L,
        # theta = alpha / L), perturbed
        'We': wd.T / lipschitz + 0.1 * rng.standard_normal((k, p)) / p ** 0.5 / lipschitz,
        'S': np.eye(k) - wd.T @ wd / lipschitz + 0.1 * rng.standard_normal((k, k)) / k ** 0.5,
        'theta': (ALPHA + 0.05 * rng.random(k)) / lipschitz,
    }


def energy(t, step):
    x, z = t['x'], t['z']
    return 0.5 * (x - z @ t['Wd'].T).pow(2).sum() + ALPHA * torch.sqrt(z ** 2 + EPS).sum()


def shrink(v, theta):
    return torch.relu(v - theta) - torch.relu(-v - theta)


def run(t, steps, create_graph):
    z = t['z'] if create_graph else t['z'].detach()
    b = t['x'] @ t['We'].T
    for _ in range(steps):
        z = shrink(b + z @ t['S'].T, t['theta'])
        if not create_graph:
            z = z.detach()
    return {'z': z}


def loss(final, t):
    return zoo.half_squared_error(final['z'], t['zstar'])
