#!/usr/bin/env python3
"""No loop over two positions does row work per pair, in any model we have.

For every model of examples/ and of the zoo (tests/zoo/models), the kernel
plan with the gradient of every tensor (`energyc --emit=plan-stats --wrt`
every input, param and state: what `energy-run --eval grad --wrt` and a
layer differentiated in its inputs compute) must have no loop over a pair of
position indices (the leading axes of inputs and states, read apart: c and
a of attention, points and slots) whose body does a matrix product, a row
normalisation, a part of a normalisation's backward, or adds a row of one
side times a scalar into slots that index neither side, per pair: work a
good plan does once per row (a GEMM ahead of the pair loop, a table, the
scalars summed over the other side first).

KNOWN lists the models whose plans still do, each with what is missing;
the check fails when another model does, and when a known one no longer
does (then take it off the list).

  check_pair_loops.py ENERGYC
"""
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')

KNOWN = {
    'gmm': 'the quadratic form about each mean, per (point, component): '
           'P_k x_i as a batch of GEMMs over components',
    'capsule_routing': "the gradient of W: the model's own transform per pair "
                       '(u_j|i = W_ij u_i), its outer products per pair',
    'causal_linear_attention': "the gradient of the input h: Wk's transpose "
                               'applied per (batch, key) inside the prefix sums',
    'light_mha_2nd1st': "the gradient of the input keys hk: Wk[k]'s transpose "
                        'applied per pair, not once after the column pass',
    'momen_mha': 'the gradient of the input keys hk, as light_mha_2nd1st',
    'nag_mha': 'the gradient of the input keys hk, as light_mha_2nd1st',
    'rotary_attention': "the keys' projections' gradients (with --wrt Wk1, "
                        "Wk2): a key's row added into Wk[g, k] per pair and "
                        "element k; the rotation's two terms per element read "
                        'two weighted vectors of the query side, and the maps '
                        "vary with the key, where the queries' weighted sums "
                        'per key (a column pass) would add it once per key',
}
TENSOR = re.compile(r'tensor @([A-Za-z0-9_]+) : (?:input|param|state) ')


def tensors_of(energyc, path):
    """The model's inputs, params and states, from its dialect."""
    run = subprocess.run([energyc, path, '--emit=energy'], capture_output=True,
                         text=True, timeout=600)
    return TENSOR.findall(run.stdout)


def main():
    energyc = sys.argv[1]
    models = sorted(glob.glob(os.path.join(ROOT, 'examples', '*.energy')) +
                    glob.glob(os.path.join(HERE, 'models', '*.energy')))
    failures = []
    for path in models:
        name = os.path.splitext(os.path.basename(path))[0]
        wrt = ','.join(tensors_of(energyc, path))
        run = subprocess.run([energyc, path, '--emit=plan-stats', '--wrt=' + wrt],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            failures.append('%s: energyc failed:\n%s' % (name, run.stderr))
            continue
        match = re.search(r'^pair loops doing row work per pair: (\d+)$',
                          run.stdout, re.MULTILINE)
        if not match:
            failures.append('%s: no pair-loop count in the plan stats' % name)
            continue
        count = int(match.group(1))
        findings = run.stdout[match.end():].strip()
        if count and name not in KNOWN:
            failures.append('%s: %d pair loops do row work:\n%s' % (name, count, findings))
        elif not count and name in KNOWN:
            failures.append('%s: no pair loop does row work any more: take it off KNOWN'
                            % name)
        status = 'known' if count and name in KNOWN else ('ok' if not count else 'FAIL')
        print('%-6s %-28s %d' % (status, name, count))
    print('%d models, %d known to do row work per pair' % (len(models), len(KNOWN)))
    if failures:
        print('\n'.join(failures))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
