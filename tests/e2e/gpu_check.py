#!/usr/bin/env python3
"""CUDA artifacts against the reference interpreter, on a machine with a GPU.

The GPU machines have CUDA and Python but no MLIR, so the check has two
halves:

  gpu_check.py prepare BUILD_DIR BUNDLE
      (here, with the compiler) compiles every case of cases.txt with
      `energyc --target cuda` in f32, f64 and bf16, computes the interpreter's
      energy, gradients and state after 3 steps (energy-run --interp, from
      --init random:7), and puts them with energy-exec (the runner that
      needs only the runtime) and these scripts into BUNDLE;
  gpu_check.py check BUNDLE [REPORT.json]
      (on the GPU machine) runs each CUDA artifact with energy-exec from the
      same initial values and compares, as compare_with_interpreter.py does
      and with its tolerances (f64 1e-10, f32 2e-3, relative to the max norm
      of the interpreter's value). The GPU's libdevice exp and log are within
      2 ulp, and its sums are reassociated like the CPU's, so the CPU bounds
      hold. bf16 artifacts round the operands of contractions and products
      to 8 significant bits (relative 2^-9 = 2e-3 each): a score, a weight
      and a value each carry such an error, and 3 steps compound them, so
      they get 3e-2 (about 15 roundings' worth). Exits non-zero when a case
      differs or fails.

The zoo's models (tests/zoo, at their TEST_DIMS) are checked as the
examples are. Loss gradients through the dynamics are checked the same way:
every model of tests/e2e/loss_models, examples/training and the zoo, compiled for CUDA in f32 and f64,
`--eval loss-grad` (the forward run, the losses and the backward program on
the GPU, contractions the GPU kernels do not take on the host) against the
interpreter's losses and adjoints, with the tolerances above (the backward
pass is a few times as deep as the forward run, well inside them, as
loss_gradients.py argues for the CPU).
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_with_interpreter import read_safetensors  # noqa: E402

TOLERANCE = {'f64': 1e-10, 'f32': 2e-3, 'bf16': 3e-2}
DTYPES = ('f32', 'f64', 'bf16')
STEPS = '3'


def cases():
    """(name, arguments) of every example of cases.txt, then of every zoo
    model (tests/zoo, at its TEST_DIMS) as `prepare` listed them in the
    bundle, which holds no sources."""
    with open(os.path.join(HERE, 'cases.txt')) as f:
        for line in f:
            if line[:1].isalpha():
                model, arguments = line.strip().split('|')
                yield model, arguments.split()
    listed = os.path.join(HERE, 'zoo_cases.json')
    if os.path.exists(listed):
        with open(listed) as f:
            for name, arguments in json.load(f):
                yield name, arguments


def zoo_models():
    """(case name, source, dims arguments, has a loss) of every zoo model."""
    sys.path.insert(0, os.path.join(HERE, '..', 'zoo'))
    import zoo
    for name in zoo.model_names():
        model = zoo.load(name)
        dims = ['--dim=%s=%d' % item for item in model.TEST_DIMS.items()]
        yield 'zoo-' + name, model.SOURCE, dims, hasattr(model, 'loss')


def source_of(model):
    return os.path.join(HERE, '..', '..', 'examples', model + '.energy')


LOSS_DTYPES = ('f32', 'f64')
LOSS_DIMS = ['--dim=N=4', '--dim=D=3']
TRAINING_DIMS = {
    'fem_argmax': ['--dim=B=3', '--dim=N=4', '--dim=D=3'],
    'softmax_argmax': ['--dim=B=3', '--dim=N=4', '--dim=D=3'],
    'char_transformer': ['--dim=B=2', '--dim=T=4', '--dim=V=5', '--dim=D=8', '--dim=H=2',
                         '--dim=M=6'],
}


def loss_cases():
    """(name, source file, dims) of every model with a loss."""
    models = os.path.join(HERE, 'loss_models')
    for file in sorted(os.listdir(models)):
        if file.endswith('.energy'):
            yield 'loss-' + file[:-7], os.path.join(models, file), LOSS_DIMS
    training = os.path.join(HERE, '..', '..', 'examples', 'training')
    for model, dims in sorted(TRAINING_DIMS.items()):
        yield 'loss-' + model, os.path.join(training, model + '.energy'), dims
    for name, source, dims, has_loss in zoo_models():
        if has_loss:
            yield 'loss-' + name, source, dims


def loss_arguments(dims):
    return dims + ['--init', 'random:5', '--eval', 'loss-grad', '--json']


def run(command, timeout=None):
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError('%s\ndid not finish in %d s' % (' '.join(command), timeout))
    if result.returncode != 0:
        raise RuntimeError('%s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result.stdout


def evaluations(arguments, out_prefix):
    """The three evaluations: (name, extra arguments, output file or None)."""
    dims = [a for a in arguments if a.startswith('--dim=')]
    wrt = arguments[arguments.index('--wrt') + 1:][:1] if '--wrt' in arguments else []
    common = dims + ['--init', 'random:7']
    result = [('energy', common + ['--eval', 'energy', '--json'], None)]
    if wrt:
        result.append(('grad', common + ['--eval', 'grad', '--wrt', wrt[0], '--out',
                                         out_prefix + '.grad.safetensors'],
                       out_prefix + '.grad.safetensors'))
    result.append(('run', common + ['--eval', 'run', '--steps', STEPS, '--out',
                                    out_prefix + '.run.safetensors'],
                   out_prefix + '.run.safetensors'))
    return result


def prepare(build_dir, bundle):
    bin_dir = os.path.join(build_dir, 'bin')
    for sub in ('bin', 'artifacts', 'references', 'scripts'):
        os.makedirs(os.path.join(bundle, sub), exist_ok=True)
    shutil.copy(os.path.join(bin_dir, 'energy-exec'), os.path.join(bundle, 'bin'))
    for name in ('gpu_check.py', 'compare_with_interpreter.py', 'cases.txt'):
        shutil.copy(os.path.join(HERE, name), os.path.join(bundle, 'scripts'))
    zoo = [(name, source, dims) for name, source, dims, _ in zoo_models()]
    with open(os.path.join(bundle, 'scripts', 'zoo_cases.json'), 'w') as f:
        json.dump([[name, dims] for name, _, dims in zoo], f)
    sources = {name: source for name, source, _ in zoo}
    for model, arguments in list(cases()) + [(name, dims) for name, _, dims in zoo]:
        for dtype in DTYPES:
            artifact = os.path.join(bundle, 'artifacts', '%s.%s.so' % (model, dtype))
            run([os.path.join(bin_dir, 'energyc'), '--target', 'cuda', '--cpu', 'x86-64-v3',
                 '--dtype', dtype, sources.get(model) or source_of(model), '-o', artifact])
            prefix = os.path.join(bundle, 'references', '%s.%s' % (model, dtype))
            for name, extra, _ in evaluations(arguments, prefix):
                output = run([os.path.join(bin_dir, 'energy-run'), artifact, '--interp'] + extra)
                if name == 'energy':
                    with open(prefix + '.energy.json', 'w') as f:
                        f.write(output)
        print('prepared', model)
    listed = []
    for name, source, dims in loss_cases():
        listed.append([name, dims])
        for dtype in LOSS_DTYPES:
            artifact = os.path.join(bundle, 'artifacts', '%s.%s.so' % (name, dtype))
            run([os.path.join(bin_dir, 'energyc'), '--target', 'cuda', '--cpu', 'x86-64-v3',
                 '--dtype', dtype, source, '-o', artifact])
            output = run([os.path.join(bin_dir, 'energy-run'), artifact, '--interp'] +
                         loss_arguments(dims))
            with open(os.path.join(bundle, 'references', '%s.%s.json' % (name, dtype)),
                      'w') as f:
                f.write(output)
        print('prepared', name)
    with open(os.path.join(bundle, 'scripts', 'loss_cases.json'), 'w') as f:
        json.dump(listed, f)


def relative_error(compiled, reference):
    if len(compiled) != len(reference):
        return float('inf'), 0.0
    scale = max([abs(x) for x in reference] + [1e-3])
    error = max([abs(a - b) for a, b in zip(compiled, reference)] + [0.0])
    return error, scale


def loss_pairs(ours, theirs):
    """{label: (compiled, interpreted)} of the losses and adjoints of two
    `--eval loss-grad --json` reports, which must name the same tensors."""
    if ours['steps'] != theirs['steps']:
        raise RuntimeError('steps taken: %s, interpreter %s' % (ours['steps'], theirs['steps']))
    adjoints = sorted(k for k in theirs if k.startswith('adjoint.'))
    if not adjoints or adjoints != sorted(k for k in ours if k.startswith('adjoint.')):
        raise RuntimeError('adjoints %s, interpreter %s' % (
            sorted(k for k in ours if k.startswith('adjoint.')), adjoints))
    pairs = {'loss ' + k: ([ours['losses'][k]], [v]) for k, v in theirs['losses'].items()}
    pairs.update({k: (ours[k]['data'], theirs[k]['data']) for k in adjoints})
    return pairs


def all_cases():
    """(model, dtype, cases.txt arguments or None, loss dims or None) of
    every check: the examples' three evaluations, then the loss gradients
    (as `prepare` listed them in the bundle, which holds no sources)."""
    for model, arguments in cases():
        for dtype in DTYPES:
            yield model, dtype, arguments, None
    with open(os.path.join(HERE, 'loss_cases.json')) as f:
        for name, dims in json.load(f):
            for dtype in LOSS_DTYPES:
                yield name, dtype, None, dims


def check_case(bundle, model, dtype, arguments, loss_dims):
    """One case's report entry: its worst relative difference from the
    interpreter, and 'ok', 'MISMATCH' or 'FAILED' with what differed."""
    energy_exec = os.path.join(bundle, 'bin', 'energy-exec')
    artifact = os.path.join(bundle, 'artifacts', '%s.%s.so' % (model, dtype))
    reference = os.path.join(bundle, 'references', '%s.%s' % (model, dtype))
    prefix = os.path.join(bundle, 'gpu-outputs', '%s.%s' % (model, dtype))
    worst, status, detail = 0.0, 'ok', ''
    start = time.time()
    try:
        if loss_dims is not None:
            output = run([energy_exec, artifact, '--device', 'cuda'] +
                         loss_arguments(loss_dims), timeout=60)
            with open(reference + '.json') as f:
                comparisons = [loss_pairs(json.loads(output), json.load(f))]
        else:
            comparisons = []
            for name, extra, out in evaluations(arguments, prefix):
                output = run([energy_exec, artifact, '--device', 'cuda'] + extra, timeout=60)
                if name == 'energy':
                    with open(reference + '.energy.json') as f:
                        comparisons.append({'energy': ([json.loads(output)['energy']],
                                                       [json.load(f)['energy']])})
                    continue
                # The forward state and outputs: the backward program's
                # buffers (zeros here) depend on how it was compiled (a
                # change of variables moves a state's cotangent to its image).
                ours, theirs = ({t: v for t, v in read_safetensors(path).items()
                                 if not t.endswith(('.adjoint', '.cotangent'))}
                                for path in (out, reference + '.%s.safetensors' % name))
                if sorted(ours) != sorted(theirs):
                    raise RuntimeError('%s: tensors %s, interpreter %s' % (
                        name, sorted(ours), sorted(theirs)))
                comparisons.append({'%s %s' % (name, t): (ours[t], theirs[t])
                                    for t in theirs})
        for pairs in comparisons:
            for label, (a, b) in pairs.items():
                error, scale = relative_error(a, b)
                worst = max(worst, error / scale)
                if error > TOLERANCE[dtype] * scale:
                    status = 'MISMATCH'
                    detail += '%s: %.3e > %.0e * %.3e; ' % (label, error, TOLERANCE[dtype],
                                                           scale)
    except RuntimeError as error:
        status, detail = 'FAILED', str(error).strip().splitlines()[-1]
    return {'model': model, 'dtype': dtype, 'status': status, 'worst_relative': worst,
            'seconds': time.time() - start, 'detail': detail}


def check(bundle, report_path=None):
    """Every case (or those whose name contains ENERGY_GPU_CHECK_MATCH, and
    whose dtype is among the comma-separated ENERGY_GPU_CHECK_DTYPES),
    ENERGY_GPU_CHECK_JOBS (default 4) at a time on the one GPU (each a short
    process of its own), reported in order."""
    os.makedirs(os.path.join(bundle, 'gpu-outputs'), exist_ok=True)
    jobs = int(os.environ.get('ENERGY_GPU_CHECK_JOBS', '4'))
    match = os.environ.get('ENERGY_GPU_CHECK_MATCH', '')
    dtypes = os.environ.get('ENERGY_GPU_CHECK_DTYPES', '')
    dtypes = dtypes.split(',') if dtypes else DTYPES + LOSS_DTYPES
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(check_case, bundle, *case) for case in all_cases()
                   if match in case[0] and case[1] in dtypes]
        report = []
        for future in futures:
            entry = future.result()
            report.append(entry)
            print('%-34s %-4s  worst relative %.2e  %5.1f s  %s %s' % (
                entry['model'], entry['dtype'], entry['worst_relative'], entry['seconds'],
                entry['status'], entry['detail']), flush=True)
    failures = sum(entry['status'] != 'ok' for entry in report)
    if report_path:
        with open(report_path, 'w') as f:
            json.dump(report, f, indent=1)
    print('%d of %d cases match the interpreter' % (len(report) - failures, len(report)))
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'prepare':
        prepare(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == 'check':
        return check(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    sys.exit(__doc__)


if __name__ == '__main__':
    sys.exit(main())
