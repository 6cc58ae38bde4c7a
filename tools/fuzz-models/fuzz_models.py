#!/usr/bin/env python3
"""Differential fuzzing of the compiler with random models.

Draws models from model_generator.ModelGenerator (seeds SEED, SEED + 1, ...)
and checks each with `energy-run MODEL --check` (the model compiled in double
precision against the reference interpreter, and the interpreter's gradients
against finite differences), each in a process of its own with a time
limit. A model the check finds different, a crash, an internal error, a
model that does not compile or a hang is a failure: it is reduced (whole
declarations and rules dropped, expressions replaced by their parts, dims
made smaller, as long as the same kind of failure remains) and printed with
its reproducer's path. Models whose values are not finite at the drawn dims
(exit 3) are counted apart.

With `--target cuda` (no GPU needed) each model is compiled for the GPU
instead, `energyc --target cuda --emit=ptx` (energyc from the directory of
--energy-run), and each PTX image (sm_80, sm_90) given to ptxas: a crash,
an internal error, an error or PTX that ptxas rejects is a failure. With
`--target device-loops` each model is checked as on the CPU but compiled
with the loops CUDA artifacts get (`energy-run --check --device-loops`):
the code the GPU runs, run on the CPU against the interpreter.

  fuzz_models.py --energy-run build/bin/energy-run --seconds 3600
  fuzz_models.py --energy-run build/bin/energy-run --count 300 --seed 1
  fuzz_models.py --energy-run build/bin/energy-run --count 100 --target cuda

Exits 1 when any model failed. Prints models per second and counts by
outcome at the end (and a progress line every 10 seconds).
"""

import argparse
import concurrent.futures
import copy
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'python'))
from model_generator import ModelGenerator, reductions  # noqa: E402
from ptx_images import PTXAS, assemble_images, split_images  # noqa: E402

TIMEOUT = 120


def check_ptx(energy_run, path, dtype):
    """Compiles the model at `path` for the GPU and gives its PTX to ptxas:
    (outcome, detail), outcome one of ok, internal, crash, compile, ptxas,
    hang."""
    energyc = os.path.join(os.path.dirname(energy_run), 'energyc')
    command = [energyc, '--target', 'cuda', '--emit=ptx', '--dtype', dtype, path]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return 'hang', 'no answer in %d s' % TIMEOUT
    if result.returncode < 0:
        return 'crash', 'signal %d' % -result.returncode
    internal = re.search(r'internal error in (\S+)', result.stderr)
    if internal:
        return 'internal', internal.group(0)
    if result.returncode != 0:
        errors = [l for l in result.stderr.splitlines() if 'error' in l]
        return 'compile', errors[0] if errors else result.stderr.strip()[:200]
    images = split_images(result.stdout)
    if not images:
        return 'compile', 'no PTX image'
    try:
        _, rejected = assemble_images(images, path, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return 'hang', 'ptxas: no answer in %d s' % TIMEOUT
    if rejected:
        arch, message = rejected
        first = next((l for l in message.splitlines() if 'error' in l), message[:200])
        return 'ptxas', '%s: %s' % (arch, re.sub(r'^.*?\.ptx, ', '', first))
    return 'ok', ''


def check(energy_run, source, path, opt_level, dtype='f64', target='cpu'):
    """Runs the check on `source` written to `path`: (outcome, detail),
    outcome one of ok, unusable, invalid, differs, internal, crash, compile,
    refused, hang (and ptxas for target cuda)."""
    with open(path, 'w') as f:
        f.write(source)
    if target == 'cuda':
        return check_ptx(energy_run, path, dtype)
    command = [energy_run, path, '--check', '--json', '--opt-level', str(opt_level),
               '--dtype', dtype]
    if target == 'device-loops':
        command.append('--device-loops')
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return 'hang', 'no answer in %d s' % TIMEOUT
    stderr = result.stderr
    if result.returncode < 0:
        return 'crash', 'signal %d' % -result.returncode
    internal = re.search(r'internal error in (\S+)', stderr)
    if internal:
        return 'internal', internal.group(0)
    report = None
    for line in reversed(result.stdout.splitlines()):
        if line.startswith('{'):
            try:
                report = json.loads(line)
            except ValueError:
                pass
            break
    if result.returncode == 0 and report and report.get('status') == 'agrees':
        return 'ok', ''
    if result.returncode == 3:
        return 'unusable', report.get('message', '') if report else ''
    if result.returncode == 2:
        first = next((l for l in stderr.splitlines() if 'error' in l), '')
        return 'invalid', first or (report.get('message', '') if report else '')
    if report is None:
        first = next((l for l in stderr.splitlines() if 'error' in l), stderr.strip()[:200])
        return 'refused', first
    message = report.get('message', '')
    if 'did not compile' in message or 'could not be built' in message:
        errors = [l for l in stderr.splitlines() if 'error' in l]
        return 'compile', errors[0] if errors else message
    failing = [c['quantity'] for c in report.get('checks', []) if not c['ok']]
    kind = failing[0] if failing else message
    # The kind of a difference: what was compared, without tensor names.
    kind = re.sub(r'^(gradient|after the run:|loss|adjoint\.)\s*\S+', r'\1', kind)
    return 'differs', kind or message


def signature(outcome, detail):
    """What must stay the same while a failure is reduced."""
    if outcome in ('internal', 'crash', 'hang', 'refused', 'ptxas'):
        return (outcome, detail.split(':')[0])
    return (outcome, detail)


def reduce(energy_run, model, outcome, detail, path, opt_level, budget, dtype, target):
    """Greedily simplifies `model` while the failure keeps its signature,
    for at most `budget` seconds."""
    wanted = signature(outcome, detail)
    deadline = time.time() + budget
    progress = True
    while progress and time.time() < deadline:
        progress = False
        for description, apply in reductions(model):
            if time.time() > deadline:
                break
            candidate = copy.deepcopy(model)
            try:
                apply(candidate)
            except (IndexError, KeyError, ValueError):
                continue
            result = check(energy_run, candidate.source(), path, opt_level, dtype, target)
            if signature(*result) == wanted:
                model = candidate
                progress = True
                break
    with open(path, 'w') as f:
        f.write(model.source())
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--energy-run', required=True)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--count', type=int, help='models to check (default: until --seconds)')
    parser.add_argument('--seconds', type=float, default=60.0)
    parser.add_argument('--jobs', type=int, default=os.cpu_count() or 2)
    parser.add_argument('--out', default='fuzz-models-out', help='where models and reproducers go')
    parser.add_argument('--opt-level', type=int, default=0)
    parser.add_argument('--dtype', choices=('f64', 'f32', 'bf16'), default='f64',
                        help='the precision the models are compiled in (f32: '
                        'compared within 1e-3; bf16: with --target cuda only, '
                        'the tensor-core and cuDNN plans)')
    parser.add_argument('--target', choices=('cpu', 'cuda', 'device-loops'),
                        default='cpu',
                        help='cuda: compile each model for the GPU and check its '
                        'PTX with ptxas instead of running it (no GPU needed); '
                        'device-loops: check the loops CUDA artifacts get, run '
                        'on the CPU (energy-run --check --device-loops)')
    parser.add_argument('--reduce-seconds', type=float, default=120.0,
                        help='time to reduce each failure (0: keep it whole)')
    parser.add_argument('--keep', action='store_true', help='keep every model checked')
    args = parser.parse_args()
    if args.dtype == 'bf16' and args.target != 'cuda':
        parser.error('--dtype bf16 needs --target cuda (CPU artifacts have no bf16)')
    if args.target == 'cuda' and not os.access(PTXAS, os.X_OK):
        print('skipped: no ptxas at %s (the CUDA toolkit is not installed)' % PTXAS)
        return 77
    os.makedirs(args.out, exist_ok=True)

    start = time.time()
    counts = {}
    failures = []
    last_progress = start

    def run_one(seed):
        model = ModelGenerator(seed).generate()
        path = os.path.join(args.out, 'model-%d.energy' % seed)
        outcome, detail = check(args.energy_run, model.source(), path, args.opt_level,
                                args.dtype, args.target)
        if outcome in ('ok', 'unusable') and not args.keep:
            os.remove(path)
        return seed, model, outcome, detail

    def finished():
        done = sum(counts.values())
        if args.count is not None:
            return done >= args.count
        return time.time() - start >= args.seconds

    seed = args.seed
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        pending = set()
        while True:
            while len(pending) < args.jobs and not finished() and (
                    args.count is None or seed < args.seed + args.count):
                pending.add(pool.submit(run_one, seed))
                seed += 1
            if not pending:
                break
            done, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                model_seed, model, outcome, detail = future.result()
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome not in ('ok', 'unusable'):
                    failures.append((model_seed, model, outcome, detail))
                    print('model %d: %s: %s' % (model_seed, outcome, detail), flush=True)
            if time.time() - last_progress > 10:
                last_progress = time.time()
                total = sum(counts.values())
                print('%d models in %.0f s (%.2f/s): %s' % (
                    total, last_progress - start, total / (last_progress - start),
                    ', '.join('%s %d' % kv for kv in sorted(counts.items()))), flush=True)

    elapsed = time.time() - start
    total = sum(counts.values())
    print('\n%d models in %.1f s: %.2f models/s on %d jobs' % (total, elapsed, total / elapsed,
                                                              args.jobs))
    for outcome in sorted(counts):
        print('  %-9s %d' % (outcome, counts[outcome]))

    if failures:
        print('\n%d failures:' % len(failures))
    for model_seed, model, outcome, detail in failures:
        path = os.path.join(args.out, 'model-%d.energy' % model_seed)
        if args.reduce_seconds > 0:
            model = reduce(args.energy_run, model, outcome, detail,
                           os.path.join(args.out, 'reduced-%d.energy' % model_seed),
                           args.opt_level, args.reduce_seconds, args.dtype, args.target)
            path = os.path.join(args.out, 'reduced-%d.energy' % model_seed)
        print('\n== model %d: %s: %s\n   reproducer: %s' % (model_seed, outcome, detail, path))
        print(model.source())
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
