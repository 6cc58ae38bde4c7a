#!/usr/bin/env python3
"""A resumed training equals an uninterrupted one, to the bit.

energy-train runs 4 epochs of attention_train.energy (Adam, a cosine
schedule, shuffled minibatches, checkpoints after every epoch); a second run
resumes from the checkpoint written after epoch 2 and runs to epoch 4. Its
trained params and its loss log for epochs 3-4 must be the same bytes as the
first run's. Also: a checkpoint of other options is refused with a message.
Usage: resume.py ENERGY_TRAIN ARTIFACT WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np

import safetensors_io


def run(command, expect_failure=False):
    result = subprocess.run(command, capture_output=True, text=True)
    if (result.returncode != 0) != expect_failure:
        sys.exit('%s: %s\n%s%s' % ('succeeded' if expect_failure else 'FAILED',
                                   ' '.join(command), result.stdout, result.stderr))
    return result


def main():
    energy_train, artifact, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    data = os.path.join(work, 'data.safetensors')
    safetensors_io.write(data, {'h': rng.standard_normal((12, 4, 3)) * 0.7,
                                'y': rng.standard_normal((12, 4, 3)) * 0.7},
                         dtype=np.float32)
    common = [energy_train, artifact, '--data', data, '--dim', 'N=4', '--dim', 'D=3',
              '--batch', '4', '--epochs', '4', '--optimizer', 'adam', '--lr', '0.05',
              '--schedule', 'cosine', '--seed', '9', '--quiet']
    straight = os.path.join(work, 'straight.safetensors')
    run(common + ['--checkpoint', os.path.join(work, 'ck-{epoch}.safetensors'),
                  '--out', straight, '--log', os.path.join(work, 'straight.csv')])
    resumed = os.path.join(work, 'resumed.safetensors')
    run(common + ['--resume', os.path.join(work, 'ck-2.safetensors'), '--out', resumed,
                  '--log', os.path.join(work, 'resumed.csv')])
    with open(straight, 'rb') as a, open(resumed, 'rb') as b:
        if a.read() != b.read():
            sys.exit('the resumed run\'s params differ from the uninterrupted run\'s')
    with open(os.path.join(work, 'straight.csv')) as a, open(os.path.join(work, 'resumed.csv')) as b:
        straight_rows, resumed_rows = a.read().splitlines(), b.read().splitlines()
    # The resumed log has the header and epochs 3-4 (3 updates each).
    tail = [straight_rows[0]] + straight_rows[1 + 6:]
    strip = lambda rows: [','.join(r.split(',')[:6] + r.split(',')[7:]) for r in rows]
    if strip(tail) != strip(resumed_rows):
        sys.exit('the resumed run\'s losses differ:\n%s\nvs\n%s' % (tail, resumed_rows))
    print('resumed from epoch 2: the same params and losses, to the bit')

    refused = run(common[:-1] + ['--seed', '10', '--quiet', '--resume',
                                 os.path.join(work, 'ck-2.safetensors')], expect_failure=True)
    if 'was written with seed 9, this run has 10' not in refused.stderr:
        sys.exit('unexpected message for a mismatched checkpoint: ' + refused.stderr)
    print('a checkpoint of other options is refused: ' + refused.stderr.strip())


if __name__ == '__main__':
    main()
