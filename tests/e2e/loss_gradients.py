#!/usr/bin/env python3
"""Compares a compiled loss gradient through the dynamics with the interpreter.

For one model of tests/e2e/loss_models: `energy-exec ARTIFACT --eval
loss-grad` (the compiled forward run, losses and backward program under the
checkpoint schedule, through the runner without the compiler) against `energy-run ARTIFACT --interp --eval loss-grad`
(the interpreter running the embedded source's backward program), from the
same initial values. The interpreter's backward program is itself checked
against central finite differences (tests/unit/compiler/Dynamics/LossGradientTest);
this checks that compiled kernels run it as the interpreter does. Each loss
and each adjoint must agree within compare_with_interpreter.py's tolerances
(f64 1e-10, f32 2e-3 relative, for the reasons given there: the backward pass
is a few times as deep as the forward run, well inside that margin). The
compiled adjoints with checkpoints, with every step stored
(--store-all-steps), and on 1 and 3 threads must be the same bits.
Usage: loss_gradients.py ENERGY_RUN ENERGY_EXEC ARTIFACT DTYPE [--dim=NAME=SIZE]...
"""
import json
import os
import sys
import tempfile

from compare_with_interpreter import compare, run


def compare_reports(report, interpreted, tolerance):
    """Each loss and adjoint of a `--eval loss-grad --json` report against the
    interpreter's, within `tolerance`; the same steps and adjoint names."""
    if report['steps'] != interpreted['steps']:
        sys.exit('steps taken differ: %s vs %s' % (report['steps'], interpreted['steps']))
    for name in sorted(interpreted['losses']):
        compare('loss ' + name, [report['losses'][name]], [interpreted['losses'][name]],
                tolerance)
    adjoints = sorted(k for k in interpreted if k.startswith('adjoint.'))
    if adjoints != sorted(k for k in report if k.startswith('adjoint.')):
        sys.exit('adjoints differ in names')
    if not adjoints:
        sys.exit('no adjoints to compare')
    for name in adjoints:
        compare(name, report[name]['data'], interpreted[name]['data'], tolerance)


def out_files(commands):
    """The bytes each command writes with `--out FILE`."""
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for command in commands:
            path = os.path.join(directory, '%d.safetensors' % len(results))
            run(command + ['--out', path])
            with open(path, 'rb') as f:
                results.append(f.read())
    return results


def main():
    energy_run, energy_exec, artifact, dtype = sys.argv[1:5]
    dims = sys.argv[5:]
    tolerance = {'f64': 1e-10, 'f32': 2e-3}[dtype]
    common = dims + ['--init', 'random:5', '--eval', 'loss-grad']

    def compiled(threads, *extra):
        return ['env', 'ENERGY_NUM_THREADS=' + threads, energy_exec, artifact] + list(extra)

    interpreted = json.loads(run([energy_run, artifact, '--interp', '--json'] + common))
    compare_reports(json.loads(run(compiled('1', '--json') + common)), interpreted, tolerance)

    results = out_files([command + common for command in (
        compiled('1'), compiled('3'), compiled('1', '--store-all-steps'))])
    if results[0] != results[1]:
        sys.exit('the compiled adjoints on 1 and on 3 threads differ')
    if results[0] != results[2]:
        sys.exit('checkpointed and fully stored backward runs differ')
    print('%-40s identical' % 'on 1 and 3 threads, checkpointed or not')


if __name__ == '__main__':
    main()
