#!/usr/bin/env python3
"""Random models sharded along each of their dims (energyc --shard), checked
without MPI: each rank's model in its own session on its rows, the ranks'
energies and gradients put together as energy-run --shard does, against the
model's own (float64, 2 and 3 ranks; tests/zoo/check_rank_models.py does
the same for the zoo). A rewrite that does not compile, or a difference
above 1e-8, is printed with the model's file; refusals (an error at the
model) are counted.

Usage: PYTHONPATH=build/python fuzz_shard.py ENERGYC [--seed S] [--count N] [--out DIR]
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'zoo'))
from model_generator import ModelGenerator  # noqa: E402
import check_rank_models as ranks_check  # noqa: E402
import energy  # noqa: E402


def dim_values(model):
    """The generated dims' values, derived ones evaluated."""
    values = {}
    for name, value, derived in model.dims:
        values[name] = value if derived is None else eval(  # noqa: S307 - our text
            derived.replace('/', '//'), {}, dict(values))
    return values


def check_model(energyc, seed, out, counts, ring=False):
    generated = ModelGenerator(seed).generate()
    path = os.path.join(out, 'model%d.energy' % seed)
    with open(path, 'w') as f:
        f.write(generated.source())
    free = {n: v for n, v, derived in generated.dims if derived is None}
    sizes = dim_values(generated)
    try:
        whole = energy.compile(path, dtype='f64', opt_level=0)
    except energy.CompileError:
        counts['not compiled'] += 1
        return
    names = [n for n in whole.tensors if '.' not in n]
    rng = np.random.default_rng(seed)
    arrays = {}
    for name in names:
        shape = [sizes[d.strip()] for d in whole.tensors[name]['shape'].strip('[]').split(',')
                 if d.strip()]
        arrays[name] = rng.standard_normal(shape) * 0.5
    session = whole.session(**free)
    for name in names:
        session[name] = arrays[name]
    expected_energy = session.energy()
    expected = session.grad(wrt=names)
    if not math.isfinite(expected_energy) or not all(
            np.all(np.isfinite(v)) for v in expected.values()):
        counts['not finite'] += 1
        return
    for dim, length in free.items():
        # The rewrite for each rank count: a model that uses its rows'
        # positions as numbers is striped over them.
        for ranks in (2, 3):
            if length < ranks or (ring and length % ranks):
                continue
            extra = ['--ring'] if ring else []
            rewritten = subprocess.run(
                [energyc, path, '--shard', dim, '--shard-ranks', str(ranks), '--emit=source'] +
                extra, capture_output=True, text=True)
            if rewritten.returncode != 0:
                if rewritten.returncode < 0 or "one rank's model" in rewritten.stderr:
                    print('FAILED: %s --shard %s: %s' % (path, dim, rewritten.stderr[:800]))
                    counts['failed'] += 1
                else:
                    counts['refused'] += 1
                break
            rank_model = energy.compile(rewritten.stdout, dtype='f64', opt_level=0)
            if ring:
                block = subprocess.run(
                    [energyc, path, '--shard', dim, '--shard-ranks', str(ranks),
                     '--emit=source', '--ring', '--ring-block'],
                    capture_output=True, text=True, check=True).stdout
                total, grads = ranks_check.put_together_ring(
                    whole, rank_model, rewritten.stdout,
                    energy.compile(block, dtype='f64', opt_level=0), block, names, arrays,
                    free, dim, ranks)
            else:
                total, grads = ranks_check.put_together(
                    whole, rank_model, rewritten.stdout, names, arrays, free, dim, ranks)
            worst = max([ranks_check.relative(total, expected_energy)] + [
                ranks_check.relative(grads[n], expected[n]) for n in names])
            if worst <= 1e-8:
                counts['equal'] += 1
                if '%s__offset + %d * k' % (dim, ranks) in rewritten.stdout:
                    counts['striped'] += 1
            else:
                print('FAILED: %s --shard %s on %d ranks: relative difference %.3g'
                      % (path, dim, ranks, worst))
                counts['failed'] += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('energyc')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--count', type=int, default=100)
    parser.add_argument('--out', default='fuzz-shard-out')
    parser.add_argument('--ring', action='store_true',
                        help='shard on a ring (energyc --ring): lengths that are a multiple '
                             'of the rank count')
    options = parser.parse_args()
    os.makedirs(options.out, exist_ok=True)
    counts = {k: 0 for k in ('equal', 'striped', 'refused', 'failed', 'not compiled',
                             'not finite')}
    for seed in range(options.seed, options.seed + options.count):
        check_model(options.energyc, seed, options.out, counts, options.ring)
        print('model %d: %s' % (seed, ', '.join('%s %d' % kv for kv in counts.items())),
              flush=True)
    return 1 if counts['failed'] else 0


if __name__ == '__main__':
    sys.exit(main())
