#!/usr/bin/env python3
"""Sequence sharding over MPI equals the single process.

`energy-run MODEL --shard DIM` under mpirun with 2 and 3 processes (each
evaluates its contiguous rows of DIM; the rows other ranks hold are
gathered; energies and gradients are summed in rank order) against
energy-run alone, in float64, for the energy, the gradient of every tensor,
the states after 3 steps of the dynamics (not for the mixture, whose EM
steps are closed forms) and the gradient of the loss through the run (the
losses and the adjoint of every tensor):
self-attention, causal attention with ALiBi biases (the mask and the bias
read the global position), a multi-head Energy Transformer with layer norm
and Hopfield memories, multi-head slot attention (sharded over the inputs:
the slots, a state every rank holds whole), slots with a learned start
under momentum beside codes read at every position (learned_slots.energy),
and a Gaussian mixture (sharded over the data points). The results may
differ only by the order of additions (rows summed rank by rank instead of
in one kernel): a few roundings of 1e-16 relative; a row counted twice or
lost, or a wrong offset in the causal mask, shows at 1e-2. The same with
--ring (the other ranks' rows streamed around a ring in blocks, each lse
merged over them) for self-attention (energies, gradients and runs) and
the position bias (gradients), and a loss's gradient through the run (its
steps' gradients first) for the Energy Transformer, ALiBi attention and
the learned slots (the backward steps' second derivatives
of the merged lse streamed too). Also: a rank given a tensor of the wrong
length ends the whole job with an error naming the rank, within seconds;
--ring refuses a model without an lse to stream, naming why.
Usage: sequence_sharding.py ENERGY_RUN WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'e2e', 'training'))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'zoo'))
import safetensors_io  # noqa: E402
import zoo  # noqa: E402

MPIRUN = [shutil.which('mpirun') or 'mpirun', '--allow-run-as-root', '--oversubscribe',
          '--mca', 'btl', 'self,vader', '--mca', 'btl_vader_single_copy_mechanism', 'none']
TOLERANCE = 1e-12


def zoo_case(name, dim, checks, **sizes):
    model = zoo.load(name)
    dims = dict(model.TEST_DIMS, **sizes)
    arrays = model.make_inputs(dims, np.random.default_rng(3))
    for state, source in getattr(model, 'COPIES', {}).items():
        arrays[state] = arrays[source]
    return name, model.SOURCE, dim, dims, arrays, checks


def cases():
    """(name, source, dim, dims, tensors, {evaluation: rank counts}): every
    evaluation for self-attention, a part of them for the others (each process compiles the model: the test's time); `ring-`
    evaluations with --ring (whose length must be a multiple of the ranks)."""
    rng = np.random.default_rng(11)
    yield ('self_attention', os.path.join(ROOT, 'examples', 'self_attention.energy'), 'N',
           {'N': 12, 'D': 8},
           {'x': rng.standard_normal((12, 8)), 'Wq': rng.standard_normal((8, 8)) * 0.4,
            'Wk': rng.standard_normal((8, 8)) * 0.4},
           {'energy': (3,), 'grad': (3,), 'run': (3,),
            'ring-energy': (2,), 'ring-grad': (3,), 'ring-run': (2,)})
    # A loss's gradient runs the dynamics (each step's gradient) first.
    yield zoo_case('alibi_attention', 'N', {'grad': (3,), 'run': (2,), 'loss-grad': (2,),
                                            'ring-loss-grad': (3,)}, N=6)
    yield zoo_case('energy_transformer', 'N', {'loss-grad': (3,), 'ring-loss-grad': (2,)})
    yield zoo_case('multihead_slot_attention', 'N', {'loss-grad': (2,)})
    yield ('learned_slots', os.path.join(HERE, 'learned_slots.energy'), 'N',
           {'N': 7, 'S': 3, 'D': 4},
           {'x': rng.standard_normal((7, 4)), 'target': rng.standard_normal((7, 4)),
            'W': rng.standard_normal((4, 4)) * 0.3, 'slots0': rng.standard_normal((3, 4))},
           {'loss-grad': (2,)})
    # On a ring, of a length the ranks divide.
    yield ('learned_slots_ring', os.path.join(HERE, 'learned_slots.energy'), 'N',
           {'N': 6, 'S': 3, 'D': 4},
           {'x': rng.standard_normal((6, 4)), 'target': rng.standard_normal((6, 4)),
            'W': rng.standard_normal((4, 4)) * 0.3, 'slots0': rng.standard_normal((3, 4))},
           {'ring-loss-grad': (2, 3)})
    # A causal attention with a learned bias between positions ([N, N]: the
    # rank holds its rows of the first axis, the second whole).
    yield ('position_bias', os.path.join(ROOT, 'tests', 'lit', 'energyc', 'Inputs',
                                         'shard-bias.energy'), 'N', {'N': 7, 'D': 3},
           {'x': rng.standard_normal((7, 3)), 'W': rng.standard_normal((3, 3)),
            'Bias': rng.standard_normal((7, 7))},
           {'grad': (3,), 'run': (2,)})
    yield ('position_bias_ring', os.path.join(ROOT, 'tests', 'lit', 'energyc', 'Inputs',
                                              'shard-bias.energy'), 'N', {'N': 6, 'D': 3},
           {'x': rng.standard_normal((6, 3)), 'W': rng.standard_normal((3, 3)),
            'Bias': rng.standard_normal((6, 6))},
           {'ring-grad': (2,)})
    # EM stops by a rule and solves in closed form: no sharded run.
    yield ('gmm', os.path.join(ROOT, 'examples', 'gmm.energy'), 'N', {'N': 31, 'K': 3, 'D': 2},
           {'x': rng.standard_normal((31, 2)), 'mu': rng.standard_normal((3, 2)),
            'prec': np.stack([np.eye(2) * (1 + k) for k in range(3)]),
            'w': rng.standard_normal(3) * 0.3},
           {'energy': (3,), 'grad': (2,)})


def energy_run_result(energy_run, source, inputs, dims, ranks, shard, arguments):
    """energy-run SOURCE with `arguments` (alone, or under mpirun on `ranks`
    processes with --shard `shard`, a dim or [dim, '--ring']); exits on
    failure. Compiled quickly (--opt-level 0): every process compiles the
    model."""
    command = [energy_run, source, '--in', inputs, '--dtype', 'f64', '--opt-level', '0']
    command += list(arguments)
    for key, value in dims.items():
        command += ['--dim', '%s=%d' % (key, value)]
    if shard:
        command += ['--shard'] + ([shard] if isinstance(shard, str) else list(shard))
    if ranks > 1:
        command = MPIRUN + ['-np', str(ranks)] + command
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.exit('failed (%d): %s\n%s' % (result.returncode, ' '.join(command), result.stderr))
    return result


def run_states(energy_run, source, inputs, dims, ranks, shard, out):
    """The states after 3 steps of the dynamics."""
    energy_run_result(energy_run, source, inputs, dims, ranks, shard,
                      ['--eval', 'run', '--steps', '3', '--out', out])
    return safetensors_io.read(out)


def evaluate(energy_run, source, inputs, dims, what, ranks, shard, wrt):
    """The energy or the gradients of `wrt`, as energy-run's JSON."""
    result = energy_run_result(energy_run, source, inputs, dims, ranks, shard,
                               ['--eval', what, '--json', '--wrt', ','.join(wrt)])
    return json.loads(result.stdout)


def loss_gradients(energy_run, source, inputs, dims, ranks, shard, every_step):
    """The losses and adjoints of a loss's gradient through the run, as
    energy-run's JSON (checkpointed, or with every step's state kept)."""
    arguments = ['--eval', 'loss-grad', '--json']
    if every_step:
        arguments.append('--store-all-steps')
    result = energy_run_result(energy_run, source, inputs, dims, ranks, shard, arguments)
    return json.loads(result.stdout)


def relative(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300)


def main():
    energy_run, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    worst = 0.0
    for name, source, dim, dims, arrays, checks in cases():
        inputs = os.path.join(work, name + '.safetensors')
        safetensors_io.write(inputs, arrays)
        # The gradients of every tensor: sharded ones (put together from the
        # ranks' rows) and the others (summed over the ranks).
        wrt = sorted(arrays)
        # What one process computes, once for both ways of sharding.
        unsharded_results = {}

        def alone(what, evaluation):
            if what not in unsharded_results:
                unsharded_results[what] = evaluation()
            return unsharded_results[what]
        for mode, shard in (('', dim), ('ring-', [dim, '--ring'])):
            flag = '--shard %s%s' % (dim, ' --ring' if mode else '')
            for ranks in checks.get(mode + 'energy', ()):
                energy = alone('energy', lambda: evaluate(energy_run, source, inputs, dims,
                                                          'energy', 1, None, wrt))
                sharded = evaluate(energy_run, source, inputs, dims, 'energy', ranks, shard, wrt)
                error = relative(sharded['energy'], energy['energy'])
                print('%-20s %s on %d ranks: the energy, relative difference %.1e'
                      % (name, flag, ranks, error), flush=True)
                worst = max(worst, error)
            if checks.get(mode + 'grad'):
                grads = alone('grad', lambda: evaluate(energy_run, source, inputs, dims, 'grad',
                                                       1, None, wrt))
            for ranks in checks.get(mode + 'grad', ()):
                sharded_grads = evaluate(energy_run, source, inputs, dims, 'grad', ranks, shard,
                                         wrt)
                if sorted(sharded_grads) != sorted(grads):
                    sys.exit('%s on %d ranks: gradients %s, alone %s'
                             % (name, ranks, sorted(sharded_grads), sorted(grads)))
                error = max(relative(sharded_grads[key]['data'], grads[key]['data'])
                            for key in grads)
                print('%-20s %s on %d ranks: %d gradients, largest relative difference '
                      '%.1e' % (name, flag, ranks, len(grads), error), flush=True)
                worst = max(worst, error)
            if checks.get(mode + 'run'):
                unsharded = alone('run', lambda: run_states(
                    energy_run, source, inputs, dims, 1, None,
                    os.path.join(work, name + '.run.safetensors')))
            for ranks in checks.get(mode + 'run', ()):
                states = run_states(energy_run, source, inputs, dims, ranks, shard,
                                    os.path.join(work, '%s.run%d.safetensors' % (name, ranks)))
                # The model's states (one process also writes its backward
                # program's buffers).
                if not set(states) <= set(unsharded) or len(states) < 2:
                    sys.exit('%s run on %d ranks wrote %s, alone %s'
                             % (name, ranks, sorted(states), sorted(unsharded)))
                error = max(relative(states[key], unsharded[key]) for key in states)
                print('%-20s %s on %d ranks: 3 steps of the dynamics, largest relative '
                      'difference of the states %.1e' % (name, flag, ranks, error), flush=True)
                worst = max(worst, error)
            if checks.get(mode + 'loss-grad'):
                expected = alone('loss-grad', lambda: loss_gradients(
                    energy_run, source, inputs, dims, 1, None, False))
            for ranks in checks.get(mode + 'loss-grad', ()):
                # Checkpointed on 2 ranks (the states restored between
                # backward steps), every step kept on 3.
                sharded = loss_gradients(energy_run, source, inputs, dims, ranks, shard,
                                         ranks == 3)
                if sorted(sharded) != sorted(expected):
                    sys.exit('%s loss-grad on %d ranks: %s, alone %s'
                             % (name, ranks, sorted(sharded), sorted(expected)))
                adjoints = [key for key in expected if key.startswith('adjoint.')]
                error = max([relative(sharded[key]['data'], expected[key]['data'])
                             for key in adjoints] +
                            [relative(sharded['losses'][key], value)
                             for key, value in expected['losses'].items()])
                print('%-20s %s on %d ranks: the loss and %d adjoints through %d steps, '
                      'largest relative difference %.1e'
                      % (name, flag, ranks, len(adjoints), sharded['steps'], error), flush=True)
                worst = max(worst, error)
    if not worst <= TOLERANCE:
        sys.exit('sharded results differ from one process by %.2e > %.0e' % (worst, TOLERANCE))

    # A rank with bad input ends the job, naming itself.
    name, source, dim, dims, arrays, _ = next(cases())
    bad = os.path.join(work, 'bad.safetensors')
    safetensors_io.write(bad, dict(arrays, Wq=np.zeros((3, 3))))
    command = MPIRUN + ['-np', '2', energy_run, source, '--in', bad, '--dim', 'D=8', '--dtype',
                        'f64', '--eval', 'grad', '--shard', 'N']
    begin = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - begin
    if result.returncode == 0 or 'rank ' not in result.stderr or 'Wq' not in result.stderr:
        sys.exit('a bad tensor did not end the job with an error naming the rank and the '
                 'tensor (exit %d):\n%s' % (result.returncode, result.stderr))
    print('bad input on every rank: the job ended in %.1f s: %s' % (
        seconds, [line for line in result.stderr.splitlines() if line.startswith('energy-run: rank ')][0]))
    # --ring refuses what it cannot stream, before any evaluation.
    gmm = [case for case in cases() if case[0] == 'gmm'][0]
    refusals = [(gmm, ['--eval', 'energy'], 'has no lse over')]
    for (name, source, dim, dims, arrays, _), arguments, expected in refusals:
        inputs = os.path.join(work, name + '.safetensors')
        command = [energy_run, source, '--in', inputs, '--dtype', 'f64', '--shard', dim,
                   '--ring'] + arguments
        for key, value in dims.items():
            command += ['--dim', '%s=%d' % (key, value)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode == 0 or expected not in result.stderr:
            sys.exit('--ring on %s (%s) was not refused with %r:\n%s'
                     % (name, ' '.join(arguments), expected, result.stderr))
        print('%-20s --ring %s: refused: %s' % (name, ' '.join(arguments),
                                                result.stderr.strip().splitlines()[0]))
    print('all sharded evaluations equal one process within %.0e (largest %.1e)'
          % (TOLERANCE, worst))


if __name__ == '__main__':
    main()
