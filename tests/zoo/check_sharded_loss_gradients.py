"""`energy-run --shard DIM --eval loss-grad` under mpirun against energy-run
alone, for every zoo model with a loss, sharded along each of its dims on
2 ranks (or the ranks given), in float64: the losses and the adjoint of
every tensor through the run must agree within TOLERANCE, or the sharded
run must be refused with a located error (`file:line:col: error:`). Each
case compiles the model in every process: minutes for the whole zoo, so
not part of `make test` (tests/e2e/sharding/sequence_sharding.py is).

Usage: check_sharded_loss_gradients.py ENERGY_RUN [--ranks R] [MODEL...]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'e2e', 'training'))
import safetensors_io  # noqa: E402
import zoo  # noqa: E402

MPIRUN = [shutil.which('mpirun') or 'mpirun', '--allow-run-as-root', '--oversubscribe',
          '--mca', 'btl', 'self,vader', '--mca', 'btl_vader_single_copy_mechanism', 'none']
# Float64 sums in another order (rows split over ranks, then summed in rank
# order); a row counted twice or lost shows at 1e-2.
TOLERANCE = 1e-12
LOCATED = re.compile(r'^.*:\d+:\d+: error: ', re.M)


def loss_gradients(energy_run, source, inputs, dims, ranks, dim):
    command = [energy_run, source, '--in', inputs, '--dtype', 'f64', '--opt-level', '0',
               '--eval', 'loss-grad', '--json']
    for key, value in dims.items():
        command += ['--dim', '%s=%d' % (key, value)]
    if dim:
        command = MPIRUN + ['-np', str(ranks)] + command + ['--shard', dim]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        return None, result.stderr
    return json.loads(result.stdout), None


def relative(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300)


def main(arguments):
    energy_run = arguments.pop(0)
    ranks = 2
    if arguments[:1] == ['--ranks']:
        ranks = int(arguments[1])
        arguments = arguments[2:]
    names = arguments or zoo.model_names()
    work = tempfile.mkdtemp(prefix='sharded_loss_')
    equal = refused = 0
    failures = []
    for name in names:
        model = zoo.load(name)
        if not hasattr(model, 'loss'):
            continue
        dims = dict(model.TEST_DIMS)
        arrays = model.make_inputs(dims, np.random.default_rng(3))
        for state, source in getattr(model, 'COPIES', {}).items():
            arrays[state] = arrays[source]
        inputs = os.path.join(work, name + '.safetensors')
        safetensors_io.write(inputs, arrays)
        alone, error = loss_gradients(energy_run, model.SOURCE, inputs, dims, 1, None)
        if alone is None:
            failures.append('%s alone: %s' % (name, error.strip()[-300:]))
            continue
        for dim, length in dims.items():
            if length < ranks:
                continue
            sharded, error = loss_gradients(energy_run, model.SOURCE, inputs, dims, ranks, dim)
            if sharded is None and not LOCATED.search(error):
                # mpirun may end the job before a refusing rank's message
                # reaches it (seen once in 67 cases): ask once more.
                sharded, error = loss_gradients(energy_run, model.SOURCE, inputs, dims,
                                                ranks, dim)
            if sharded is None:
                located = LOCATED.search(error)
                if located:
                    refused += 1
                    line = error[located.start():].splitlines()[0]
                    print('%-26s --shard %-3s refused: %s' % (name, dim, line[-150:]), flush=True)
                else:
                    failures.append('%s --shard %s: %s' % (name, dim, error.strip()[-300:]))
                continue
            adjoints = [key for key in alone if key.startswith('adjoint.')]
            if sorted(sharded) != sorted(alone):
                failures.append('%s --shard %s reports %s, alone %s'
                                % (name, dim, sorted(sharded), sorted(alone)))
                continue
            difference = max([relative(sharded[key]['data'], alone[key]['data'])
                              for key in adjoints] +
                             [relative(sharded['losses'][key], value)
                              for key, value in alone['losses'].items()])
            print('%-26s --shard %-3s %d adjoints, largest relative difference %.1e'
                  % (name, dim, len(adjoints), difference), flush=True)
            if difference <= TOLERANCE:
                equal += 1
            else:
                failures.append('%s --shard %s: difference %.2e' % (name, dim, difference))
    shutil.rmtree(work, ignore_errors=True)
    print('%d sharded loss gradients equal one process, %d refused at the model, %d failures'
          % (equal, refused, len(failures)))
    for failure in failures:
        print('FAILED: ' + failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
