"""(d) The BLAS reference of this run: float32 matrix products of large
square matrices through torch and numpy (both on the same OpenBLAS, with
the core and threads blas_env.configure set), and bench/kernels'
softmax-contract-bench when it was built.

sgemm GFLOP/s = 2 S^3 / median time of one S x S x S product, S = 2048 and
4096; the best of the four rates is the reference the Hopfield kernel's
rate is compared with.
"""
import os
import re

import numpy as np
import torch

from benchlib import BenchError


def run(ctx):
    reps = max(5, ctx.reps // 2)
    rng = np.random.default_rng(1)
    rates = []
    for size in (2048, 4096):
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        at, bt = torch.from_numpy(a), torch.from_numpy(b)
        for library, function in (('torch', lambda: at @ bt), ('numpy', lambda: a @ b)):
            timed = ctx.time_anchor(function, reps)
            rate = 2.0 * size ** 3 / timed['median_s'] / 1e9
            rates.append({'library': library, 'size': size, 'median_s': timed['median_s'],
                          'gflops': rate, 'reps': reps})
            ctx.log('sgemm: %s %d^3: %.1f GFLOP/s' % (library, size, rate))
    best = max(rates, key=lambda row: row['gflops'])
    result = {'rates': rates, 'best': best, 'threads': ctx.threads}

    tool = os.path.join(ctx.build_dir, 'bin', 'softmax-contract-bench')
    if os.path.exists(tool):
        command = [tool, '--threads', str(ctx.threads)]
        ctx.log('running %s' % ' '.join(command))
        try:
            stdout, _, _, _ = ctx.run_tool(command)
            result['kernel_bench_output'] = stdout
            result['kernel_bench_command'] = command
            result['kernel_bench'] = parse_kernel_bench(stdout)
        except BenchError as error:
            result['kernel_bench_error'] = str(error)
            ctx.log('softmax-contract-bench FAILED: %s' % error)
    else:
        result['kernel_bench_missing'] = tool
        ctx.log('%s not built: skipped' % tool)
    return result


def parse_kernel_bench(text):
    """The GFLOP/s of each line of softmax-contract-bench's table."""
    rates = {}
    for line in text.splitlines():
        match = re.match(r'^(.*?)\s+([\d.]+) ms\s+([\d.]+) GFLOP/s', line)
        if match:
            rates[match.group(1).strip()] = float(match.group(3))
        match = re.match(r'^OpenBLAS: .*, core (\S+)', line)
        if match:
            rates['core'] = match.group(1)
    return rates
