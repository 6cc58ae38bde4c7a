#!/usr/bin/env python3
"""Compares a compiled artifact with the reference interpreter.

For one model: the energy, the gradient of every tensor, the state, optimizer
state and outputs after a fixed number of steps, each computed by
`energy-run ARTIFACT` (compiled) and `energy-run ARTIFACT --interp` (the
interpreter running the source the artifact embeds), from the same initial
values (--init random:SEED). Exits non-zero, naming the quantity, when they
differ by more than the tolerance. The compiled results on 1 and on 3 threads
must be the same bits.

Tolerances (relative, on the max norm of the difference over the max norm of
the interpreter's value, floored at 1e-3 so values near zero compare
absolutely):
  f64: 1e-10. Both compute in double precision; they differ only in the order
       of additions (the compiled code reassociates sums), each such
       difference being a few ulps times the number of terms (<= 10^3 here).
  f32: 2e-3. Single precision has a unit roundoff of 6e-8; sums of up to
       ~10^3 terms (the test dims) with exponentials of arguments of size ~10
       and a few dependent steps amplify it by up to ~10^4 in the worst case.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile


def read_safetensors(path):
    with open(path, 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        fmt = {'F32': 'f', 'F64': 'd'}[info['dtype']]
        count = (end - begin) // struct.calcsize(fmt)
        tensors[name] = list(struct.unpack('<%d%s' % (count, fmt), data[begin:end]))
    return tensors


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result.stdout


def compare(label, compiled, reference, tolerance):
    if len(compiled) != len(reference):
        sys.exit('%s: %d values compiled, %d interpreted' % (label, len(compiled), len(reference)))
    scale = max([abs(x) for x in reference] + [1e-3])
    error = max([abs(a - b) for a, b in zip(compiled, reference)] + [0.0])
    status = 'ok' if error <= tolerance * scale else 'MISMATCH'
    print('%-40s max|diff| %.3e  scale %.3e  %s' % (label, error, scale, status))
    if status != 'ok':
        sys.exit('%s differs: %.3e > %.1e * %.3e' % (label, error, tolerance, scale))


def main():
    energy_run, artifact, dtype, steps = sys.argv[1:5]
    rest = sys.argv[5:]
    wrt = rest[rest.index('--wrt') + 1] if '--wrt' in rest else None
    dims = [a for a in rest if a.startswith('--dim=')]
    tolerance = {'f64': 1e-10, 'f32': 2e-3}[dtype]
    common = dims + ['--init', 'random:7']
    both = [([energy_run, artifact], 'compiled'),
            ([energy_run, artifact, '--interp'], 'interpreted')]

    energies = [json.loads(run(cmd + common + ['--eval', 'energy', '--json']))['energy']
                for cmd, _ in both]
    compare('energy', [energies[0]], [energies[1]], tolerance)

    if wrt:
        grads = [json.loads(run(cmd + common + ['--eval', 'grad', '--json', '--wrt', wrt]))
                 for cmd, _ in both]
        for name in sorted(grads[1]):
            compare(name, grads[0][name]['data'], grads[1][name]['data'], tolerance)

    if int(steps) > 0:
        with tempfile.TemporaryDirectory() as directory:
            files = []
            for cmd, label in both:
                path = os.path.join(directory, label + '.safetensors')
                run(cmd + common + ['--eval', 'run', '--steps', steps, '--out', path])
                files.append(read_safetensors(path))
            if sorted(files[0]) != sorted(files[1]):
                sys.exit('run outputs differ in names: %s vs %s' % (sorted(files[0]), sorted(files[1])))
            for name in sorted(files[1]):
                compare('after %s steps: %s' % (steps, name), files[0][name], files[1][name], tolerance)

    compare_thread_counts(energy_run, artifact, common, wrt, steps)


def compare_thread_counts(energy_run, artifact, common, wrt, steps):
    """The compiled results on 1 and on 3 threads are the same bits."""
    with tempfile.TemporaryDirectory() as directory:
        results = []
        for threads in ('1', '3'):
            command = [energy_run, artifact, '--threads', threads] + common
            result = run(command + ['--eval', 'energy', '--json']).encode()
            evaluations = []
            if wrt:
                evaluations.append(['--eval', 'grad', '--wrt', wrt])
            if int(steps) > 0:
                evaluations.append(['--eval', 'run', '--steps', steps])
            for evaluation in evaluations:
                path = os.path.join(directory, 'threads%s.safetensors' % threads)
                run(command + evaluation + ['--out', path])
                with open(path, 'rb') as f:
                    result += f.read()
            results.append(result)
        if results[0] != results[1]:
            sys.exit('the compiled results on 1 and on 3 threads differ')
        print('%-40s identical' % 'results on 1 and 3 threads')


if __name__ == '__main__':
    main()
