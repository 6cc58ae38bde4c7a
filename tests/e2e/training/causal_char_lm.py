#!/usr/bin/env python3
"""The character-level energy Transformer (examples/training/char_transformer)
is causal: its state at position i after the L steps, which the loss reads
to predict character i + 1, depends on the characters at positions <= i
only. Runs the compiled model (f64, random params from one seed) on two
batches of one-hot tokens that differ at position K alone; the states at
positions < K must be the same bits, and at K and after they must differ
(else the check could not fail).
Usage: causal_char_lm.py ENERGYC ENERGY_RUN WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

B, T, V, K = 2, 6, 5, 3


def one_hot(codes):
    return np.eye(V)[codes]


def final_state(energy_run, artifact, work, name, codes):
    given = os.path.join(work, name + '.in.safetensors')
    out = os.path.join(work, name + '.out.safetensors')
    safetensors_io.write(given, {'tokens': one_hot(codes), 'target': one_hot(codes)})
    subprocess.run([energy_run, artifact, '--in', given, '--dim=D=8', '--dim=H=2',
                    '--dim=M=6', '--init', 'random:3', '--eval', 'run', '--out', out],
                   check=True, capture_output=True)
    return safetensors_io.read(out)['x']


def main():
    energyc, energy_run, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..',
                          'examples', 'training', 'char_transformer.energy')
    artifact = os.path.join(work, 'char_transformer.f64.so')
    subprocess.run([energyc, source, '--dtype', 'f64', '-o', artifact], check=True)
    codes = np.random.default_rng(1).integers(0, V, size=(B, T))
    changed = codes.copy()
    changed[:, K] = (codes[:, K] + 1) % V
    before = final_state(energy_run, artifact, work, 'before', codes)
    after = final_state(energy_run, artifact, work, 'after', changed)
    if not np.array_equal(before[:, :K], after[:, :K]):
        sys.exit('positions before %d change with the character at %d: %.3e' % (
            K, K, np.max(np.abs(before[:, :K] - after[:, :K]))))
    if np.array_equal(before[:, K:], after[:, K:]):
        sys.exit('the states at and after position %d do not depend on its character' % K)
    print('states at positions < %d unchanged (same bits); at %d and after they differ '
          'by up to %.3e' % (K, K, np.max(np.abs(before[:, K:] - after[:, K:]))))


if __name__ == '__main__':
    main()
