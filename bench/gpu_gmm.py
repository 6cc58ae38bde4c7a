#!/usr/bin/env python3
"""On a GPU machine: benchmark (c), one EM iteration of a full-covariance
Gaussian mixture, the CUDA artifact against PyTorch on the same GPU, same
inputs. Prints one JSON object.

Usage: gpu_gmm.py ENERGY_EXEC ARTIFACT N [REPS] [K D] [--device cpu]

ARTIFACT is examples/gmm.energy without its `until` clause (bench/gmm_em.py
removes it the same way), compiled with `energyc --target cuda`; K and D
default to 64 and 32, REPS to 5. --device cpu is for testing this script on
a machine without a GPU: torch on the CPU, and ARTIFACT compiled for the CPU
(energy-exec then gets --device cpu); the times mean nothing there.

The problem is made on the device with a fixed seed, as bench/gmm_em.py
describes it but without its N x D x D tensor: K well-separated clusters in
D dimensions (means uniform in [-8, 8]^D, covariances Q diag(e) Q^T with Q
random orthogonal and e uniform in [0.5, 1.5], weights uniform in [1, 2]
normalised), the points of each component drawn together, then shuffled;
the start is the true means moved by N(0, 0.5^2) noise, identity precisions
and equal weights.

Ours: `energy-exec ARTIFACT --in in.safetensors --eval run --steps 1`
(inputs x, mu, prec and w, the log weights; results mu, prec, w) through
gpu_attention.run_ours: the median of REPS whole calls (each from the
same state, set from the host before the clock starts; no energy
evaluated, as the anchor evaluates none) and the GPU work of one warm traced call.

Anchor: the same iteration written in PyTorch, batched, in f32 (em_step),
timed with gpu_attention.time_torch. It computes what the model's
closed-form step computes (compiler/lib/Dynamics/ClosedForms.cpp,
docs/dynamics.md): responsibilities at the entry values, then the counts
N_k, the means, the precisions as the inverse of the covariances about the
new means plus 1e-6 I (the M-step's ridge, scikit-learn's reg_covar), and
the log weights log N_k. Both results are compared with em_step in f64 on
the same inputs: per parameter (means, precisions, weights = softmax of the
log weights), the max difference over the largest entry.
"""
import json
import sys

import numpy as np
import torch

from gpu_attention import difference, run_ours, time_torch

RIDGE = 1e-6  # the M-step's, docs/dynamics.md


def make_problem(n, k, d, device, seed=2026):
    """(x [n, d] f32, start {mu, prec, w}), made on `device`: each
    component's points at once, never an n x d x d tensor."""
    generator = torch.Generator(device=device).manual_seed(seed)

    def uniform(low, high, *shape):
        return low + (high - low) * torch.rand(*shape, generator=generator, device=device,
                                               dtype=torch.float64)

    def normal(*shape, dtype=torch.float64):
        return torch.randn(*shape, generator=generator, device=device, dtype=dtype)

    means = uniform(-8, 8, k, d)
    rotations = torch.linalg.qr(normal(k, d, d))[0]
    # Covariance_j = A_j A_j^T with A_j = Q_j diag(sqrt(e_j)).
    factors = rotations * uniform(0.5, 1.5, k, 1, d).sqrt()
    weights = uniform(1, 2, k)
    weights /= weights.sum()
    counts = torch.bincount(torch.multinomial(weights, n, replacement=True,
                                              generator=generator), minlength=k).tolist()
    x = torch.empty(n, d, device=device)
    begin = 0
    for j, count in enumerate(counts):
        x[begin:begin + count] = (means[j] + normal(count, d, dtype=torch.float32).double()
                                  @ factors[j].T).float()
        begin += count
    x = x[torch.randperm(n, generator=generator, device=device)]
    start = {'mu': (means + 0.5 * normal(k, d)).float(),
             'prec': torch.eye(d, device=device).expand(k, d, d).contiguous(),
             'w': torch.full((k,), 1.0 / k, device=device).log()}
    return x, start


def em_step(x, mu, prec, w):
    """One EM iteration from (mu, prec, w), in the dtype of its arguments:
    (means, precisions, log weights)."""
    n, d = x.shape
    k = mu.shape[0]
    # E-step: log softmax(w)_k + 1/2 log det P_k - 1/2 |L_k^T (x - mu_k)|^2,
    # P_k = L_k L_k^T; y[i, k] = (x_i - mu_k)^T L_k, one product for every k.
    chol = torch.linalg.cholesky(prec)
    y = (x @ chol.transpose(0, 1).reshape(d, k * d)).view(n, k, d)
    y -= torch.einsum('kd,kde->ke', mu, chol)
    half_logdet = chol.diagonal(dim1=1, dim2=2).log().sum(1)
    score = torch.log_softmax(w, 0) + half_logdet - 0.5 * y.square_().sum(2)
    del y
    resp = torch.softmax(score, dim=1)
    # M-step: counts, means, covariances about the new means, precisions.
    counts = resp.sum(0)
    means = (resp.T @ x) / counts[:, None]
    centred = x - means[:, None, :]
    covariances = ((centred * resp.T[:, :, None]).transpose(1, 2) @ centred
                   / counts[:, None, None])
    covariances += RIDGE * torch.eye(d, device=x.device, dtype=x.dtype)
    precisions = torch.cholesky_inverse(torch.linalg.cholesky(covariances))
    return means, precisions, counts.log()


def compare(means, precisions, log_weights, reference):
    """Each parameter's distance from the reference; weights as softmax of
    the log weights."""
    def weights(w):
        w = np.exp(np.asarray(w, dtype=np.float64) - np.max(w))
        return w / w.sum()

    return {'means': difference(means, reference[0]),
            'precisions': difference(precisions, reference[1]),
            'weights': difference(weights(log_weights), weights(reference[2]))}


def gmm_iteration(energy_exec, artifact, n, k, d, reps, device):
    x, start = make_problem(n, k, d, device)
    inputs = {'x': x.cpu().numpy()}
    inputs.update({name: value.cpu().numpy() for name, value in start.items()})
    evaluation = ['--eval', 'run', '--steps', '1']
    if device != 'cuda':
        evaluation += ['--device', device]  # after run_ours's --device cuda
    ours, ours_ms, work = run_ours(energy_exec, artifact, inputs, evaluation,
                                  ['mu', 'prec', 'w'], reps)
    theirs, torch_ms = time_torch(lambda: em_step(x, start['mu'], start['prec'], start['w']),
                                  reps)
    theirs = [value.cpu().numpy() for value in theirs]
    reference = [value.cpu().numpy() for value in
                 em_step(x.double(), *(start[name].double() for name in ('mu', 'prec', 'w')))]
    return {'benchmark': '(c) GMM EM iteration, full covariances, f32',
            'n': n, 'k': k, 'd': d, 'ours_ms': ours_ms, 'torch_ms': torch_ms,
            'ours_gpu_work_ms': work,
            'ours_difference': compare(ours['mu'], ours['prec'], ours['w'], reference),
            'torch_difference': compare(*theirs, reference)}


def main():
    arguments = sys.argv[1:]
    device = 'cuda'
    if '--device' in arguments:
        at = arguments.index('--device')
        device = arguments[at + 1]
        del arguments[at:at + 2]
    if len(arguments) not in (3, 4, 6):
        sys.exit(__doc__)
    energy_exec, artifact, n = arguments[0], arguments[1], int(arguments[2])
    reps = int(arguments[3]) if len(arguments) > 3 else 5
    k, d = (int(arguments[4]), int(arguments[5])) if len(arguments) > 4 else (64, 32)
    result = gmm_iteration(energy_exec, artifact, n, k, d, reps, device)
    result.update({'reps': reps, 'torch': torch.__version__,
                   'device': torch.cuda.get_device_name(0) if device == 'cuda' else device,
                   'torch_over_ours': result['torch_ms'] / result['ours_ms']})
    print(json.dumps(result))


if __name__ == '__main__':
    main()
