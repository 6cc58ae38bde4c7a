"""(a) Hopfield retrieval / cross-attention gradient, f32.

Ours: examples/hopfield.energy, `energy-run --eval grad --wrt x` with
x : [N, D] (the state) and m : [K, D] (the stored patterns) bound from one
safetensors file, beta = 1 (the model's constant). The energy is
E = -sum_i lse_mu(beta x_i . m_mu), so dE/dx = -beta softmax(beta X M^T) M.

Anchor: torch `softmax(X @ M.T, dim=1) @ M` on the same arrays (that is
-dE/dx), no autograd (bench/torch_anchors.py); also timed in a process with
glibc malloc at its defaults, for comparison. Both are compared with a float64 NumPy evaluation of
the same formula.
"""
import numpy as np

import torch_anchors
from benchlib import relative_difference, time_torch_anchor_default_malloc, write_safetensors

TOLERANCE = 1e-4  # of the largest entry, for ours and torch against float64


def run(ctx):
    n = ctx.options.hopfield_n
    k = ctx.options.hopfield_k
    d = 64
    reps = ctx.reps
    artifact = ctx.compile('hopfield')
    rng = np.random.default_rng(2026)
    # Entries N(0, 1/sqrt(D)): scores x . m are N(0, 1), a softmax that is
    # neither flat nor one-hot.
    x = (rng.standard_normal((n, d)) * d ** -0.25).astype(np.float32)
    m = (rng.standard_normal((k, d)) * d ** -0.25).astype(np.float32)
    inputs = ctx.path('hopfield_in.safetensors')
    write_safetensors(inputs, {'x': x, 'm': m})
    args = ['--in', inputs, '--eval', 'grad', '--wrt', 'x']

    ctx.log('hopfield: N = K = %d, D = %d: values of ours' % (n, d) if n == k else
            'hopfield: N = %d, K = %d, D = %d: values of ours' % (n, k, d))
    ours_grad = ctx.values_ours(artifact, args, 'hopfield')['grad.x']

    ctx.log('hopfield: timing ours (energy-run --bench %d)' % reps)
    ours = ctx.bench_ours(artifact, args, reps)
    ctx.log('hopfield: ours %.2f ms' % (ours['median_s'] * 1e3))

    anchor = torch_anchors.hopfield(x, m)
    ctx.log('hopfield: timing torch softmax(X @ M.T) @ M (%d repetitions)' % reps)
    torch_time = ctx.time_anchor(anchor, reps)
    ctx.log('hopfield: torch %.2f ms' % (torch_time['median_s'] * 1e3))

    default_malloc = time_torch_anchor_default_malloc(ctx, 'hopfield', inputs, reps)
    if default_malloc:
        ctx.log('hopfield: torch with glibc malloc at its defaults %.2f ms' % (
            default_malloc * 1e3))
    torch_value = anchor().numpy()
    x64, m64 = x.astype(np.float64), m.astype(np.float64)
    scores = x64 @ m64.T
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=1, keepdims=True)
    reference = weights @ m64  # = -dE/dx
    flops = 4.0 * n * k * d
    result = {
        'n': n, 'k': k, 'd': d, 'reps': reps,
        'command': ours['command'],
        'ours_s': ours['median_s'], 'ours_rss': ours['rss_bytes'],
        'anchor_s': torch_time['median_s'],
        'anchor_min_s': torch_time['min_s'], 'anchor_max_s': torch_time['max_s'],
        'ratio': torch_time['median_s'] / ours['median_s'],
        'anchor_default_malloc_s': default_malloc,
        'flops': flops,
        'ours_gflops': flops / ours['median_s'] / 1e9,
        'anchor_gflops': flops / torch_time['median_s'] / 1e9,
        'diff_ours_torch': relative_difference(-ours_grad, torch_value),
        'diff_ours_f64': relative_difference(-ours_grad, reference),
        'diff_torch_f64': relative_difference(torch_value, reference),
        'tolerance': TOLERANCE,
    }
    result['values_agree'] = (result['diff_ours_f64'] <= TOLERANCE and
                              result['diff_torch_f64'] <= TOLERANCE)
    ctx.log('hopfield: anchor / ours = %.2f (target >= 3); max difference ours vs '
            'torch %.1e, ours vs f64 %.1e of the largest entry' % (
                result['ratio'], result['diff_ours_torch'], result['diff_ours_f64']))
    return result
