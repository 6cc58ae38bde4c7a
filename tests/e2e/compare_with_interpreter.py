#!/usr/bin/env python3
"""Compares a compiled artifact with the reference interpreter.

For one model: the energy, the gradient of every tensor, the state, optimizer
state and outputs after a fixed number of steps, each computed by
`energy-exec ARTIFACT` (the compiled kernels, through the runner that links
only the runtime: it starts in milliseconds) and `energy-run ARTIFACT
--interp` (the interpreter running the source the artifact embeds), from the
same initial values (--init random:SEED). Exits non-zero, naming the
quantity, when they differ by more than the tolerance. The compiled results
on 1 and on 3 threads (ENERGY_NUM_THREADS) must be the same bits.

Usage: compare_with_interpreter.py ENERGY_RUN ENERGY_EXEC ARTIFACT DTYPE STEPS
       [--dim=NAME=SIZE]... [--wrt a,b]

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
        return parse_safetensors(f.read())


def parse_safetensors(contents):
    (length,) = struct.unpack('<Q', contents[:8])
    header = json.loads(contents[8:8 + length])
    data = contents[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        fmt = {'F32': 'f', 'F64': 'd'}[info['dtype']]
        count = (end - begin) // struct.calcsize(fmt)
        tensors[name] = list(struct.unpack('<%d%s' % (count, fmt), data[begin:end]))
    return tensors


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True,
                            env=None if env is None else dict(os.environ, **env))
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
    energy_run, energy_exec, artifact, dtype, steps = sys.argv[1:6]
    rest = sys.argv[6:]
    wrt = rest[rest.index('--wrt') + 1] if '--wrt' in rest else None
    dims = [a for a in rest if a.startswith('--dim=')]
    tolerance = {'f64': 1e-10, 'f32': 2e-3}[dtype]
    common = dims + ['--init', 'random:7']
    evaluations = [('energy', ['--eval', 'energy', '--json'], False)]
    if wrt:
        evaluations.append(('grad', ['--eval', 'grad', '--wrt', wrt], True))
    if int(steps) > 0:
        evaluations.append(('run', ['--eval', 'run', '--steps', steps], True))
    with tempfile.TemporaryDirectory() as directory:
        def evaluate(command, env, label, arguments, to_file):
            if not to_file:
                return run(command + common + arguments, env).encode()
            path = os.path.join(directory, label + '.safetensors')
            run(command + common + arguments + ['--out', path], env)
            with open(path, 'rb') as f:
                return f.read()

        def compiled(threads, what, arguments, to_file):
            return evaluate([energy_exec, artifact], {'ENERGY_NUM_THREADS': threads},
                            '%s-threads%s' % (what, threads), arguments, to_file)

        for what, arguments, to_file in evaluations:
            one_thread = compiled('1', what, arguments, to_file)
            interpreted = evaluate([energy_run, artifact, '--interp'], None,
                                   what + '-interpreted', arguments, to_file)
            compare_results(what, steps, one_thread, interpreted, tolerance)
            if compiled('3', what, arguments, to_file) != one_thread:
                sys.exit('the compiled %s on 1 and on 3 threads differ' % what)
    print('%-40s identical' % 'results on 1 and 3 threads')


def compare_results(what, steps, compiled, interpreted, tolerance):
    """Compares one evaluation's compiled and interpreted results."""
    if what == 'energy':
        energies = [json.loads(result)['energy'] for result in (compiled, interpreted)]
        compare('energy', [energies[0]], [energies[1]], tolerance)
        return
    files = [parse_safetensors(result) for result in (compiled, interpreted)]
    if sorted(files[0]) != sorted(files[1]):
        sys.exit('%s outputs differ in names: %s vs %s' % (what, sorted(files[0]), sorted(files[1])))
    for name in sorted(files[1]):
        label = name if what == 'grad' else 'after %s steps: %s' % (steps, name)
        compare(label, files[0][name], files[1][name], tolerance)


if __name__ == '__main__':
    main()
