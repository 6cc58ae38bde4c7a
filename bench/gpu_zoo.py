#!/usr/bin/env python3
"""The zoo (tests/zoo) on a GPU: each model's CUDA artifact against its own
PyTorch implementation on the same GPU, at its BENCH_DIMS, in float32.

  gpu_zoo.py prepare BUILD_DIR BUNDLE
      (here, with the compiler) compiles every zoo model for CUDA at its
      BENCH_DIMS into BUNDLE/artifacts/zoo_NAME.so and copies the models'
      PyTorch files and zoo.py into BUNDLE/scripts/zoo;
  gpu_zoo.py run ENERGY_EXEC BUNDLE [REPS] [--device cuda|cpu] [--models A,B]
                 [--modes inference,training]
      (on the GPU machine) for each model: the inputs of make_inputs(rng 7);
      inference (STEPS steps of the dynamics: ours `energy-exec --eval run`,
      PyTorch autograd of the energy at each step) and, for a model with a
      loss, the training step (ours `--eval loss-grad --store-all-steps`,
      PyTorch the run with create_graph and loss.backward()). Ours is timed
      by `energy-exec --bench REPS` (median ms of a whole call, inputs in
      place), PyTorch by time_torch (median ms, waiting for the GPU after
      each call). The final states and the trained tensors' loss gradients
      are compared with PyTorch's (relative to their largest entry). Prints
      one JSON object; progress on stderr. `--device cpu` runs the same on
      the host with CPU artifacts (a check of this script without a GPU).
      With ENERGY_BENCH_TRACE=DIR, DIR/NAME.trace gets the ENERGY_CUDA_TRACE
      of a warm inference call.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO_SOURCES = os.path.join(HERE, '..', 'tests', 'zoo')

# As bench/zoo_models.py: f32 through up to 20 dependent steps.
TOLERANCE = 2e-2


def dim_arguments(dims):
    return ['--dim=%s=%d' % item for item in dims.items()]


def prepare(build_dir, bundle, target='cuda'):
    sys.path.insert(0, ZOO_SOURCES)
    import zoo
    scripts = os.path.join(bundle, 'scripts', 'zoo')
    os.makedirs(os.path.join(scripts, 'models'), exist_ok=True)
    os.makedirs(os.path.join(bundle, 'artifacts'), exist_ok=True)
    shutil.copy(os.path.join(ZOO_SOURCES, 'zoo.py'), scripts)
    for name in zoo.model_names():
        model = zoo.load(name)
        shutil.copy(os.path.join(ZOO_SOURCES, 'models', name + '.py'),
                    os.path.join(scripts, 'models'))
        shutil.copy(model.SOURCE, os.path.join(scripts, 'models'))
        command = [os.path.join(build_dir, 'bin', 'energyc'), '--target', target,
                   '--cpu', 'x86-64-v3', model.SOURCE, '-o',
                   os.path.join(bundle, 'artifacts', 'zoo_%s.so' % name)]
        subprocess.run(command + dim_arguments(model.BENCH_DIMS), check=True)
        print('prepared zoo', name, file=sys.stderr)


def exec_json(command, timeout):
    result = subprocess.run(command + ['--json'], capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError('%s\n%s%s' % (' '.join(command), result.stdout, result.stderr[-2000:]))
    return json.loads(result.stdout)


def largest_difference(ours, theirs):
    """max over the tensors named in both of difference(ours, theirs)."""
    from gpu_attention import difference
    names = [n for n in theirs if n in ours]
    if not names:
        raise RuntimeError('nothing to compare: ours %s, PyTorch %s' % (sorted(ours),
                                                                         sorted(theirs)))
    return max(difference(np.asarray(ours[n]).ravel(),
                          theirs[n].detach().float().cpu().numpy().ravel()) for n in names)


def run_model(model, arrays, energy_exec, bundle, reps, device, directory, modes):
    import zoo
    from compare_with_interpreter import read_safetensors
    from gpu_attention import time_torch, write_safetensors
    name, dims = model.NAME, model.BENCH_DIMS
    inputs = os.path.join(directory, name + '.safetensors')
    write_safetensors(inputs, arrays)
    artifact = os.path.join(bundle, 'artifacts', 'zoo_%s.so' % name)
    common = [energy_exec, artifact, '--in', inputs] + dim_arguments(dims) + (
        ['--device', 'cuda'] if device == 'cuda' else [])
    entry = {'name': name, 'dims': dims, 'steps': model.STEPS}
    inference, training = zoo.torch_steps(model, arrays, device)

    final = os.path.join(directory, name + '.final.safetensors')
    subprocess.run(common + ['--eval', 'run', '--out', final], check=True, capture_output=True,
                   timeout=120)
    if os.environ.get('ENERGY_BENCH_TRACE'):  # a traced warm call, for a closer look
        traced = subprocess.run(common + ['--eval', 'run', '--bench', '1'], capture_output=True,
                                text=True, timeout=300,
                                env=dict(os.environ, ENERGY_CUDA_TRACE='1'))
        with open(os.path.join(os.environ['ENERGY_BENCH_TRACE'], name + '.trace'), 'w') as f:
            f.write(traced.stderr)
    theirs, torch_ms = time_torch(inference, reps)
    entry['inference'] = {
        'difference': largest_difference(read_safetensors(final), theirs),
        'ours_ms': exec_json(common + ['--eval', 'run', '--bench', str(reps)], 300)['median_ms'],
        'torch_ms': torch_ms}
    if hasattr(model, 'loss') and 'training' in modes:
        training_command = common + ['--eval', 'loss-grad', '--store-all-steps']
        report = exec_json(training_command, 300)
        ours = {k[len('adjoint.'):]: v['data'] for k, v in report.items()
                if k.startswith('adjoint.')}
        theirs, torch_ms = time_torch(training, reps)
        entry['training'] = {
            'difference': largest_difference(ours, theirs),
            'ours_ms': exec_json(training_command + ['--bench', str(reps)], 300)['median_ms'],
            'torch_ms': torch_ms}
    for mode in ('inference', 'training'):
        if mode in entry:
            row = entry[mode]
            row['ratio'] = row['torch_ms'] / row['ours_ms']
            row['agrees'] = row['difference'] <= TOLERANCE
            print('%-26s %-9s ours %9.3f ms  PyTorch %9.3f ms  ratio %6.2f  difference %.1e' % (
                name, mode, row['ours_ms'], row['torch_ms'], row['ratio'], row['difference']),
                file=sys.stderr, flush=True)
    return entry


def run(energy_exec, bundle, reps, device, wanted=None, modes=('inference', 'training')):
    import torch
    sys.path.insert(0, os.path.join(bundle, 'scripts', 'zoo'))
    sys.path.insert(0, os.path.join(bundle, 'scripts'))
    import zoo
    # Every model's inputs first: make_inputs may use torch's factories
    # (on the CPU: it returns numpy arrays).
    chosen = []
    for name in zoo.model_names():
        if not wanted or name in wanted:
            model = zoo.load(name)
            made = model.make_inputs(model.BENCH_DIMS, np.random.default_rng(7))
            chosen.append((model, {k: np.asarray(v, dtype=np.float32) for k, v in made.items()}))
    if device == 'cuda':
        # The models build masks and constants with torch's factories.
        torch.set_default_device('cuda')
    torch.set_num_threads(1)
    models, failures = [], 0
    with tempfile.TemporaryDirectory() as directory:
        for model, arrays in chosen:
            name = model.NAME
            try:
                models.append(run_model(model, arrays, energy_exec, bundle, reps, device,
                                        directory, modes))
            except Exception as error:  # one model's failure is reported, the rest run
                failures += 1
                message = str(error)[-3000:]
                models.append({'name': name, 'error': message})
                print('%s FAILED: %s' % (name, message), file=sys.stderr, flush=True)

    def geomean(mode):
        ratios = [m[mode]['ratio'] for m in models if mode in m]
        return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None

    print(json.dumps({'benchmark': 'zoo on the GPU', 'device': device, 'reps': reps,
                      'geomean_inference': geomean('inference'),
                      'geomean_training': geomean('training'), 'failures': failures,
                      'models': models}))
    return failures


def main():
    arguments = sys.argv[1:]
    options = {'--device': 'cuda', '--models': '', '--modes': 'inference,training'}
    for flag in options:
        if flag in arguments:
            index = arguments.index(flag)
            options[flag] = arguments[index + 1]
            del arguments[index:index + 2]
    device = options['--device']
    wanted = [n for n in options['--models'].split(',') if n]
    modes = options['--modes'].split(',')
    if arguments[:1] == ['prepare'] and len(arguments) == 3:
        prepare(arguments[1], arguments[2], 'cuda' if device == 'cuda' else 'cpu')
    elif arguments[:1] == ['run'] and len(arguments) in (3, 4):
        reps = int(arguments[3]) if len(arguments) == 4 else 5
        sys.exit(1 if run(arguments[1], arguments[2], reps, device, wanted, modes) else 0)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
