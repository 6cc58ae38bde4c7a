#!/usr/bin/env python3
"""Loaders that never crash: sizes too large, and files that are no model.

Runs energy-run and energyc as a new user might, and checks that each run
exits non-zero with exactly the one-line error below on stderr (nothing on
stdout, no "LLVM ERROR", no stack dump):

- a compiled self-attention artifact with --dim N=1000000000000: tensor x,
  [N, D] = [10^12, 16] in f32, needs 64 TB; the runtime names it and its
  bytes before allocating anything, on the artifact, on the same model
  compiled in process (JIT) and on the reference interpreter (--interp,
  doubles: 128 TB, a located error);
- a --dim whose product overflows 64 bits, and one that is no int64;
- with the address space limited to 2 GiB (RLIMIT_AS), a 2 GB tensor,
  which fits the machine's memory but not the limit: calloc fails, and the
  runtime says "out of memory" for that tensor;
- a safetensors file, an empty file, a text file, a directory and a missing
  file given as the model to energy-run, a safetensors file and an artifact
  to energyc.

The machine's memory in the messages is RAM plus swap (/proc/meminfo), as
the runtime reads it (sysinfo).

Usage: loader_errors.py ENERGYC ENERGY_RUN ARTIFACT SOURCE
  ARTIFACT: self_attention.f32.so; SOURCE: examples/self_attention.energy
"""
import os
import re
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tools', 'python'))
from attention_numpy import write_safetensors  # noqa: E402

energyc, energy_run, artifact, source = sys.argv[1:5]
failures = []


def byte_count_text(count):
    """As the runtime's byteCountText writes a number of bytes."""
    text = '%d bytes' % count
    if count < 1000:
        return text
    value, unit = count / 1000, 0
    units = ['kB', 'MB', 'GB', 'TB', 'PB', 'EB']
    while value >= 999.95 and unit + 1 < len(units):
        value /= 1000
        unit += 1
    return text + ' (%.1f %s)' % (value, units[unit])


def machine_memory():
    """RAM plus swap, in bytes."""
    sizes = {}
    with open('/proc/meminfo') as meminfo:
        for line in meminfo:
            name, value = line.split(':')
            sizes[name] = int(value.split()[0]) * 1024
    return sizes['MemTotal'] + sizes['SwapTotal']


MEMORY = byte_count_text(machine_memory())


def run(command, address_space=None):
    def limit():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return subprocess.run(command, capture_output=True, text=True,
                          preexec_fn=limit)


def refused(command, expected, address_space=None):
    """`command` fails with stderr exactly `expected` (a string: one line;
    a compiled pattern: matched against the first line, others may follow
    as a located diagnostic's source line and caret)."""
    result = run(command, address_space)
    label = ' '.join(os.path.basename(part) if os.sep in part else part
                     for part in command)
    problems = []
    if result.returncode <= 0:
        problems.append('exit status %d, expected an error' % result.returncode)
    for crash in ('LLVM ERROR', 'Stack dump', 'PLEASE submit', 'terminate called'):
        if crash in result.stderr:
            problems.append('the output shows a crash (%s)' % crash)
    if result.stdout:
        problems.append('stdout is not empty: %r' % result.stdout[:200])
    if isinstance(expected, str):
        if result.stderr != expected + '\n':
            problems.append('stderr is\n    %r\n  expected\n    %r' % (
                result.stderr[:600], expected + '\n'))
    else:
        first = result.stderr.split('\n', 1)[0]
        if not expected.fullmatch(first):
            problems.append('the first line of stderr is\n    %r\n  expected '
                            'to match\n    %r' % (first, expected.pattern))
    print('%s: %s' % ('FAILED' if problems else 'ok', label))
    for problem in problems:
        print('  ' + problem)
    if problems:
        failures.append(label)


EITHER = ': expected a .energy source or a compiled artifact (.so)'

# Sizes: on the artifact, compiled in process, and on the interpreter.
huge = ['--dim', 'N=1000000000000', '--dim', 'D=16', '--init', 'random:1',
        '--eval', 'energy']
too_large = ("energy-run: error: tensor 'x' [N, D]: cannot allocate "
             "64000000000000 bytes (64.0 TB) for F32 [1000000000000, 16]: more "
             "than the memory this machine has, " + MEMORY)
refused([energy_run, artifact] + huge, too_large)
refused([energy_run, source] + huge, too_large)
refused([energy_run, artifact, '--interp'] + huge, re.compile(
    r".*self_attention\.energy:\d+:\d+: error: tensor 'x': cannot allocate "
    r"128000000000000 bytes \(128\.0 TB\) for F64 \[1000000000000, 16\]: more "
    r"than the memory this machine has, " + re.escape(MEMORY)))
refused([energy_run, artifact, '--dim', 'N=4611686018427387904', '--dim',
         'D=16', '--init', 'random:1', '--eval', 'grad'],
        "energy-run: error: tensor 'x' [N, D]: cannot allocate F32 "
        "[4611686018427387904, 16]: its size in bytes overflows 64 bits")
refused([energy_run, artifact, '--dim', 'N=99999999999999999999', '--dim',
         'D=16'],
        'energy-run: error: --dim N=99999999999999999999: expected NAME=VALUE '
        'with a positive integer')
# 2 GiB of address space, and a 2 GB tensor x: within the machine's memory,
# beyond the limit (energy-run maps some hundred MB before it allocates).
# The same run with N = 2 works under the same limit.
ADDRESS_SPACE = 2 * 2**30
if machine_memory() >= 5 * 10**9:
    small = run([energy_run, artifact, '--dim', 'N=2', '--dim', 'D=16',
                 '--init', 'random:1', '--eval', 'energy'], ADDRESS_SPACE)
    if small.returncode != 0:
        print('FAILED: N=2 under the address-space limit: ' + small.stderr)
        failures.append('N=2 under the address-space limit')
    refused([energy_run, artifact, '--dim', 'N=31250000', '--dim', 'D=16',
             '--init', 'random:1', '--eval', 'energy'],
            "energy-run: error: tensor 'x': cannot allocate 2000000000 bytes "
            "(2.0 GB) for F32 [31250000, 16]: out of memory", ADDRESS_SPACE)
else:
    print('skipped: the address-space limit (this machine has less than 5 GB)')

# Files that are no model.
with tempfile.TemporaryDirectory() as directory:
    def path(name):
        return os.path.join(directory, name)
    write_safetensors(path('w.safetensors'), {'w': [[1.0, 2.0], [3.0, 4.0]]})
    open(path('empty.energy'), 'w').close()
    with open(path('notes.txt'), 'w') as notes:
        notes.write('hello world\n')
    os.mkdir(path('models'))
    for name, what in [
            ('w.safetensors', 'a safetensors file (tensors, not a model)'),
            ('empty.energy', 'an empty file'),
            ('notes.txt', 'text that does not begin with `model`'),
            ('models', 'a directory')]:
        refused([energy_run, path(name), '--eval', 'energy'],
                'energy-run: error: %s: %s%s' % (path(name), what, EITHER))
    refused([energy_run, path('missing.so')],
            'energy-run: error: %s: cannot read: No such file or directory'
            % path('missing.so'))
    refused([energyc, path('w.safetensors'), '-o', path('w.so')],
            'energyc: error: %s: a safetensors file (tensors, not a model): '
            'expected a .energy source' % path('w.safetensors'))
    refused([energyc, artifact, '-o', path('again.so')],
            'energyc: error: %s: a compiled artifact: expected a .energy source'
            % artifact)

if failures:
    sys.exit('%d of the runs above failed' % len(failures))
print('every run failed as it should, in one line')
