#!/usr/bin/env python3
"""Data-parallel energy-train over MPI equals the single-process run.

attention_train.energy (f64), 12 examples in shuffled batches of 6, two
epochs of Adam: once alone, then under mpirun with 2 and 3 processes (each
takes a contiguous shard of every batch; the shards' gradients, weighted by
their examples, are summed in rank order). The trained params and every
update's loss must equal the single process's to 1e-12 relative: the
only difference is the order in which a batch's gradient is summed (the
kernels' order over the whole batch against the shards' sums added rank by
rank), a few roundings of 1e-16; a wrong shard or weight would show at 1e-2.
Then a 2-process run checkpointed after its first epoch resumes on 3
processes and ends where the uninterrupted run does; a rank that cannot
read its data ends the whole job with an error naming the rank, not a hang;
and a rank killed with SIGKILL ends the job within seconds, leaving a whole
checkpoint from which a resumed run ends where an uninterrupted one does.
With C_API_PROGRAM (c_api_data_parallel.c, linked with the shared
runtime and MPI), the same training through the C API's energy_communicator
on 2 processes equals energy-train alone, to 1e-12.
Usage: data_parallel.py ENERGYC ENERGY_TRAIN MODEL.energy WORK_DIR [C_API_PROGRAM]
"""
import csv
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import safetensors_io

MPIRUN = [shutil.which('mpirun') or 'mpirun', '--allow-run-as-root', '--oversubscribe',
          '--mca', 'btl', 'self,vader', '--mca', 'btl_vader_single_copy_mechanism', 'none']


def main():
    energyc, energy_train, source, work = sys.argv[1:5]
    c_api_program = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, 'model.so')
    subprocess.run([energyc, source, '--dtype', 'f64', '-o', artifact], check=True)
    rng = np.random.default_rng(5)
    data = os.path.join(work, 'data.safetensors')
    init = os.path.join(work, 'init.safetensors')
    safetensors_io.write(data, {'h': rng.standard_normal((12, 4, 5)) * 0.7,
                                'y': rng.standard_normal((12, 4, 5)) * 0.7})
    safetensors_io.write(init, {'Wq': rng.standard_normal((5, 5)) * 0.5,
                                'Wk': rng.standard_normal((5, 5)) * 0.5})

    def train(name, ranks, *extra, initial=True):
        out = os.path.join(work, name + '.safetensors')
        log = os.path.join(work, name + '.csv')
        command = [energy_train, artifact, '--data', data] + (
            ['--in', init] if initial else []) + [
                   '--dim', 'N=4', '--dim', 'D=5', '--batch', '6', '--epochs', '2',
                   '--seed', '3',
                   '--optimizer', 'adam', '--lr', '0.01', '--quiet', '--out', out,
                   '--log', log] + list(extra)
        if ranks > 1:
            command = MPIRUN + ['-np', str(ranks)] + command
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        with open(log) as f:
            losses = [float(row['loss']) for row in csv.DictReader(f)]
        return safetensors_io.read(out), losses

    single, single_losses = train('single', 1)
    worst = 0.0
    for ranks in (2, 3):
        params, losses = train('ranks%d' % ranks, ranks)
        if len(losses) != len(single_losses):
            sys.exit('%d ranks ran %d updates, one process %d'
                     % (ranks, len(losses), len(single_losses)))
        loss_error = max(abs(a - b) / abs(b) for a, b in zip(losses, single_losses))
        param_error = max(np.abs(params[n] - single[n]).max() / np.abs(single[n]).max()
                          for n in single)
        print('%d ranks: largest relative difference %.2e in the losses, %.2e in the '
              'params' % (ranks, loss_error, param_error))
        worst = max(worst, loss_error, param_error)
    if worst > 1e-12:
        sys.exit('data-parallel training differs from one process: %.2e > 1e-12' % worst)

    # Checkpointed on 2 processes after epoch 1, resumed on 3.
    checkpoint = os.path.join(work, 'epoch1.safetensors')
    train('first', 2, '--epochs', '1', '--checkpoint', checkpoint)
    resumed, _ = train('resumed', 3, '--resume', checkpoint)
    error = max(np.abs(resumed[n] - single[n]).max() / np.abs(single[n]).max() for n in single)
    print('resumed on 3 processes from a 2-process checkpoint: %.2e' % error)
    if error > 1e-12:
        sys.exit('the resumed run differs: %.2e' % error)

    # Rank 1 cannot read its data: the job ends, naming it.
    start = time.monotonic()
    common = [artifact, '--in', init, '--dim', 'N=4', '--dim', 'D=5', '--batch', '6',
              '--quiet']
    failed = subprocess.run(MPIRUN + ['-np', '1', energy_train, '--data', data] + common
                            + [':', '-np', '1', energy_train, '--data',
                               os.path.join(work, 'missing.safetensors')] + common,
                            capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - start
    if failed.returncode == 0 or 'rank 1 of 2' not in failed.stderr:
        sys.exit('a failing rank did not end the job with its rank named:\n' + failed.stderr)
    print('a rank that cannot read its data ends the job in %.1f s: %s'
          % (seconds, [l for l in failed.stderr.splitlines() if 'rank 1 of 2' in l][0]))

    # Rank 1 killed (SIGKILL) once the first checkpoint is written: mpirun
    # ends the job, the checkpoint left is whole, and a run resumed from it
    # ends where an uninterrupted one does.
    epochs = '200'
    killed_checkpoint = os.path.join(work, 'killed.safetensors')
    pid_file = os.path.join(work, 'rank1.pid')
    for path in (killed_checkpoint, pid_file):
        if os.path.exists(path):
            os.remove(path)
    command = [energy_train, artifact, '--data', data, '--in', init, '--dim', 'N=4',
               '--dim', 'D=5', '--batch', '6', '--epochs', epochs, '--seed', '3',
               '--optimizer', 'adam', '--lr', '0.01', '--quiet', '--checkpoint',
               killed_checkpoint]
    start = time.monotonic()
    job = subprocess.Popen(MPIRUN + ['-np', '1'] + command + [
        ':', '-np', '1', 'sh', '-c', 'echo $$ > "$0"; exec "$@"', pid_file] + command,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (os.path.exists(killed_checkpoint) and os.path.exists(pid_file)):
        if job.poll() is not None or time.monotonic() - start > 60:
            sys.exit('the job ended or stalled before its first checkpoint')
        time.sleep(0.01)
    with open(pid_file) as f:
        os.kill(int(f.read()), 9)
    killed_at = time.monotonic()
    try:
        _, stderr = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit('the job hung after rank 1 was killed')
    if job.returncode == 0:
        sys.exit('the job succeeded although rank 1 was killed')
    print('rank 1 killed: the job ended in %.1f s (%s)' % (
        time.monotonic() - killed_at,
        next((l.strip() for l in stderr.splitlines() if 'rank 1' in l), 'mpirun')))
    resumed, _ = train('after-kill', 2, '--epochs', epochs, '--resume', killed_checkpoint)
    uninterrupted, _ = train('uninterrupted', 1, '--epochs', epochs)
    error = max(np.abs(resumed[n] - uninterrupted[n]).max() / np.abs(uninterrupted[n]).max()
                for n in uninterrupted)
    print('resumed from the checkpoint the killed job left: %.2e' % error)
    if error > 1e-12:
        sys.exit('the run resumed after the kill differs: %.2e' % error)

    if c_api_program:
        out = os.path.join(work, 'c_api.txt')
        subprocess.run(MPIRUN + ['-np', '2', c_api_program, artifact, data, out], check=True)
        with open(out) as f:
            rows = [line.split() for line in f]
        alone, _ = train('c-api-reference', 1, initial=False)
        error = 0.0
        for name in ('Wk', 'Wq'):
            values = np.array([float(v) for n, v in rows if n == name])
            error = max(error, np.abs(values - alone[name].ravel()).max()
                        / np.abs(alone[name]).max())
        print('the C API on 2 processes against energy-train alone: %.2e' % error)
        if error > 1e-12:
            sys.exit('data-parallel training through the C API differs: %.2e' % error)
    print('data-parallel training equals the single process on 2 and 3 ranks')


if __name__ == '__main__':
    main()
