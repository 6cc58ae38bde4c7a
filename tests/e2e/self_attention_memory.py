#!/usr/bin/env python3
"""The self-attention gradient at N = 16384, D = 16 in bounded memory.

Runs `energy-run ARTIFACT --eval grad` on a compiled f32 self-attention
artifact (examples/self_attention.energy) with N = 16384, D = 16. Its
children x parents matrix would take 16384^2 * 4 bytes = 1 GiB; the streaming
kernels keep O(N * D), so the peak resident memory of the run must stay under
256 MiB. A few rows of the gradient are checked against a float64 NumPy
computation of the closed form (004 eq. 16):

  dE/dx_r = -Wq^T sum_p w_rp k_p - Wk^T sum_c w_cr q_c,
  q = Wq x, k = Wk x, w_cp = softmax_p(q_c . k_p),

from the same (f32) inputs. Tolerance 2e-3 of the row's largest entry: the
kernel sums 16384 terms in f32 (unit roundoff 6e-8; a pairwise-free running
sum of n terms errs by up to ~n * u = 1e-3 in the worst case, ~sqrt(n) * u in
practice).
"""
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile

import numpy as np

N, D = 16384, 16
ROWS = [0, 1, 4097, N - 1]
LIMIT_BYTES = 256 * 1024 * 1024


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype='<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(array.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def read_safetensors(path):
    with open(path, 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    result = {}
    for name, info in header.items():
        begin, end = info['data_offsets']
        dtype = {'F32': '<f4', 'F64': '<f8'}[info['dtype']]
        result[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info['shape'])
    return result


def reference_rows(x, wq, wk, rows):
    q, k = x @ wq.T, x @ wk.T
    # Per-child log-sum-exp over parents, in blocks of children.
    lse = np.empty(N)
    for start in range(0, N, 1024):
        s = q[start:start + 1024] @ k.T
        m = s.max(axis=1)
        lse[start:start + 1024] = m + np.log(np.exp(s - m[:, None]).sum(axis=1))
    result = {}
    for r in rows:
        child = np.exp(q[r] @ k.T - lse[r]) @ k          # sum_p w_rp k_p
        parent = np.exp(q @ k[r] - lse) @ q              # sum_c w_cr q_c
        result[r] = -(wq.T @ child) - (wk.T @ parent)
    return result


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
    expected = reference_rows(x.astype(np.float64), wq.astype(np.float64),
                              wk.astype(np.float64), ROWS)
    for r in ROWS:
        error = np.abs(gradient[r] - expected[r]).max()
        scale = np.abs(expected[r]).max()
        print('row %5d: max|diff| %.3e, row max %.3e' % (r, error, scale))
        if error > 2e-3 * scale:
            sys.exit('row %d of grad.x differs from the float64 reference' % r)


if __name__ == '__main__':
    main()
