#!/usr/bin/env python3
"""The zoo's models respelled: every order of the indices of each sum or
mean over two to four indices, compiled at the model's BENCH_DIMS with
`energyc --emit=plan-stats` and compared with the model as written (the
total flops of its programs and its count of loops over pairs that do row
work per pair). A respelling is the same model; a plan that costs more for
it is a planning step that depends on how the model was written. Prints
each respelling whose plan differs, with the ratio of flops, and exits 1
when one costs more than --tolerance times the written plan or adds loops
over pairs.

Usage: respell_zoo.py ENERGYC [MODEL ...] [--tolerance T]
"""
import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'zoo'))
import zoo  # noqa: E402

SUM = re.compile(r'\b(sum|mean)\(((?:\w+: [^,():]+, ){1,3}\w+: [^,():]+)\)')
TOTAL = re.compile(r'^(?:the |term |loss |let ).*= (\d+) flops$')
PAIRS = re.compile(r'pair loops doing row work per pair: (\d+)')


def plan_cost(energyc, source, dims, workdir):
    """(total flops, loops over pairs with row work) of `source`'s plan."""
    path = os.path.join(workdir, 'respelled.energy')
    with open(path, 'w') as f:
        f.write(source)
    run = subprocess.run([energyc, path, '--emit=plan-stats',
                          *['--dim=%s=%d' % kv for kv in dims.items()]],
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    total = sum(int(m.group(1)) for line in run.stdout.splitlines()
                if (m := TOTAL.match(line)))
    pairs = PAIRS.search(run.stdout)
    return total, int(pairs.group(1)) if pairs else 0


def respellings(source):
    """(description, source) for each other order of each sum's indices."""
    for match in SUM.finditer(source):
        parts = [part.strip() for part in match.group(2).split(',')]
        for order in itertools.permutations(parts):
            if list(order) == parts:
                continue
            text = ', '.join(order)
            yield ('%s(%s) as %s(%s)' % (match.group(1), match.group(2),
                                         match.group(1), text),
                   source[:match.start(2)] + text + source[match.end(2):])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('energyc')
    parser.add_argument('models', nargs='*', help='zoo models (default: all)')
    parser.add_argument('--tolerance', type=float, default=1.05,
                        help='the most a respelling may cost, as a multiple '
                             'of the written plan (default 1.05)')
    args = parser.parse_args()
    names = args.models or sorted(
        name[:-len('.energy')] for name in os.listdir(zoo.MODELS)
        if name.endswith('.energy'))
    worse = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name in names:
            model = zoo.load(name)
            with open(model.SOURCE) as f:
                source = f.read()
            written = plan_cost(args.energyc, source, model.BENCH_DIMS,
                                workdir)
            for description, respelled in respellings(source):
                try:
                    cost = plan_cost(args.energyc, respelled,
                                     model.BENCH_DIMS, workdir)
                except RuntimeError as error:
                    print('%s: %s: %s' % (name, description, error))
                    worse += 1
                    continue
                if cost == written:
                    continue
                ratio = cost[0] / written[0]
                bad = ratio > args.tolerance or cost[1] > written[1]
                worse += bad
                print('%s: %s: %.3g flops, %d pair loops (written %.3g, %d): '
                      '%.2fx%s' % (name, description, cost[0], cost[1],
                                   written[0], written[1], ratio,
                                   '  WORSE' if bad else ''), flush=True)
    print('%d respellings worse than the written models' % worse)
    return 1 if worse else 0


if __name__ == '__main__':
    sys.exit(main())
