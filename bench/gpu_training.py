#!/usr/bin/env python3
"""On a GPU machine: one training step's loss gradient on the GPU, against
the same artifact's CPU build and PyTorch on the same GPU, and what a traced
call on the GPU does on the host (issue 35's item 2: none of the steps'
or backward steps' work). Prints one JSON object.

Usage: gpu_training.py ENERGY_EXEC CUDA_ARTIFACT CPU_ARTIFACT B N D STEPS [REPS]

The model is bench/models/attention_train.energy (benchmark "training step"
of docs/benchmarks.md): STEPS momentum steps of a batch of self-attention
energies, a squared-error loss, and its gradient with respect to Wq and Wk
through the steps. Ours: `energy-exec ARTIFACT --eval loss-grad` with the
CUDA artifact on the GPU (`--device cuda`, the forward steps and the
backward program, their contractions with pair terms as generated GPU
loops) and the CPU artifact on the host's cores, from the same inputs; the GPU's adjoints are
compared with the CPU's (relative to their largest entry; both f32). The
anchor is training_step.py's PyTorch step (autograd with create_graph
through the steps) run on the GPU in f32, timed with torch.cuda.synchronize
(training_step.py, benchlib.py and tools/python/attention_numpy.py beside
this script).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from gpu_attention import difference, time_torch, write_safetensors
from training_step import torch_step


def host_traffic(trace):
    """What ENERGY_CUDA_TRACE shows a call doing on the host: loops on the
    host's threads, and the buffers moved to the host (the results the tool
    reads at the end among them)."""
    lines = trace.splitlines()
    return {'host_loops': sum("a loop on the host's threads" in line for line in lines),
            'moved_to_host': sorted({line.split(' to the host:')[0].replace('energy-cuda: ', '')
                                     for line in lines if ' to the host:' in line})}


def ours(energy_exec, artifact, device, inputs, steps, reps):
    """({adjoint name: array}, median ms of `--bench REPS`, the host traffic
    of a traced call on the GPU)."""
    command = [energy_exec, artifact, '--in', inputs, '--eval', 'loss-grad', '--steps',
               str(steps)] + (['--device', device] if device == 'cuda' else [])
    report = json.loads(subprocess.run(command + ['--json'], check=True, capture_output=True,
                                       text=True).stdout)
    adjoints = {k: np.asarray(v['data']) for k, v in report.items() if k.startswith('adjoint.')}
    traffic = None
    if device == 'cuda':
        traced = subprocess.run(command + ['--bench', '1'], capture_output=True, text=True,
                                env=dict(os.environ, ENERGY_CUDA_TRACE='1'))
        traffic = host_traffic(traced.stderr)
        if os.environ.get('ENERGY_BENCH_TRACE'):  # for a closer look
            with open(os.environ['ENERGY_BENCH_TRACE'], 'w') as f:
                f.write(traced.stderr)
    bench = subprocess.run(command + ['--bench', str(reps), '--json'], check=True,
                           capture_output=True, text=True)
    return adjoints, json.loads(bench.stdout)['median_ms'], traffic


def main():
    energy_exec, cuda_artifact, cpu_artifact = sys.argv[1:4]
    b, n, d, steps = (int(a) for a in sys.argv[4:8])
    reps = int(sys.argv[8]) if len(sys.argv) > 8 else 10
    rng = np.random.default_rng(2026)
    h = (rng.standard_normal((b, n, d)) * 0.5).astype(np.float32)
    y = (rng.standard_normal((b, n, d)) * 0.5).astype(np.float32)
    wq = (rng.standard_normal((d, d)) * d ** -0.5).astype(np.float32)
    wk = (rng.standard_normal((d, d)) * d ** -0.5).astype(np.float32)
    with tempfile.TemporaryDirectory() as directory:
        inputs = os.path.join(directory, 'in.safetensors')
        write_safetensors(inputs, {'h': h, 'y': y, 'Wq': wq, 'Wk': wk})
        gpu, gpu_ms, traffic = ours(energy_exec, cuda_artifact, 'cuda', inputs, steps, reps)
        cpu, cpu_ms, _ = ours(energy_exec, cpu_artifact, 'cpu', inputs, steps, reps)
    (torch_wq, torch_wk), torch_ms = time_torch(torch_step(h, y, wq, wk, steps, 'cuda'), reps)
    print(json.dumps({
        'benchmark': 'training step', 'b': b, 'n': n, 'd': d, 'steps': steps,
        'ours_gpu_ms': gpu_ms, 'ours_cpu_ms': cpu_ms, 'torch_gpu_ms': torch_ms,
        'gpu_call_on_the_host': traffic,
        'gpu_vs_cpu': {k: difference(gpu[k], cpu[k]) for k in sorted(cpu)},
        'gpu_vs_torch': {'adjoint.Wq': difference(gpu['adjoint.Wq'], torch_wq.cpu().numpy().ravel()),
                         'adjoint.Wk': difference(gpu['adjoint.Wk'], torch_wk.cpu().numpy().ravel())},
    }))


if __name__ == '__main__':
    main()
