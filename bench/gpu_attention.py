#!/usr/bin/env python3
"""On a GPU machine: CUDA artifacts against PyTorch on the same GPU, same
inputs. Prints one JSON object per run.

Usage: gpu_attention.py BENCHMARK ENERGY_EXEC ARTIFACT N [REPS]

BENCHMARK is one of
  self   examples/self_attention.energy (f32, D = 64, energyc --target
         cuda): the gradient of E = -sum_c lse_p (Wq x_c).(Wk x_p) with
         respect to x, against torch.autograd.grad in f32;
  step   bench/models/mha_step.energy (energyc --target cuda --dtype bf16):
         one update q + softmax(q k^T / tau) k of 16 heads of dim 128
         (`--eval step`: the step kernel, without the energy after it),
         against q + torch.nn.functional.scaled_dot_product_attention(q, k,
         k) on bf16 tensors (benchmark (a)); also the cost of one more step
         in a call of five (ours_step_ms), which leaves out setting q from
         the host;
  grad   bench/models/mha_grad.energy (--dtype bf16): the gradient of a
         16-head self-attention energy, model dim 2048, with respect to x,
         against torch.autograd.grad of the same energy on bf16 tensors
         (benchmark (b)).

Ours: `energy-exec ARTIFACT --in in.safetensors ... --bench REPS --json`
(one warm-up, median of REPS, wall time of the whole call: the state set
from the host before each step, a gradient left on the GPU as torch's is),
and the sum of the GPU work in one
warm traced call (ENERGY_CUDA_TRACE: contractions, cuBLAS products, kernels).
Anchor: the median of REPS after a warm-up, timed with
torch.cuda.synchronize. Both results are compared with an f32 (step, grad)
or f64 (self) evaluation of the same formula in PyTorch: the max difference
over the largest entry.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HEADS, HEAD_DIM = 16, 128
TAU = HEAD_DIM ** 0.5


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


def run_ours(energy_exec, artifact, inputs, evaluation, result, reps):
    """(result tensor, median ms of the whole call, ms of each kind of GPU
    work in one warm call); with a list of names as `result`, a dict of
    those result tensors."""
    with tempfile.TemporaryDirectory() as directory:
        given = os.path.join(directory, 'in.safetensors')
        output = os.path.join(directory, 'out.safetensors')
        write_safetensors(given, inputs)
        common = [energy_exec, artifact, '--device', 'cuda', '--in', given] + evaluation
        subprocess.run(common + ['--out', output], check=True)
        value = ({name: read_tensor(output, name) for name in result}
                 if isinstance(result, (list, tuple)) else read_tensor(output, result))
        # A warm-up and one timed call, traced: the second half of the
        # trace is the warm call.
        traced = subprocess.run(common + ['--bench', '1'], check=True, text=True,
                                capture_output=True,
                                env=dict(os.environ, ENERGY_CUDA_TRACE='1'))
        if os.environ.get('ENERGY_BENCH_TRACE'):  # the whole trace, for a closer look
            with open(os.environ['ENERGY_BENCH_TRACE'], 'w') as f:
                f.write(traced.stderr)
        lines = [line for line in traced.stderr.splitlines()
                 if line.startswith('energy-cuda: ')]
        # Launches of the same kernel (the step's contraction and the
        # energy's after it) add up; "launches" says how many there were.
        work = {}
        for line in lines[len(lines) // 2:]:
            match = re.match(r'energy-cuda: (.*?)( \d+x\d+x\d+)?: \d+ positions, ([\d.]+) ms',
                             line)
            if match:
                entry = work.setdefault(match.group(1), {'ms': 0.0, 'launches': 0})
                entry['ms'] = round(entry['ms'] + float(match.group(3)), 3)
                entry['launches'] += 1
        bench = subprocess.run(common + ['--bench', str(reps), '--json'], check=True,
                               capture_output=True, text=True)
    return value, json.loads(bench.stdout)['median_ms'], work


def time_torch(function, reps):
    """(value, median ms of `function` over REPS after a warm-up), waiting
    for the GPU after each call (when there is one: gpu_gmm.py's --device
    cpu check)."""
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    function()
    synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        value = function()
        synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return value, times[len(times) // 2]


def difference(value, reference):
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(value, dtype=np.float64) - reference)) /
                 np.max(np.abs(reference)))


def torch_gradient(energy, x, params, dtype):
    """The gradient with respect to x of energy(x, *params), on the GPU in
    dtype."""
    tx = torch.tensor(x, device='cuda', dtype=dtype, requires_grad=True)
    tensors = [torch.tensor(p, device='cuda', dtype=dtype) for p in params]
    return torch.autograd.grad(energy(tx, *tensors), tx)[0]


def report(name, n, ours, ours_ms, work, theirs, torch_ms, reference, **more):
    """The JSON record of one benchmark: times, and both results' distance
    from the reference."""
    return dict({'benchmark': name, 'n': n, 'ours_ms': ours_ms, 'torch_ms': torch_ms,
                 'ours_gpu_work_ms': work,
                 'ours_difference': difference(ours, reference),
                 'torch_difference': difference(theirs.float().cpu().numpy(), reference)},
                **more)


def self_attention(energy_exec, artifact, n, reps, rng):
    d = 64
    x = rng.standard_normal((n, d)).astype(np.float32)
    wq = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    wk = (rng.standard_normal((d, d)) * d ** -0.75).astype(np.float32)
    ours, ours_ms, work = run_ours(energy_exec, artifact, {'x': x, 'Wq': wq, 'Wk': wk},
                                   ['--eval', 'grad', '--wrt', 'x'], 'grad.x', reps)

    def energy(tx, tq, tk):
        return -torch.logsumexp((tx @ tq.T) @ (tx @ tk.T).T, dim=1).sum()

    theirs, torch_ms = time_torch(
        lambda: torch_gradient(energy, x, (wq, wk), torch.float32), reps)
    reference = torch_gradient(energy, x, (wq, wk), torch.float64).cpu().numpy()
    return report('self-attention gradient, f32, D = 64', n, ours, ours_ms, work,
                  theirs, torch_ms, reference)


def attention_step(energy_exec, artifact, n, reps, rng):
    q = rng.standard_normal((HEADS, n, HEAD_DIM)).astype(np.float32)
    k = rng.standard_normal((HEADS, n, HEAD_DIM)).astype(np.float32)
    ours, ours_ms, work = run_ours(energy_exec, artifact, {'q': q, 'k': k},
                                   ['--eval', 'step'], 'q', reps)
    # A timed call sets the state from the host first, which the GPU then
    # reads across the bus inside the step; torch's q is already on the
    # GPU. The cost of one more step in a call of several is the step
    # alone: (t(1 + S) - t(1)) / S.
    extra = 4
    _, longer_ms, _ = run_ours(energy_exec, artifact, {'q': q, 'k': k},
                               ['--eval', 'step', '--steps', str(1 + extra)],
                               'q', reps)
    step_ms = (longer_ms - ours_ms) / extra
    tq = torch.tensor(q, device='cuda')
    tk = torch.tensor(k, device='cuda')
    sdpa = torch.nn.functional.scaled_dot_product_attention
    bq, bk = tq.bfloat16()[None], tk.bfloat16()[None]
    theirs, torch_ms = time_torch(lambda: bq + sdpa(bq, bk, bk), reps)
    reference = (tq + torch.softmax(tq @ tk.transpose(1, 2) / TAU, dim=-1) @ tk).cpu().numpy()
    flops = 4.0 * HEADS * n * n * HEAD_DIM
    return report('(a) attention update, 16 heads x 128, bf16', n, ours, ours_ms, work,
                  theirs[0], torch_ms, reference,
                  torch_tflops=flops / torch_ms * 1e-9,
                  ours_tflops_whole_call=flops / ours_ms * 1e-9,
                  ours_step_ms=step_ms, ours_tflops_step=flops / step_ms * 1e-9,
                  torch_over_ours_step=torch_ms / step_ms)


def attention_gradient(energy_exec, artifact, n, reps, rng):
    d = HEADS * HEAD_DIM
    x = rng.standard_normal((n, d)).astype(np.float32)
    wq = (rng.standard_normal((HEADS, HEAD_DIM, d)) * d ** -0.5).astype(np.float32)
    wk = (rng.standard_normal((HEADS, HEAD_DIM, d)) * d ** -0.5).astype(np.float32)
    ours, ours_ms, work = run_ours(energy_exec, artifact, {'x': x, 'Wq': wq, 'Wk': wk},
                                   ['--eval', 'grad', '--wrt', 'x'], 'grad.x', reps)

    def energy(tx, tq, tk):
        q = torch.einsum('hed,nd->hne', tq, tx)
        k = torch.einsum('hed,nd->hne', tk, tx)
        return -TAU * torch.logsumexp(q @ k.transpose(1, 2) / TAU, dim=-1).sum()

    theirs, torch_ms = time_torch(
        lambda: torch_gradient(energy, x, (wq, wk), torch.bfloat16), reps)
    reference = torch_gradient(energy, x, (wq, wk), torch.float32).cpu().numpy()
    return report('(b) 16-head self-attention energy gradient, bf16', n, ours, ours_ms,
                  work, theirs, torch_ms, reference)


BENCHMARKS = {'self': self_attention, 'step': attention_step, 'grad': attention_gradient}


def main():
    if len(sys.argv) < 5 or sys.argv[1] not in BENCHMARKS:
        sys.exit(__doc__)
    benchmark, energy_exec, artifact, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    result = BENCHMARKS[benchmark](energy_exec, artifact, n, reps, np.random.default_rng(2026))
    result.update({'reps': reps, 'device': torch.cuda.get_device_name(0),
                   'torch': torch.__version__,
                   'torch_over_ours': result['torch_ms'] / result['ours_ms']})
    print(json.dumps(result))


if __name__ == '__main__':
    main()
