#!/usr/bin/env python3
"""Self-attention energy gradient: compiled artifact against a NumPy anchor.

The gradient of E = -sum_c lse_p (Wq x_c . Wk x_p) with respect to x (paper
004 eq. 16), at N tokens of width D, in float32:
  - ours: `energy-run ARTIFACT --eval grad` (wall time of the process, so it
    includes start-up and reading/writing the tensors), on 1 thread and on
    every core;
  - anchor: hand-written NumPy (tools/python/attention_numpy.py), vectorised
    over blocks of 1024 children (the scores of a block are materialised,
    N x 1024 floats at a time), timed in this process.
Prints the times, the ratio anchor / ours (above 1: ours is faster) and the
largest difference between the two gradients relative to its scale.

Usage: self_attention_grad.py ENERGY_RUN ARTIFACT [N ...]
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tools', 'python'))
from attention_numpy import (read_safetensors, self_attention_gradient,  # noqa: E402
                             write_safetensors)

D = 16


def time_ours(energy_run, artifact, inputs, output, threads):
    command = [energy_run, artifact, '--dim', 'D=%d' % D, '--in', inputs,
               '--eval', 'grad', '--out', output, '--threads', str(threads)]
    begin = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - begin
    if result.returncode != 0:
        sys.exit('FAILED: %s\n%s' % (' '.join(command), result.stderr))
    return elapsed


def main():
    energy_run, artifact = sys.argv[1:3]
    sizes = [int(n) for n in sys.argv[3:]] or [4096, 16384]
    cores = os.cpu_count() or 1
    print('self-attention gradient, f32, D = %d, %d cores' % (D, cores))
    print('%6s %10s %12s %12s %9s %9s %10s' % (
        'N', 'numpy [s]', 'ours 1t [s]', 'ours %dt [s]' % cores,
        'ratio 1t', 'ratio %dt' % cores, 'max rel'))
    rng = np.random.default_rng(2026)
    for n in sizes:
        x = rng.standard_normal((n, D)).astype(np.float32)
        wq = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
        wk = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
        with tempfile.TemporaryDirectory() as directory:
            inputs = os.path.join(directory, 'in.safetensors')
            output = os.path.join(directory, 'grad.safetensors')
            write_safetensors(inputs, {'x': x, 'Wq': wq, 'Wk': wk})
            begin = time.perf_counter()
            anchor = self_attention_gradient(x, wq, wk)
            numpy_time = time.perf_counter() - begin
            one = time_ours(energy_run, artifact, inputs, output, 1)
            many = time_ours(energy_run, artifact, inputs, output, cores)
            ours = read_safetensors(output)['grad.x']
        error = np.abs(ours - anchor).max() / np.abs(anchor).max()
        print('%6d %10.3f %12.3f %12.3f %9.2f %9.2f %10.2e' % (
            n, numpy_time, one, many, numpy_time / one, numpy_time / many, error))


if __name__ == '__main__':
    main()
