#!/usr/bin/env python3
"""Out-of-tree plugins, built against the installed framework.

Installs the build into a fresh prefix, builds plugins/examples/adam (the
Adam optimizer) and three plugins that must be refused as their own CMake
projects with only that prefix, then with the installed tools:
- compiles a model that uses `adam` with `energyc --plugin`, runs it, and
  compares every step of the trajectory with an independent NumPy Adam
  (f64, 1e-12 relative: the same arithmetic in another order), and checks
  that stopping after 4 steps and resuming from the saved state (moment
  buffers included) equals 8 steps straight;
- loads the plugin through ENERGY_PLUGINS too;
- without the plugin, `adam` is a located error;
- refuses, with the file named: a missing file, a library without the
  entry point, a plugin built for another API version, a plugin whose
  optimizer takes a registered name.

Usage: adam_plugin.py SOURCE_DIR BUILD_DIR WORK_DIR CXX_COMPILER
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

source, build, work, cxx = sys.argv[1:5]
sys.path.insert(0, os.path.join(source, 'tools', 'python'))
from attention_numpy import read_safetensors, write_safetensors  # noqa: E402

failures = []


def check(condition, message):
    print(('ok    ' if condition else 'FAIL  ') + message)
    if not condition:
        failures.append(message)


def run(command, **options):
    result = subprocess.run(command, capture_output=True, text=True, **options)
    if result.returncode != 0:
        sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
prefix = os.path.join(work, 'prefix')
run(['cmake', '--install', build, '--prefix', prefix])
energyc = os.path.join(prefix, 'bin', 'energyc')
energy_run = os.path.join(prefix, 'bin', 'energy-run')


def build_project(name, directory):
    binary = os.path.join(work, name)
    run(['cmake', '-S', directory, '-B', binary, '-G', 'Ninja',
         '-DCMAKE_CXX_COMPILER=' + cxx, '-DCMAKE_PREFIX_PATH=' + prefix])
    run(['cmake', '--build', binary])
    return binary


adam = os.path.join(build_project('adam', os.path.join(source, 'plugins', 'examples', 'adam')),
                    'libenergy-adam.so')
bad = build_project('bad', os.path.join(source, 'tests', 'plugins', 'bad'))

model = os.path.join(work, 'bowl.energy')
with open(model, 'w') as f:
    f.write('''model bowl {
  dim D;
  input A : [D, D], c : [D];
  state x : [D];
  energy e = 0.5 * quad(x - c, A);
  dynamics { x: adam(lr = 0.1, beta2 = 0.99); steps 8; }
}
''')
artifact = os.path.join(work, 'bowl.so')
run([energyc, '--plugin', adam, model, '--dtype', 'f64', '-o', artifact])

rng = np.random.default_rng(4)
d = 5
b = rng.normal(size=(d, d))
A = b @ b.T + np.eye(d)
c = rng.normal(size=d)
x0 = rng.normal(size=d)
inputs = os.path.join(work, 'in.safetensors')
write_safetensors(inputs, {'A': A, 'c': c, 'x': x0}, 'F64')


def numpy_adam(x, steps, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8):
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    trajectory = []
    for t in range(1, steps + 1):
        g = 0.5 * (A + A.T) @ (x - c)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        x = x - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        trajectory.append(x)
    return trajectory, m, v


expected, m8, v8 = numpy_adam(x0, 8)
for steps in (1, 2, 8):
    out = os.path.join(work, 'out%d.safetensors' % steps)
    run([energy_run, artifact, '--in', inputs, '--steps', str(steps), '--out', out])
    state = read_safetensors(out)
    error = np.abs(state['x'] - expected[steps - 1]).max() / np.abs(expected[steps - 1]).max()
    check(error <= 1e-12, 'adam, %d step(s) vs NumPy Adam: %.1e' % (steps, error))
    if steps == 8:
        check(np.abs(state['x.adam_m'] - m8).max() <= 1e-12 * np.abs(m8).max(),
              'the first moment is a state tensor (x.adam_m)')
        check(np.abs(state['x.adam_v'] - v8).max() <= 1e-12 * np.abs(v8).max(),
              'the second moment is a state tensor (x.adam_v)')
# Four steps, saved, then four more from the saved state: eight steps.
half = os.path.join(work, 'half.safetensors')
run([energy_run, artifact, '--in', inputs, '--steps', '4', '--out', half])
resumed = os.path.join(work, 'resumed.safetensors')
saved = read_safetensors(half)
write_safetensors(os.path.join(work, 'resume_in.safetensors'),
                  dict(saved, A=A, c=c), 'F64')
run([energy_run, artifact, '--in', os.path.join(work, 'resume_in.safetensors'),
     '--steps', '4', '--out', resumed])
straight = read_safetensors(os.path.join(work, 'out8.safetensors'))
check(np.array_equal(read_safetensors(resumed)['x'], straight['x']),
      'four steps, saved and resumed for four more, are eight steps (same bits)')

# The same plugin through ENERGY_PLUGINS, for the in-process compiler too.
result = subprocess.run([energy_run, model, '--dtype', 'f64', '--in', inputs, '--json'],
                        capture_output=True, text=True,
                        env=dict(os.environ, ENERGY_PLUGINS=adam))
check(result.returncode == 0 and json.loads(result.stdout)['steps'] == 8,
      'energy-run compiles the model in process with ENERGY_PLUGINS')

# Without the plugin: a located error.
result = subprocess.run([energyc, model, '-o', os.path.join(work, 'x.so')],
                        capture_output=True, text=True)
check(result.returncode != 0 and 'bowl.energy:6:17: error: unknown optimizer `adam`' in result.stderr,
      'without the plugin: %s' % result.stderr.strip().splitlines()[0])

for plugin, message in [
        (os.path.join(work, 'missing.so'), 'cannot load plugin %s' % os.path.join(work, 'missing.so')),
        (os.path.join(bad, 'libNoEntryPoint.so'), 'has no entry point energyGetPluginInfo'),
        (os.path.join(bad, 'libWrongVersion.so'), "('future') was built for plugin API 999; this is API 1"),
        (os.path.join(bad, 'libDuplicateName.so'), "('impostor'): optimizer 'gd' is registered twice")]:
    result = subprocess.run([energyc, '--plugin', plugin, model, '-o', os.path.join(work, 'x.so')],
                            capture_output=True, text=True)
    check(result.returncode != 0 and message in result.stderr and plugin in result.stderr,
          'refused: %s' % result.stderr.strip())

if failures:
    sys.exit('%d check(s) failed' % len(failures))
print('all checks passed')
