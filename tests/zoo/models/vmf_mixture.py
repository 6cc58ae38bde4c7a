"""EM for a mixture of von Mises-Fisher distributions (Banerjee et al. 2005)
in PyTorch (see vmf_mixture.energy)."""
import numpy as np
import torch

CITATION = ('Banerjee, Dhillon, Ghosh & Sra 2005, "Clustering on the Unit Hypersphere using '
            'von Mises-Fisher Distributions", JMLR 6, EM for a mixture of vMFs (soft-moVMF, fixed kappa): '
            'r_ik = softmax_k(log pi_k + kappa mu_k . x_i), mu_k = normalise(sum_i r_ik x_i), '
            'pi_k = mean_i r_ik; E = -sum_i lse_k(log pi_k + kappa mu_k . x_i)')
TEST_DIMS = dict(N=6, K=3, D=4)
BENCH_DIMS = dict(N=20000, K=32, D=32)
STEPS = 10
TEST_STEPS = 2
KAPPA = 10.0
RMSNORM_EPS = 1e-5
TRAINED = []


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def make_inputs(dims, rng):
    n, k, d = (dims[c] for c in 'NKD')
    centres = unit(rng.standard_normal((k, d)))
    points = centres[rng.integers(0, k, n)] + 0.3 * rng.standard_normal((n, d))
    return {
        'x': unit(points),
        'mu': unit(rng.standard_normal((k, d))),
        'pi': np.full(k, 1.0 / k),
        'R': np.zeros((n, k)),
    }


def logits(t):
    return torch.log(t['pi']) + KAPPA * t['x'] @ t['mu'].T


def energy(t, step):
    return -torch.logsumexp(logits(t), dim=-1).sum()


def normalise(v):
    # rmsnorm(v) / sqrt(D), rmsnorm(v) = v / sqrt(mean(v^2) + eps)
    d = v.shape[-1]
    return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + RMSNORM_EPS) / d ** 0.5


def run(t, steps, create_graph):
    t = {n: v if create_graph else v.detach() for n, v in t.items()}
    for _ in range(steps):
        t['R'] = torch.softmax(logits(t), dim=-1)
        t['mu'] = normalise(t['R'].T @ t['x'])
        t['pi'] = t['R'].sum(0) / t['x'].shape[0]
    return {n: t[n] for n in ('R', 'mu', 'pi')}
