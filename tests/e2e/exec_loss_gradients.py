#!/usr/bin/env python3
"""energy-exec --eval loss-grad against energy-run's, for one loss model.

energy-exec (the runtime alone) and energy-run evaluate a compiled artifact's
losses and their gradient through the run (Session::backward) from the same
initial values. Their reports must be the same bytes: the text (losses,
then each adjoint with its values), the JSON, and the adjoints written with
--out; so must energy-exec's with every step stored instead of checkpoints.
The JSON's losses and adjoints must also agree with the reference
interpreter's (energy-run --interp) within compare_with_interpreter.py's f64
tolerance, 1e-10 relative, so a report that is the same in both tools and
wrong in both is caught. Also: --bench times the evaluation, and an unknown
--eval names loss-grad among the evaluations.
Usage: exec_loss_gradients.py ENERGY_EXEC ENERGY_RUN ARTIFACT(f64) [--dim=N=V]...
"""
import json
import subprocess
import sys

from compare_with_interpreter import run
from loss_gradients import compare_reports, out_files


def main():
    energy_exec, energy_run, artifact = sys.argv[1:4]
    common = sys.argv[4:] + ['--init', 'random:5', '--eval', 'loss-grad']
    for extra in ([], ['--json']):
        ours = run([energy_exec, artifact] + common + extra)
        theirs = run([energy_run, artifact] + common + extra)
        if ours != theirs:
            sys.exit('energy-exec %s prints otherwise than energy-run:\n%s\n--- energy-run:\n%s'
                     % (' '.join(extra), ours, theirs))
    report = json.loads(ours)
    if not report['losses'] or not any(k.startswith('adjoint.') for k in report):
        sys.exit('nothing to compare: %s' % ours)
    if not any(any(x != 0 for x in report[k]['data']) for k in report if k.startswith('adjoint.')):
        sys.exit('every adjoint is zero: nothing is compared')
    print('energy-exec prints what energy-run prints (text and JSON): losses %s, %d adjoints'
          % (report['losses'], sum(k.startswith('adjoint.') for k in report)))

    interpreted = json.loads(run([energy_run, artifact, '--interp', '--json'] + common))
    compare_reports(report, interpreted, 1e-10)

    files = out_files([[tool, artifact] + common + extra for tool, extra in (
        (energy_exec, []), (energy_run, []), (energy_exec, ['--store-all-steps']))])
    if files[0] != files[1]:
        sys.exit('energy-exec and energy-run write different adjoints with --out')
    if files[0] != files[2]:
        sys.exit('energy-exec: checkpointed and fully stored backward runs differ')
    print('%-40s identical' % '--out files, checkpointed or not')

    bench = run([energy_exec, artifact] + common + ['--bench', '2'])
    if not bench.startswith('bench loss-grad: median '):
        sys.exit('--bench --eval loss-grad printed: %s' % bench)
    result = subprocess.run([energy_exec, artifact] + sys.argv[4:] +
                            ['--init', 'random:5', '--eval', 'loss-grads'],
                            capture_output=True, text=True)
    if result.returncode != 1 or 'expected energy, grad, loss-grad, run or step' not in result.stderr:
        sys.exit('--eval loss-grads: %s' % result.stderr)


if __name__ == '__main__':
    main()
