#!/usr/bin/env python3
"""Paper 003's per-channel argmax task, trained with energy-train.

For sequences of N = 8 value vectors of D = 16 channels (standard normal),
the target is each channel's maximum over the sequence. Two models of the
same size (a key vector wk and a per-channel scale beta, 2 D params) are
trained on the same data with Adam: fem_argmax.energy reads with the free
energy F_j = (1/beta_j) log sum_i p(i) exp(beta_j v_ij), softmax_argmax.energy
with one softmax average shared by the channels. Reported: the validation
mean squared error, and the per-channel index accuracy: how often the
position a model's read weights most (FEM: its posterior over positions for
that channel, p(i) exp(beta_j v_ij); softmax: its one set of weights) is the
channel's true argmax (chance: 1/N). The accuracy is computed here in NumPy
from the trained params, independently of the compiled models.

Usage: argmax_demo.py [--build-dir build] [--out DIR] [--figure FILE.svg]
"""
import argparse
import csv
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'e2e', 'training'))
import safetensors_io  # noqa: E402

N, D = 8, 16


def run(command):
    print('+ ' + ' '.join(command), flush=True)
    subprocess.run(command, check=True)


def data(seed, count):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((count, N, D))
    return v, v.max(axis=1)


def log_prior(v, wk):
    scores = v @ wk
    return scores - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - scores.max(1, keepdims=True)


def evaluate(name, params, v, y):
    wk, beta = params['wk'].astype(np.float64), params['beta'].astype(np.float64)
    logp = log_prior(v, wk)                       # [M, N]
    truth = v.argmax(axis=1)                      # [M, D]
    if name == 'fem':
        tilted = logp[:, :, None] + beta[None, None, :] * v
        top = tilted.max(axis=1)
        read = (top + np.log(np.exp(tilted - top[:, None, :]).sum(axis=1))) / beta
        chosen = tilted.argmax(axis=1)
    else:
        weights = np.exp(logp)
        read = beta * np.einsum('mi,mij->mj', weights, v)
        chosen = np.repeat(logp.argmax(axis=1)[:, None], D, axis=1)
    return {'mse': float(((read - y) ** 2).mean()),
            'accuracy': float((chosen == truth).mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--build-dir', default='build')
    parser.add_argument('--out', default=None)
    parser.add_argument('--figure', default=None)
    parser.add_argument('--epochs', type=int, default=20)
    arguments = parser.parse_args()
    bin_dir = os.path.join(arguments.build_dir, 'bin')
    out = arguments.out or os.path.join(arguments.build_dir, 'demos', 'argmax')
    os.makedirs(out, exist_ok=True)
    train_v, train_y = data(1, 8192)
    val_v, val_y = data(2, 1024)
    train = os.path.join(out, 'train.safetensors')
    val = os.path.join(out, 'val.safetensors')
    safetensors_io.write(train, {'v': train_v, 'y': train_y}, dtype=np.float32)
    safetensors_io.write(val, {'v': val_v, 'y': val_y}, dtype=np.float32)
    results, logs = {}, []
    for name in ('fem', 'softmax'):
        artifact = os.path.join(out, name + '.so')
        run([os.path.join(bin_dir, 'energyc'), os.path.join(HERE, name + '_argmax.energy'),
             '-o', artifact])
        log = os.path.join(out, name + '.csv')
        params = os.path.join(out, name + '-params.safetensors')
        run([os.path.join(bin_dir, 'energy-train'), artifact, '--data', train, '--val', val,
             '--dim', 'N=%d' % N, '--dim', 'D=%d' % D, '--batch', '64',
             '--epochs', str(arguments.epochs), '--optimizer', 'adam', '--lr', '0.05',
             '--seed', '1', '--log', log, '--out', params])
        results[name] = evaluate(name, safetensors_io.read(params), val_v, val_y)
        with open(log) as f:
            rows = [r for r in csv.DictReader(f) if r['validation_loss']]
        results[name]['validation_loss'] = float(rows[-1]['validation_loss'])
        logs.append('%s=%s' % ({'fem': 'free-energy read (FEM)',
                                'softmax': 'softmax average'}[name], log))
    if arguments.figure:
        run([os.path.join(bin_dir, 'energy-curves'), arguments.figure, '--x', 'update',
             '--y', 'loss', '--log-y', '--title',
             'per-channel argmax, N = %d, D = %d: training loss (MSE)' % (N, D)] + logs)
    print('\n| read | validation MSE | per-channel index accuracy (chance %.1f %%) |' % (
        100.0 / N))
    print('|---|---|---|')
    for name, label in (('fem', 'free energy (FEM)'), ('softmax', 'softmax average')):
        r = results[name]
        print('| %s | %.4f | %.1f %% |' % (label, r['mse'], 100 * r['accuracy']))
    if not results['fem']['accuracy'] > 2 * results['softmax']['accuracy']:
        sys.exit('the free-energy read did not learn the task far better than softmax')


if __name__ == '__main__':
    main()
