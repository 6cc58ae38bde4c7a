"""(b) Self-attention energy gradient, f32, against torch.autograd.

Ours: examples/self_attention.energy, `energy-run --eval grad --wrt x`, with
x : [N, D], Wq, Wk : [D, D] bound from one safetensors file.

Anchor: torch.autograd.grad of the same energy,
E = -sum_c logsumexp_p((Wq x_c) . (Wk x_p)), q = x Wq^T, k = x Wk^T,
with respect to x, forward pass included, on the same arrays
(bench/torch_anchors.py); also timed in a process with glibc malloc at its
defaults, for comparison. Both are compared with the float64 closed form
(tools/python/attention_numpy.py, paper 004 eq. 16).
"""
import numpy as np

import torch_anchors
from attention_numpy import self_attention_gradient
from benchlib import relative_difference, time_torch_anchor_default_malloc, write_safetensors

TOLERANCE = 1e-4  # of the largest entry, for ours and torch against float64


def inputs_for(n, d, seed=2026):
    """x N(0, 1); Wq, Wk N(0, D^-3/2) entries, so that q, k have entries of
    variance 1/sqrt(D) and the scores q . k are about N(0, 1)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    wq = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    wk = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    return x, wq, wk


def run(ctx):
    n = ctx.options.attention_n
    d = 64
    reps = ctx.reps
    artifact = ctx.compile('self_attention')
    x, wq, wk = inputs_for(n, d)
    inputs = ctx.path('self_attention_in.safetensors')
    write_safetensors(inputs, {'x': x, 'Wq': wq, 'Wk': wk})
    args = ['--in', inputs, '--eval', 'grad', '--wrt', 'x']

    ctx.log('self-attention: N = %d, D = %d: values of ours' % (n, d))
    ours_grad = ctx.values_ours(artifact, args, 'self_attention')['grad.x']

    ctx.log('self-attention: timing ours (energy-run --bench %d)' % reps)
    ours = ctx.bench_ours(artifact, args, reps)
    ctx.log('self-attention: ours %.2f ms' % (ours['median_s'] * 1e3))

    anchor = torch_anchors.self_attention(x, wq, wk)
    ctx.log('self-attention: timing torch.autograd (%d repetitions)' % reps)
    torch_time = ctx.time_anchor(anchor, reps)
    ctx.log('self-attention: torch %.2f ms' % (torch_time['median_s'] * 1e3))

    default_malloc = time_torch_anchor_default_malloc(ctx, 'self_attention', inputs, reps)
    if default_malloc:
        ctx.log('self-attention: torch with glibc malloc at its defaults %.2f ms' % (
            default_malloc * 1e3))
    torch_value = anchor().numpy()
    reference = self_attention_gradient(x.astype(np.float64), wq.astype(np.float64),
                                        wk.astype(np.float64))
    # The scores and both contractions: 2 N^2 D each for q k^T, the child
    # sum and the parent sum, counted as the softmax-contract benchmark does
    # (8 N^2 D with the scores computed twice).
    flops = 8.0 * n * n * d
    result = {
        'n': n, 'd': d, 'reps': reps, 'command': ours['command'],
        'ours_s': ours['median_s'], 'ours_rss': ours['rss_bytes'],
        'anchor_s': torch_time['median_s'],
        'anchor_min_s': torch_time['min_s'], 'anchor_max_s': torch_time['max_s'],
        'ratio': torch_time['median_s'] / ours['median_s'],
        'anchor_default_malloc_s': default_malloc,
        'flops': flops, 'ours_gflops': flops / ours['median_s'] / 1e9,
        'diff_ours_torch': relative_difference(ours_grad, torch_value),
        'diff_ours_f64': relative_difference(ours_grad, reference),
        'diff_torch_f64': relative_difference(torch_value, reference),
        'tolerance': TOLERANCE,
    }
    result['values_agree'] = (result['diff_ours_f64'] <= TOLERANCE and
                              result['diff_torch_f64'] <= TOLERANCE)
    ctx.log('self-attention: anchor / ours = %.2f (target >= 4); max difference ours vs '
            'torch %.1e, ours vs f64 %.1e of the largest entry' % (
                result['ratio'], result['diff_ours_torch'], result['diff_ours_f64']))
    return result
