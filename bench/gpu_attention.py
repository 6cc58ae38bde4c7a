#!/usr/bin/env python3
"""On a GPU machine: a CUDA artifact's self-attention energy gradient against
torch.autograd of the same energy on the same GPU, same inputs.

Usage: gpu_attention.py ENERGY_EXEC ARTIFACT N [REPS]

ARTIFACT is examples/self_attention.energy compiled with `energyc --target
cuda` (f32, D = 64). Ours: `energy-exec ARTIFACT --in x.safetensors --eval
grad --wrt x --bench REPS --json` (one warm-up, median of REPS, wall time of
the whole call: host to device and back included). Anchor: torch.autograd.grad
of E = -sum_c logsumexp_p((Wq x_c) . (Wk x_p)) on CUDA tensors, timed with
torch.cuda.synchronize (median of REPS after a warm-up). Both gradients are
compared with each other (max difference over the largest entry). Prints one
JSON object.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(array.shape),
                        'data_offsets': [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def read_tensor(path, name):
    with open(path, 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    info = header[name]
    begin, end = info['data_offsets']
    return np.frombuffer(data[begin:end], dtype=np.float32).reshape(info['shape'])


def main():
    energy_exec, artifact, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    d = 64
    rng = np.random.default_rng(2026)
    x = rng.standard_normal((n, d)).astype(np.float32)
    wq = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    wk = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    with tempfile.TemporaryDirectory() as directory:
        inputs = os.path.join(directory, 'in.safetensors')
        output = os.path.join(directory, 'out.safetensors')
        write_safetensors(inputs, {'x': x, 'Wq': wq, 'Wk': wk})
        common = [energy_exec, artifact, '--device', 'cuda', '--in', inputs,
                  '--eval', 'grad', '--wrt', 'x']
        subprocess.run(common + ['--out', output], check=True)
        ours_grad = read_tensor(output, 'grad.x')
        bench = subprocess.run(common + ['--bench', str(reps), '--json'], check=True,
                               capture_output=True, text=True)
        ours_ms = json.loads(bench.stdout)['median_ms']

    device = torch.device('cuda')
    tx = torch.tensor(x, device=device, requires_grad=True)
    tq = torch.tensor(wq, device=device)
    tk = torch.tensor(wk, device=device)

    def anchor():
        q = tx @ tq.T
        k = tx @ tk.T
        energy = -torch.logsumexp(q @ k.T, dim=1).sum()
        return torch.autograd.grad(energy, tx)[0]

    anchor()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        value = anchor()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    torch_ms = times[len(times) // 2]
    torch_grad = value.cpu().numpy()
    difference = float(np.max(np.abs(ours_grad - torch_grad)) / np.max(np.abs(torch_grad)))
    print(json.dumps({'benchmark': 'self-attention gradient, f32', 'n': n, 'd': d,
                      'reps': reps, 'device': torch.cuda.get_device_name(0),
                      'ours_ms': ours_ms, 'torch_ms': torch_ms,
                      'torch_over_ours': torch_ms / ours_ms,
                      'max_difference_over_largest': difference}))


if __name__ == '__main__':
    main()
