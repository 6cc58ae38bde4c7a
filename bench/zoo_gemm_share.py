"""How much of each zoo model's PyTorch step is matrix products.

Profiles the PyTorch training step (or, with --inference, the run of the
dynamics) of every zoo model (tests/zoo, at its BENCH_DIMS, f32, 1 thread,
the inputs of bench/zoo_models.py) with torch.profiler and prints its time,
the part spent in BLAS products (aten::mm, bmm, addmm, baddbmm, mv, addmv,
dot), their flops, and the ratio that a compiled version would reach if it
ran the same products at the same rate and spent nothing else: PyTorch's
time over its products' time. A zoo target above that ceiling needs fewer
product flops than PyTorch's, not a faster run of the same ones.

    /usr/bin/python3 bench/zoo_gemm_share.py [--inference] [MODEL ...]
"""
import argparse
import os
import statistics
import sys
import time

import blas_env

blas_env.configure(1)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchlib import ROOT  # noqa: E402
from zoo_models import torch_functions  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, 'tests', 'zoo'))
import zoo  # noqa: E402

PRODUCTS = {'aten::mm', 'aten::bmm', 'aten::addmm', 'aten::baddbmm', 'aten::addbmm',
            'aten::mv', 'aten::addmv', 'aten::dot'}
REPS = 5


def product_share(training):
    """(median seconds of `training`, profiled total, profiled products,
    the products' flops)."""
    for _ in range(2):
        training()
    times = []
    for _ in range(REPS):
        start = time.perf_counter()
        training()
        times.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as profiler:
        training()
    total = products = flops = 0.0
    for event in profiler.key_averages():
        total += event.self_cpu_time_total
        if event.key in PRODUCTS:
            products += event.self_cpu_time_total
            flops += event.flops
    return statistics.median(times), total * 1e-6, products * 1e-6, flops


def main(argv):
    parser = argparse.ArgumentParser(
        description='The share of matrix products in the zoo models\' PyTorch steps '
                    '(see the module docstring).')
    parser.add_argument('models', nargs='*', metavar='MODEL',
                        help='zoo models (default: all): %s' % ', '.join(zoo.model_names()))
    parser.add_argument('--inference', action='store_true',
                        help='the run of the dynamics, not the training step')
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(zoo.model_names()))
    if unknown:
        parser.error('not a zoo model: %s' % ', '.join(unknown))
    blas_env.set_anchor_threads(1)
    print('%-26s %10s %10s %10s %8s %9s %8s' % ('model', 'step ms', 'profiled', 'products',
                                                 'share', 'ceiling', 'GFLOP'))
    for name in args.models or zoo.model_names():
        model = zoo.load(name)
        if not args.inference and not hasattr(model, 'loss'):
            continue
        arrays = {k: np.asarray(v, dtype=np.float32)
                  for k, v in model.make_inputs(model.BENCH_DIMS,
                                                np.random.default_rng(7)).items()}
        inference, training = torch_functions(model, arrays)
        median, total, products, flops = product_share(
            inference if args.inference else training)
        print('%-26s %10.1f %10.1f %10.1f %7.0f%% %9.2f %8.2f' % (
            name, 1e3 * median, 1e3 * total, 1e3 * products, 100 * products / total,
            total / products if products else float('inf'), flops * 1e-9), flush=True)


if __name__ == '__main__':
    main(sys.argv[1:])
