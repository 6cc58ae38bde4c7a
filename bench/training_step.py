"""One training step against PyTorch, on every core.

The model: bench/models/attention_train.energy, a batch of B self-attention
energies (paper 004 §6) descended by L momentum steps from the inputs, then
a squared-error loss (tests/e2e/training/attention_train.energy at bench
sizes). One training step is the forward run, the losses and the gradient
of the loss with respect to Wq and Wk through the L steps:
  - ours: `energy-run ARTIFACT --eval loss-grad --store-all-steps --bench
    REPS` (the compiled forward steps and backward program, every step's
    state kept as torch keeps every step's graph; also timed with the
    default checkpoints), f32;
  - anchor: the same model in PyTorch (float32): the energy's gradient by
    torch.autograd.grad(create_graph=True) at each step, the loss, and
    loss.backward(), as one would write it by hand.
The parameter update itself (a few element-wise operations on D x D
matrices) is left out of both. The two gradients are compared with each
other (relative to their scale).
"""
import math
import os
import statistics

import numpy as np
import torch

from benchlib import relative_difference, write_safetensors

LR_DYN, BETA_DYN = 0.5, 0.8
# Alternated rounds of timing (ours, then torch).
ROUNDS = 7
# Both in float32 through 4 dependent steps and their reverse: a few
# thousand roundings of 6e-8 each, relative to the gradients' scale.
TOLERANCE = 1e-3


def torch_step(h, y, wq0, wk0, steps, device='cpu'):
    """A function that computes Wq's and Wk's gradients of the loss after
    `steps` momentum steps, on `device` (bench/gpu_training.py: 'cuda')."""
    ht, yt = (torch.from_numpy(a).to(device) for a in (h, y))
    d = h.shape[2]

    def step():
        wq = torch.from_numpy(wq0).to(device).requires_grad_(True)
        wk = torch.from_numpy(wk0).to(device).requires_grad_(True)
        x = ht.clone().requires_grad_(True)
        velocity = torch.zeros_like(x)
        for _ in range(steps):
            q = x @ wq.T
            k = x @ wk.T
            energy = -torch.logsumexp(q @ k.transpose(1, 2) / math.sqrt(d), dim=2).sum()
            (gradient,) = torch.autograd.grad(energy, x, create_graph=True)
            velocity = BETA_DYN * velocity + gradient
            x = x - LR_DYN * velocity
        loss = 0.5 * ((x - yt) ** 2).sum(dim=(1, 2)).mean()
        loss.backward()
        return wq.grad, wk.grad

    return step


def run(ctx):
    # Sizes at which one step of ours takes seconds (see docs/benchmarks.md:
    # the backward pass's parameter gradients are outer products per pair).
    b, n, d, steps = 4, 64, 64, 4
    reps = ctx.reps
    artifact = ctx.compile('attention_train', source=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'models', 'attention_train.energy'))
    rng = np.random.default_rng(2026)
    h = (rng.standard_normal((b, n, d)) * 0.5).astype(np.float32)
    y = (rng.standard_normal((b, n, d)) * 0.5).astype(np.float32)
    wq = (rng.standard_normal((d, d)) * d ** -0.5).astype(np.float32)
    wk = (rng.standard_normal((d, d)) * d ** -0.5).astype(np.float32)
    inputs = ctx.path('training_in.safetensors')
    write_safetensors(inputs, {'h': h, 'y': y, 'Wq': wq, 'Wk': wk})
    args = ['--in', inputs, '--eval', 'loss-grad', '--steps', str(steps)]

    ctx.log('training step: B = %d, N = %d, D = %d, %d steps: values of ours' % (
        b, n, d, steps))
    values = ctx.values_ours(artifact, args, 'training')
    # Ours and torch alternate, so that both see the same state of the
    # machine (on a shared 2-core machine a run's speed drifts by tens of
    # per cent over seconds): each round times ours (its median over
    # `reps`) keeping every step's state for the backward pass, as torch's
    # autograd keeps every step's graph (--store-all-steps), then ours with
    # its default checkpoints every √steps steps (recomputing the others),
    # then torch (its median over `reps` calls); the figures are the
    # medians of the rounds' medians.
    anchor = torch_step(h, y, wq, wk, steps)
    rounds = []
    for round_number in range(ROUNDS):
        ours = ctx.bench_ours(artifact, args + ['--store-all-steps'], reps)
        checkpointed = ctx.bench_ours(artifact, args, reps)
        torch_round = ctx.time_anchor(anchor, reps)
        rounds.append({'ours_s': ours['median_s'],
                       'ours_checkpointed_s': checkpointed['median_s'],
                       'anchor_s': torch_round['median_s']})
        ctx.log('training step: round %d of %d: ours %.2f ms (checkpointed '
                '%.2f ms), torch %.2f ms' % (
                    round_number + 1, ROUNDS, ours['median_s'] * 1e3,
                    checkpointed['median_s'] * 1e3,
                    torch_round['median_s'] * 1e3))
    ours_s = statistics.median(r['ours_s'] for r in rounds)
    checkpointed_s = statistics.median(r['ours_checkpointed_s'] for r in rounds)
    anchor_s = statistics.median(r['anchor_s'] for r in rounds)
    torch_wq, torch_wk = (g.numpy() for g in anchor())
    result = {
        'b': b, 'n': n, 'd': d, 'steps': steps, 'reps': reps,
        'command': ours['command'], 'rounds': rounds,
        'ours_s': ours_s, 'ours_rss': ours['rss_bytes'],
        'anchor_s': anchor_s,
        'ratio': anchor_s / ours_s,
        'ours_checkpointed_s': checkpointed_s,
        'ratio_checkpointed': anchor_s / checkpointed_s,
        'diff_wq': relative_difference(values['adjoint.Wq'], torch_wq),
        'diff_wk': relative_difference(values['adjoint.Wk'], torch_wk),
        'tolerance': TOLERANCE,
    }
    result['values_agree'] = max(result['diff_wq'], result['diff_wk']) <= TOLERANCE
    ctx.log('training step: anchor / ours = %.2f (target >= 2; checkpointed %.2f); '
            'gradients differ by %.1e and %.1e of their scale' % (
                result['ratio'], result['ratio_checkpointed'], result['diff_wq'],
                result['diff_wk']))
    return result
