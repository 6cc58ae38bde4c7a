#!/usr/bin/env python3
"""Out-of-tree plugins, built against the installed framework.

Installs the build into a fresh prefix, builds examples/plugins/research
(the Adam optimizer, the Student-t similarity, softsign and the sparsemax
aggregation, with its run-time library) and three plugins that must be
refused as their own CMake projects with only that prefix, then with the
installed tools:
- compiles a model that uses `adam` with `energyc --plugin`, runs it, and
  compares every step of the trajectory with an independent NumPy Adam
  (f64, 1e-12 relative: the same arithmetic in another order), and checks
  that stopping after 4 steps and resuming from the saved state (moment
  buffers included) equals 8 steps straight;
- loads the plugin through ENERGY_PLUGINS too;
- the verifier's messages about plugins' functions (wrong derivative
  order, similarity of non-vectors, gradient argument) with the plugin
  loaded (tests/plugins/plugin-invalid.mlir, energy-opt --plugin);
- without the plugin, `adam` is a located error;
- refuses, with the file named: a missing file, a library without the
  entry point, a plugin built for another API version, a plugin whose
  optimizer takes a registered name;
- compiles a model using student_t, softsign and sparsemax (and adam):
  the manifest records the plugin; the energy equals an independent NumPy
  one (sparsemax by bisection, not by sorting); the gradient equals central
  finite differences of the compiled energy; compiled equals interpreted;
- Newton through softsign (its f'') against NumPy's Newton; Newton through
  the similarity is a located error (its gradient has no derivative rule);
- a plugin backend (tests/plugins/backend) writes artifacts for
  `energyc --target portable`;
- refuses that artifact, naming the plugin, when its run-time library is
  gone, and finds it again through ENERGY_PLUGIN_PATH.

Usage: research_plugin.py SOURCE_DIR BUILD_DIR WORK_DIR CXX_COMPILER
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


research = build_project('research', os.path.join(source, 'examples', 'plugins', 'research'))
research_plugin = os.path.join(research, 'libenergy-research.so')
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
# The verifier's messages about plugins' functions, with the plugin loaded.
energy_opt = os.path.join(prefix, 'bin', 'energy-opt')
verified = subprocess.run(
    [energy_opt, '--plugin', research_plugin,
     os.path.join(source, 'tests', 'plugins', 'plugin-invalid.mlir'),
     '-split-input-file', '-verify-diagnostics', '-o', os.devnull],
    capture_output=True, text=True)
check(verified.returncode == 0,
      'energy-opt --plugin: every plugin-function verifier message '
      '(tests/plugins/plugin-invalid.mlir)\n' + verified.stderr)

artifact = os.path.join(work, 'bowl.so')
run([energyc, '--plugin', research_plugin, model, '--dtype', 'f64', '-o', artifact])

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
# What a plugin's code takes part in is not kept in the compile cache.
plugin_cache = os.path.join(work, 'plugin-cache')
result = subprocess.run([energy_run, model, '--dtype', 'f64', '--in', inputs, '--json'],
                        capture_output=True, text=True,
                        env=dict(os.environ, ENERGY_PLUGINS=research_plugin,
                                 ENERGY_CACHE_DIR=plugin_cache))
check(result.returncode == 0 and json.loads(result.stdout)['steps'] == 8,
      'energy-run compiles the model in process with ENERGY_PLUGINS')
check(not os.path.exists(plugin_cache),
      'a compilation with a plugin loaded keeps nothing in the compile cache')

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


# Student-t, softsign, sparsemax: run-time code in kernels.
heavy = os.path.join(work, 'heavy.energy')
with open(heavy, 'w') as f:
    f.write('''model heavy {
  dim N, K, D;
  input m : [K, D];
  state x : [N, D];
  energy fit = -sum(i: N) sparsemax(k: K) student_t(x[i], m[k]);
  energy shape = 0.5 * sum(i: N) sqnorm(softsign(x[i]));
  dynamics { x: adam(lr = 0.05); steps 10; }
}
''')
heavy_so = os.path.join(work, 'heavy.so')
run([energyc, '--plugin', research_plugin, heavy, '--dtype', 'f64', '-o', heavy_so])
manifest = json.loads(run([energy_run, heavy_so, '--print-manifest']).stdout)
recorded = manifest.get('plugins', [])
check(len(recorded) == 1 and recorded[0]['name'] == 'research' and recorded[0]['version'] == '1.0'
      and recorded[0]['library'] == os.path.join(research, 'libenergy-research-kernels.so'),
      'the manifest records the plugin whose code the kernels call: %s' % recorded)

n, k, d = 5, 4, 3
m = rng.normal(size=(k, d))
x = m[rng.integers(0, k, size=n)] + 0.6 * rng.normal(size=(n, d))
heavy_in = os.path.join(work, 'heavy_in.safetensors')


def sparsemax_value(z):
    """max over the simplex of <p, z> - |p|^2/2 + 1/2; tau by bisection."""
    lo, hi = z.min() - 1, z.max()
    for _ in range(200):
        tau = 0.5 * (lo + hi)
        lo, hi = (tau, hi) if np.maximum(z - tau, 0).sum() > 1 else (lo, tau)
    p = np.maximum(z - 0.5 * (lo + hi), 0)
    return p @ z - 0.5 * p @ p + 0.5


def numpy_energy(x):
    nu = 3.0
    fit = 0.0
    for i in range(n):
        z = -(nu + 1) / 2 * np.log1p(((x[i] - m) ** 2).sum(axis=1) / nu)
        fit -= sparsemax_value(z)
    soft = x / (1 + np.abs(x))
    return fit + 0.5 * (soft ** 2).sum()


def compiled(arguments, x_value, *extra):
    write_safetensors(heavy_in, {'m': m, 'x': x_value}, 'F64')
    return json.loads(run([energy_run, heavy_so, '--in', heavy_in, '--json'] + list(arguments),
                          *extra).stdout)


energy = compiled(['--eval', 'energy'], x)['energy']
check(abs(energy - numpy_energy(x)) <= 1e-12 * abs(numpy_energy(x)),
      'energy with student_t, softsign, sparsemax vs NumPy: %.17g vs %.17g' % (energy, numpy_energy(x)))
gradient = np.array(compiled(['--eval', 'grad', '--wrt', 'x'], x)['grad.x']['data']).reshape(n, d)
# Central differences of the compiled energy: the error is O(h^2) times the
# third derivative (order 1 here) plus rounding 1e-16 / h.
h = 1e-5
worst = 0.0
for trial in range(4):
    if trial < 3:
        v = rng.normal(size=(n, d))
    else:
        v = np.zeros((n, d))
        v[2, 1] = 1.0
    plus = compiled(['--eval', 'energy'], x + h * v)['energy']
    minus = compiled(['--eval', 'energy'], x - h * v)['energy']
    fd = (plus - minus) / (2 * h)
    worst = max(worst, abs(fd - (gradient * v).sum()) / max(1.0, abs(fd)))
check(worst <= 1e-7, 'gradient vs central differences of the energy (3 directions, 1 coordinate): %.1e' % worst)
write_safetensors(heavy_in, {'m': m, 'x': x}, 'F64')
interp_energy = json.loads(run([energy_run, heavy, '--plugin', research_plugin, '--interp', '--in', heavy_in,
                                '--eval', 'energy', '--json']).stdout)['energy']
interp_gradient = json.loads(run([energy_run, heavy, '--plugin', research_plugin, '--interp', '--in', heavy_in,
                                  '--eval', 'grad', '--wrt', 'x', '--json']).stdout)['grad.x']['data']
check(abs(interp_energy - energy) <= 1e-12 * abs(energy)
      and np.abs(np.array(interp_gradient).reshape(n, d) - gradient).max() <= 1e-12 * np.abs(gradient).max(),
      'the interpreter calls the same run-time code: energy and gradient agree')
steps = compiled(['--steps', '10'], x)
check(steps['steps'] == 10 and steps['energy'] < energy,
      'ten Adam steps lower the energy: %.6g -> %.6g' % (energy, steps['energy']))

# Newton's Hessian-vector products differentiate the gradient again: an
# element-wise function with f'' (softsign) takes part; a similarity, whose
# gradient has no derivative rule, is a located error.
newton = os.path.join(work, 'newton.energy')
with open(newton, 'w') as f:
    f.write('''model newton {
  dim N;
  input t : [N];
  state x : [N];
  energy fit = 0.5 * sqnorm(softsign(x) - t) + 0.5 * sqnorm(x);
  dynamics { x: newton(lr = 1.0); steps 5; }
}
''')
newton_so = os.path.join(work, 'newton.so')
run([energyc, '--plugin', research_plugin, newton, '--dtype', 'f64', '-o', newton_so])
t = 0.3 * rng.normal(size=4)
x0 = 0.3 * rng.normal(size=4)
newton_in = os.path.join(work, 'newton_in.safetensors')
write_safetensors(newton_in, {'t': t, 'x': x0}, 'F64')
softsign = lambda v: v / (1 + np.abs(v))  # noqa: E731
d1 = lambda v: 1 / (1 + np.abs(v)) ** 2  # noqa: E731
d2 = lambda v: -2 * np.sign(v) / (1 + np.abs(v)) ** 3  # noqa: E731
expected = x0.copy()
for _ in range(5):
    # The Hessian is diagonal and positive here (the ridge dominates), so
    # CG's Newton step is g / H exactly.
    g = (softsign(expected) - t) * d1(expected) + expected
    hessian = d1(expected) ** 2 + (softsign(expected) - t) * d2(expected) + 1
    expected = expected - g / hessian
newton_out = os.path.join(work, 'newton_out.safetensors')
run([energy_run, newton_so, '--in', newton_in, '--steps', '5', '--out', newton_out])
error = np.abs(read_safetensors(newton_out)['x'] - expected).max()
check(error <= 1e-12, "five Newton steps through softsign's f' and f'' vs NumPy: %.1e" % error)
with open(os.path.join(work, 'newton_t.energy'), 'w') as f:
    f.write(open(heavy).read().replace('adam(lr = 0.05)', 'newton(lr = 0.5)'))
result = subprocess.run([energyc, '--plugin', research_plugin, os.path.join(work, 'newton_t.energy'),
                         '-o', os.path.join(work, 'x.so')], capture_output=True, text=True)
check(result.returncode != 0 and "newton_t.energy:5:43: error: 'energy.similarity_gradient' op has "
      "no derivative rule; the energy reaches @x through it" in result.stderr,
      'Newton through a similarity: %s' % result.stderr.strip().splitlines()[0])

# The artifact without its plugin's run-time library: refused, by name.
kernels = os.path.join(research, 'libenergy-research-kernels.so')
elsewhere = os.path.join(work, 'moved')
os.makedirs(elsewhere, exist_ok=True)
shutil.move(kernels, os.path.join(elsewhere, 'libenergy-research-kernels.so'))
result = subprocess.run([energy_run, heavy_so, '--in', heavy_in], capture_output=True, text=True)
check(result.returncode != 0 and "needs plugin 'research' 1.0" in result.stderr
      and 'Stack dump' not in result.stderr,
      'without its run-time library: %s' % result.stderr.strip())
result = subprocess.run([energy_run, heavy_so, '--in', heavy_in, '--eval', 'energy', '--json'],
                        capture_output=True, text=True,
                        env=dict(os.environ, ENERGY_PLUGIN_PATH=elsewhere))
check(result.returncode == 0 and json.loads(result.stdout)['energy'] == energy,
      'found again through ENERGY_PLUGIN_PATH')
shutil.move(os.path.join(elsewhere, 'libenergy-research-kernels.so'), kernels)

# A backend from a plugin: energyc --target portable writes an artifact for
# x86-64-v2 through the CPU backend.
backend = build_project('backend', os.path.join(source, 'tests', 'plugins', 'backend'))
portable_so = os.path.join(work, 'portable.so')
run([energyc, '--plugin', research_plugin, '--plugin', os.path.join(backend, 'libPortableBackend.so'),
     model, '--target', 'portable', '-o', portable_so])
target = json.loads(run([energy_run, portable_so, '--print-manifest']).stdout)['target']
check(target['cpu'] == 'x86-64-v2', 'energyc --target portable (a plugin backend): %s' % target['cpu'])
result = subprocess.run([energyc, '--plugin', research_plugin, model, '--target', 'portable',
                         '-o', os.path.join(work, 'x.so')],
                        capture_output=True, text=True)
check(result.returncode != 0 and 'unknown backend (known: cpu, cuda)' in result.stderr,
      'without the plugin: %s' % result.stderr.strip())

if failures:
    sys.exit('%d check(s) failed' % len(failures))
print('all checks passed')
