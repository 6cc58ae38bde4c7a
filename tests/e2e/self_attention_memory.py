#!/usr/bin/env python3
"""The self-attention gradient at N = 16384, D = 16 in bounded memory.

Runs `energy-run ARTIFACT --eval grad` on a compiled f32 self-attention
artifact (examples/self_attention.energy) with N = 16384, D = 16. Its
children x parents matrix would take 16384^2 * 4 bytes = 1 GiB; the streaming
kernels keep O(N * D), so the peak resident memory of the run must stay under
256 MiB. Every row of the gradient is checked against a float64 NumPy
computation of the closed form, 004 eq. 16 (tools/python/attention_numpy.py),
from the same (f32) inputs. Tolerance 2e-3 of the row's largest entry: the
kernel sums 16384 terms in f32 (unit roundoff 6e-8; a pairwise-free running
sum of n terms errs by up to ~n * u = 1e-3 in the worst case, ~sqrt(n) * u in
practice).
"""
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tools', 'python'))
from attention_numpy import (read_safetensors, self_attention_gradient,  # noqa: E402
                             write_safetensors)

N, D = 16384, 16
LIMIT_BYTES = 256 * 1024 * 1024


def main():
    energy_run, artifact = sys.argv[1:3]
    rng = np.random.default_rng(12345)
    x = rng.standard_normal((N, D)).astype(np.float32)
    wq = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    wk = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    with tempfile.TemporaryDirectory() as directory:
        inputs = os.path.join(directory, 'in.safetensors')
        output = os.path.join(directory, 'grad.safetensors')
        write_safetensors(inputs, {'x': x, 'Wq': wq, 'Wk': wk})
        command = [energy_run, artifact, '--dim', 'D=16', '--in', inputs,
                   '--eval', 'grad', '--out', output]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        print('peak resident memory of energy-run: %.1f MiB (limit 256 MiB; '
              'the N x N matrix alone would be 1024 MiB)' % (peak / 2**20))
        if peak >= LIMIT_BYTES:
            sys.exit('peak resident memory %.1f MiB is over 256 MiB' % (peak / 2**20))
        gradient = read_safetensors(output)['grad.x']
    expected = self_attention_gradient(x.astype(np.float64), wq.astype(np.float64),
                                       wk.astype(np.float64))
    errors = np.abs(gradient - expected).max(axis=1)
    scales = np.abs(expected).max(axis=1)
    worst = int(np.argmax(errors / scales))
    print('worst row %d of %d: max|diff| %.3e, row max %.3e' % (
        worst, N, errors[worst], scales[worst]))
    if errors[worst] > 2e-3 * scales[worst]:
        sys.exit('row %d of grad.x differs from the float64 reference' % worst)

if __name__ == '__main__':
    main()
