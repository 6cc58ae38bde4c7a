"""The zoo (tests/zoo): each model of the literature against its own
PyTorch implementation, at its BENCH_DIMS, on the same inputs.

For every model, in float32:
  - inference: the dynamics (STEPS steps), ours `energy-run ARTIFACT --eval
    run --bench REPS` (the steps alone: no energy is evaluated after the
    run when it is timed) against the PyTorch version's run (the energy's
    gradient by torch.autograd.grad at each step);
  - training: one training step, the run and the gradient of the losses
    with respect to the trained tensors through it: ours `--eval loss-grad
    --store-all-steps` (every step's state kept, as PyTorch keeps every
    step's graph) against the run with create_graph=True and
    loss.backward();
each on 1 thread and on every core (the ratio is PyTorch's time over ours:
above 1, ours is faster). The two are timed in turn, ROUNDS times (PyTorch's
REPS calls, then ours), and the ratio is the median of the rounds' ratios:
this machine's speed drifts by up to 2x over seconds, and a ratio of two
timings taken side by side follows the drift less than one of timings taken
a minute apart. Judged at 1 thread: on this machine's two vCPUs
torch's OpenMP with two threads is erratic on small ops. The final states
of the two runs are compared (relative to their scale) so that a ratio is
never that of two different computations.
"""
import math
import os
import statistics
import sys

import numpy as np

from benchlib import ROOT, relative_difference, write_safetensors
from blas_env import set_anchor_threads

sys.path.insert(0, os.path.join(ROOT, 'tests', 'zoo'))
import zoo  # noqa: E402

# f32 through up to 20 dependent steps: roundings of 6e-8 amplified by the
# steps; a mismatch of the computations shows as an O(1) difference.
TOLERANCE = 2e-2


def paired_timing(ctx, function, artifact, args, reps, rounds, threads):
    """PyTorch's `function` and our `energy-run ARTIFACT ARGS` timed in turn,
    `rounds` times, each a median of `reps` calls after a warm-up: the
    medians over the rounds of each side's times and of the rounds' ratios
    (PyTorch's time over ours)."""
    ours, theirs = [], []
    for _ in range(rounds):
        theirs.append(ctx.time_anchor(function, reps)['median_s'])
        ours.append(ctx.bench_ours(artifact, args, reps, threads=threads)['median_s'])
    ratios = [t / o for t, o in zip(theirs, ours)]
    return {'ours_s': statistics.median(ours), 'torch_s': statistics.median(theirs),
            'ratio': statistics.median(ratios), 'round_ratios': ratios}


def run(ctx):
    names = zoo.model_names()
    wanted = getattr(ctx.options, 'zoo_models', None)
    if wanted:
        names = [n for n in names if n in wanted.split(',')]
    reps = getattr(ctx.options, 'zoo_reps', 3)
    rounds = getattr(ctx.options, 'zoo_rounds', 5)
    thread_counts = sorted({1, ctx.threads})
    models = []
    for name in names:
        model = zoo.load(name)
        dims = model.BENCH_DIMS
        arrays = {k: np.asarray(v, dtype=np.float32)
                  for k, v in model.make_inputs(dims, np.random.default_rng(7)).items()}
        inputs = ctx.path('zoo_%s.safetensors' % name)
        write_safetensors(inputs, arrays)
        # The bench sizes as the dims' defaults: the sizes at which the
        # planner weighs its choices (the artifact runs at any sizes).
        artifact = ctx.compile(name, source=model.SOURCE, name='zoo_' + name,
                               extra=['--dim=%s=%d' % kv for kv in dims.items()])
        dim_args = []
        for key, value in dims.items():
            dim_args += ['--dim', '%s=%d' % (key, value)]
        common = ['--in', inputs] + dim_args
        ctx.log('zoo %s: %s' % (name, ', '.join('%s=%d' % kv for kv in dims.items())))

        # The same computation on both sides: the states after the run.
        inference, training = zoo.torch_steps(model, arrays)
        set_anchor_threads(1)
        theirs = inference()
        ours = ctx.values_ours(artifact, common + ['--eval', 'run'], 'zoo_' + name)
        difference = max(relative_difference(ours[n], v.detach().numpy())
                         for n, v in theirs.items())
        entry = {'name': name, 'citation': model.CITATION, 'dims': dims,
                 'steps': model.STEPS, 'difference': difference,
                 'agrees': difference <= TOLERANCE, 'timings': {}}
        has_loss = hasattr(model, 'loss')
        for threads in thread_counts:
            set_anchor_threads(threads)
            row = {}
            for mode, function, args in (
                    ('inference', inference, ['--eval', 'run']),
                    ('training', training, ['--eval', 'loss-grad', '--store-all-steps'])):
                if mode == 'training' and not has_loss:
                    continue
                row[mode] = paired_timing(ctx, function, artifact, common + args, reps,
                                          rounds, threads)
                ctx.log('  %-9s %d thread%s: ours %8.1f ms, PyTorch %8.1f ms, ratio %.2f '
                        '(rounds: %s)' % (
                            mode, threads, '' if threads == 1 else 's',
                            1e3 * row[mode]['ours_s'], 1e3 * row[mode]['torch_s'],
                            row[mode]['ratio'],
                            ' '.join('%.2f' % r for r in row[mode]['round_ratios'])))
            entry['timings'][str(threads)] = row
        models.append(entry)
    set_anchor_threads(ctx.threads)

    def geomean(mode, threads):
        ratios = [m['timings'][str(threads)][mode]['ratio'] for m in models
                  if mode in m['timings'].get(str(threads), {})]
        return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None

    summary = {}
    for threads in thread_counts:
        for mode in ('inference', 'training'):
            summary['%s_%d' % (mode, threads)] = geomean(mode, threads)
    for key, value in summary.items():
        if value is not None:
            ctx.log('zoo geometric mean %s: %.3f' % (key, value))
    return {'models': models, 'geomean': summary, 'threads': thread_counts, 'reps': reps,
            'rounds': rounds}
