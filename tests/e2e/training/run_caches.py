#!/usr/bin/env python3
"""Values kept within a call of the runtime never outlive their params.

energy-plan-run-caches keeps what a step computes from params and inputs
alone (`energy.once`) for the rest of one call of the runtime. Training
changes the params between calls, so a value kept across calls would make
the updates wrong. energy-train runs several epochs of Adam on two models
whose kernels keep such values (the attention's products of its two
matrices in the backward step; LISTA's We x in its step), once with an
artifact that keeps them and once with one compiled with --no-run-caches:
the trained params and the losses must be the same bytes.
Usage: run_caches.py ENERGYC ENERGY_TRAIN ATTENTION_SOURCE LISTA_SOURCE WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np

import safetensors_io


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result


def train(energyc, energy_train, source, work, name, data, options):
    """The trained params and loss log of `source`, with and without caches."""
    plan = run([energyc, source, '--dtype', 'f64', '--emit=plan']).stdout
    if 'once @cache' not in plan:
        sys.exit('%s keeps no value; the test would test nothing' % name)
    outputs = []
    for kind, flags in (('kept', []), ('recomputed', ['--no-run-caches'])):
        artifact = os.path.join(work, '%s.%s.so' % (name, kind))
        run([energyc, source, '--dtype', 'f64', '-o', artifact] + flags)
        params = os.path.join(work, '%s.%s.safetensors' % (name, kind))
        log = os.path.join(work, '%s.%s.csv' % (name, kind))
        run([energy_train, artifact, '--data', data, '--epochs', '3', '--optimizer', 'adam',
             '--lr', '0.05', '--seed', '3', '--quiet', '--out', params, '--log', log]
            + options)
        with open(params, 'rb') as trained, open(log) as losses:
            # The log's seventh column is the time an update took.
            rows = [row.split(',') for row in losses.read().splitlines()]
            outputs.append((trained.read(), [r[:6] + r[7:] for r in rows]))
    if outputs[0][0] != outputs[1][0]:
        sys.exit('%s: the params trained with kept values differ from those '
                 'trained without' % name)
    if outputs[0][1] != outputs[1][1]:
        sys.exit('%s: the losses differ:\n%s\nvs\n%s' % (name, outputs[0][1], outputs[1][1]))
    print('%s: %d updates, the same params and losses to the bit' %
          (name, len(outputs[0][1]) - 1))


def main():
    energyc, energy_train, attention, lista, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(11)

    data = os.path.join(work, 'attention.safetensors')
    safetensors_io.write(data, {'h': rng.standard_normal((12, 4, 3)) * 0.7,
                                'y': rng.standard_normal((12, 4, 3)) * 0.7})
    train(energyc, energy_train, attention, work, 'attention', data,
          ['--dim', 'N=4', '--dim', 'D=3', '--batch', '4'])

    b, p, k = 12, 4, 6
    wd = rng.standard_normal((p, k)) / p ** 0.5
    zstar = rng.standard_normal((b, k)) * (rng.random((b, k)) < 0.3)
    data = os.path.join(work, 'lista.safetensors')
    safetensors_io.write(data, {'x': zstar @ wd.T + 0.1 * rng.standard_normal((b, p)),
                                'zstar': zstar})
    fixed = os.path.join(work, 'lista.fixed.safetensors')
    safetensors_io.write(fixed, {'Wd': wd, 'We': wd.T / 3.0,
                                 'S': np.eye(k) - wd.T @ wd / 3.0,
                                 'theta': np.full(k, 0.03)})
    train(energyc, energy_train, lista, work, 'lista', data,
          ['--dim', 'P=%d' % p, '--dim', 'K=%d' % k, '--batch', '4', '--in', fixed])


if __name__ == '__main__':
    main()
