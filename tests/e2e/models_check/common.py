"""Shared helpers of the focused model checks (tests/e2e/models_check).

Each check binds every tensor of a compiled f64 artifact from a safetensors
file it writes (NumPy float64 values, so the compiled model and the NumPy
reference see the same numbers), runs `energy-exec` on it, and compares the
result with an independent NumPy float64 computation of the paper's
equations. `check_gradients` compares the compiled gradients with central
finite differences of the compiled energy.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools', 'python'))
import attention_numpy as shared  # noqa: E402  (safetensors reading, writing)


def write_safetensors(path, tensors):
    """Every tensor as float64 (the compiled f64 artifact's type)."""
    shared.write_safetensors(path, tensors, 'F64')


def read_safetensors(path):
    return {name: value.astype(np.float64)
            for name, value in shared.read_safetensors(path).items()}


class Failures:
    """Prints one line per comparison and remembers the failures."""

    def __init__(self):
        self.failed = []

    def check(self, label, error, tolerance):
        ok = error <= tolerance
        print('%-60s %.3e <= %.1e  %s' % (label, error, tolerance,
                                           'ok' if ok else 'FAILED'))
        if not ok:
            self.failed.append(label)

    def check_at_least(self, label, value, minimum):
        """A control: `value` must reach `minimum` (so the test can fail)."""
        ok = value >= minimum
        print('%-60s %.3e >= %.1e  %s' % (label, value, minimum,
                                           'ok' if ok else 'FAILED'))
        if not ok:
            self.failed.append(label)

    def close(self):
        if self.failed:
            sys.exit('FAILED: ' + ', '.join(self.failed))
        print('all checks passed')


def relative_error(a, b):
    """max|a - b| / max(max|b|, 1e-3): the e2e harness's relative measure."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b), initial=0.0)) / max(
        float(np.max(np.abs(b), initial=0.0)), 1e-3)


class Compiled:
    """A compiled artifact run by energy-exec (the runner without the
    compiler, which starts in milliseconds) with every tensor bound."""

    def __init__(self, energy_exec, artifact, dims):
        self.energy_exec = energy_exec
        self.artifact = artifact
        self.dims = ['--dim=%s=%d' % (k, v) for k, v in dims.items()]
        self.directory = tempfile.mkdtemp(prefix='models_check_')
        self.count = 0

    def _bind(self, tensors, consts):
        self.count += 1
        path = os.path.join(self.directory, 'in%d.safetensors' % self.count)
        write_safetensors(path, tensors)
        arguments = self.dims + ['--in', path]
        for name, value in (consts or {}).items():
            arguments += ['--const', '%s=%r' % (name, float(value))]
        return arguments

    def _run(self, arguments):
        command = [self.energy_exec, self.artifact] + arguments
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout,
                                           result.stderr))
        return result.stdout

    def energy(self, tensors, consts=None):
        out = self._run(self._bind(tensors, consts) +
                        ['--eval', 'energy', '--json'])
        return json.loads(out)['energy']

    def grad(self, tensors, wrt, consts=None):
        self.count += 1
        path = os.path.join(self.directory, 'grad%d.safetensors' % self.count)
        self._run(self._bind(tensors, consts) +
                  ['--eval', 'grad', '--wrt', ','.join(wrt), '--out', path])
        out = read_safetensors(path)
        return {name: out['grad.' + name] for name in wrt}

    def run(self, tensors, steps, consts=None):
        """The state tensors (optimizer state, `step`) after `steps` steps."""
        self.count += 1
        path = os.path.join(self.directory, 'out%d.safetensors' % self.count)
        self._run(self._bind(tensors, consts) +
                  ['--eval', 'run', '--steps', str(steps), '--out', path])
        return read_safetensors(path)


def check_gradients(failures, compiled, tensors, wrt, seed, consts=None,
                    directions=2, coordinates=1):
    """Compiled gradients against central finite differences of the
    compiled f64 energy, along `directions` random unit directions and at
    `coordinates` random entries of every tensor in `wrt`.

    Step h = 1e-5 * max(1, max|t|). The central difference's error is
    h^2/6 |E'''| (about 1e-10 times the third derivative, O(1) to O(10) at
    these scales) plus the rounding of two energies, about
    2 * 1e-16 * |E| / h = 2e-11 |E|; the tolerance 1e-7 * max(1, |E|, |g.v|)
    is three orders above both, and an error of 1e-5 in one gradient entry
    is caught. A random direction sees an error in any entry (with
    probability 1); two of them and one coordinate per tensor, each probe
    two runs of energy-exec.
    """
    rng = np.random.default_rng(seed)
    energy = compiled.energy(tensors, consts)
    gradients = compiled.grad(tensors, wrt, consts)
    for name in wrt:
        value = np.asarray(tensors[name], dtype=np.float64)
        h = 1e-5 * max(1.0, float(np.max(np.abs(value), initial=0.0)))
        probes = []
        for _ in range(directions):
            v = rng.standard_normal(value.shape)
            probes.append(('direction', v / np.linalg.norm(v)))
        for _ in range(coordinates):
            v = np.zeros(value.size)
            v[rng.integers(value.size)] = 1.0
            probes.append(('coordinate', v.reshape(value.shape)))
        worst = 0.0
        for _, v in probes:
            plus = dict(tensors, **{name: value + h * v})
            minus = dict(tensors, **{name: value - h * v})
            fd = (compiled.energy(plus, consts) -
                  compiled.energy(minus, consts)) / (2 * h)
            exact = float(np.sum(gradients[name] * v))
            worst = max(worst, abs(fd - exact) /
                        max(1.0, abs(energy), abs(exact)))
        failures.check('grad.%s vs finite differences (%d probes)' %
                       (name, len(probes)), worst, 1e-7)
    return gradients


def main_arguments():
    """energy-exec and the f64 artifact, from the command line."""
    if len(sys.argv) != 3:
        sys.exit('usage: %s ENERGY_EXEC ARTIFACT.f64.so' % sys.argv[0])
    return sys.argv[1], sys.argv[2]
