#!/usr/bin/env python3
"""The character-level language model demo: char_transformer.energy trained
with energy-train against char_lm_torch.py's standard Transformer of about
the same size, on the same sequences of Genesis (char_lm_data.py), with the
same batch size, optimiser, learning rate and number of updates. Writes both
loss logs, draws them together (energy-curves) and prints the final
validation losses, the parameter counts and the time per update.

Usage: char_lm_demo.py [--build-dir build] [--sequences K] [--epochs E]
                       [--figure FILE.svg]
"""
import argparse
import csv
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'e2e', 'training'))
import safetensors_io  # noqa: E402

BATCH, LR, T = 16, 3e-3, 32


def run(command):
    print('+ ' + ' '.join(command), flush=True)
    return subprocess.run(command, check=True, capture_output=True, text=True)


def last_validation(log):
    with open(log) as f:
        rows = [r for r in csv.DictReader(f) if r['validation_loss']]
    return float(rows[-1]['validation_loss'])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--build-dir', default='build')
    parser.add_argument('--sequences', type=int, default=5535,
                        help='training sequences used (default: all 5535)')
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--figure', default=None)
    arguments = parser.parse_args()
    bin_dir = os.path.join(arguments.build_dir, 'bin')
    out = os.path.join(arguments.build_dir, 'demos', 'char_lm')
    os.makedirs(out, exist_ok=True)
    train, val, vocab = (os.path.join(out, name) for name in
                         ('train.safetensors', 'val.safetensors', 'vocab.json'))
    print(run([sys.executable, os.path.join(HERE, 'char_lm_data.py'), train, val, vocab,
               str(T)]).stdout.strip())
    data = safetensors_io.read(train)
    subset = os.path.join(out, 'train-subset.safetensors')
    safetensors_io.write(subset, {k: v[:arguments.sequences] for k, v in data.items()},
                         dtype=np.float32)
    vocabulary = data['tokens'].shape[2]

    artifact = os.path.join(out, 'char_transformer.so')
    run([os.path.join(bin_dir, 'energyc'), os.path.join(HERE, 'char_transformer.energy'),
         '-o', artifact])
    ours_log = os.path.join(out, 'energy.csv')
    begin = time.perf_counter()
    result = run([os.path.join(bin_dir, 'energy-train'), artifact, '--data', subset,
                  '--val', val, '--dim', 'T=%d' % T, '--dim', 'V=%d' % vocabulary,
                  '--batch', str(BATCH), '--epochs', str(arguments.epochs),
                  '--optimizer', 'adam', '--lr', str(LR), '--seed', '1',
                  '--log', ours_log, '--out', os.path.join(out, 'params.safetensors')])
    ours_seconds = time.perf_counter() - begin
    updates = arguments.epochs * (arguments.sequences // BATCH)
    print(result.stdout.strip())

    torch_log = os.path.join(out, 'torch.csv')
    result = run([sys.executable, os.path.join(HERE, 'char_lm_torch.py'), subset, val,
                  torch_log, '--batch', str(BATCH), '--epochs', str(arguments.epochs),
                  '--lr', str(LR)])
    print(result.stdout.strip())
    if arguments.figure:
        # The axis ends at 4.5 nats (a uniform guess is 4.08): PyTorch's first
        # losses (~60 nats) would flatten the rest.
        run([os.path.join(bin_dir, 'energy-curves'), arguments.figure, '--x', 'update',
             '--y', 'loss', '--y-max', '4.5', '--title',
             'character-level LM on Genesis: training loss (cross-entropy, nats)',
             'energy Transformer=' + ours_log,
             'PyTorch Transformer=' + torch_log])
    params = sum(v.size for k, v in safetensors_io.read(
        os.path.join(out, 'params.safetensors')).items())
    print('\n| model | params | final validation loss | time per update |')
    print('|---|---|---|---|')
    print('| energy Transformer (ours, energy-train) | %d | %.3f | %.2f s (whole run / updates) |'
          % (params, last_validation(ours_log), ours_seconds / updates))
    print('| PyTorch Transformer | see its line above | %.3f | see its line above |'
          % last_validation(torch_log))


if __name__ == '__main__':
    main()
