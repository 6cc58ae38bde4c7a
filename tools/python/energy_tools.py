"""Drives energyc and energy-run from Python tests.

One object per test holds the two tools and a scratch directory. It compiles
a model (an example, a test-only model) to an artifact of a given dtype, and
runs an artifact with its inputs given as NumPy arrays (written to a
safetensors file for `energy-run --in`) and its results read back as NumPy
arrays (`--out`) together with the JSON `energy-run --json` prints (the
energy, the step count, the per-step trace).

The safetensors reading and writing is attention_numpy's.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

from attention_numpy import read_safetensors, write_safetensors

__all__ = ['EnergyTools', 'read_safetensors', 'write_safetensors']


class EnergyTools:
    """energyc and energy-run, with a scratch directory for their files."""

    def __init__(self, energyc, energy_run, directory, artifacts=None):
        self.energyc = energyc
        self.energy_run = energy_run
        self.directory = directory
        # A directory of prebuilt example artifacts (NAME.f32.so, NAME.f64.so),
        # e.g. the one the e2e-artifacts ctest fixture fills; optional.
        self.artifacts = artifacts
        self.count = 0

    def _execute(self, command):
        # The tools may be replaced while a rebuild runs elsewhere: wait for
        # a missing binary rather than fail at once.
        for _ in range(60):
            if os.path.exists(command[0]):
                break
            time.sleep(1)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit('FAILED (exit %d): %s\n%s%s' % (
                result.returncode, ' '.join(command), result.stdout, result.stderr))
        return result.stdout

    def compile(self, source, dtype, opt_level=None):
        """Compiles SOURCE (.energy) to an artifact of dtype 'f32' or 'f64'
        (at energyc's --opt-level OPT_LEVEL when given)."""
        name = os.path.splitext(os.path.basename(source))[0]
        if self.artifacts:
            prebuilt = os.path.join(self.artifacts, '%s.%s.so' % (name, dtype))
            if os.path.exists(prebuilt):
                return prebuilt
        artifact = os.path.join(self.directory, '%s.%s.so' % (name, dtype))
        if not os.path.exists(artifact):
            level = [] if opt_level is None else ['--opt-level', str(opt_level)]
            self._execute([self.energyc, source, '--dtype', dtype, '-o', artifact] + level)
        return artifact

    def run(self, artifact, inputs=None, dtype='f64', dims=None, consts=None,
            steps=None, evaluate='run', wrt=None, init=None, extra=()):
        """Runs ARTIFACT; returns (the JSON it prints, the tensors of --out).

        inputs: {name: array} bound with --in (written in DTYPE);
        dims, consts: {name: value} given as --dim / --const;
        evaluate: 'run' (the dynamics; --out holds the state tensors, the
        outputs and `step`), 'energy', or 'grad' (--out holds grad.NAME);
        extra: further energy-run arguments (e.g. --plot FILE).
        """
        self.count += 1
        stem = os.path.join(self.directory, 'run%d' % self.count)
        command = [self.energy_run, artifact, '--eval', evaluate, '--json']
        if inputs:
            path = stem + '.in.safetensors'
            write_safetensors(path, inputs, {'f32': 'F32', 'f64': 'F64'}[dtype])
            command += ['--in', path]
        for name, value in sorted((dims or {}).items()):
            command += ['--dim', '%s=%d' % (name, value)]
        for name, value in sorted((consts or {}).items()):
            command += ['--const', '%s=%r' % (name, float(value))]
        if steps is not None:
            command += ['--steps', str(steps)]
        if wrt:
            command += ['--wrt', wrt]
        if init is not None:
            command += ['--init', 'random:%d' % init]
        if evaluate == 'run':
            command += ['--trace']
        command += list(extra)
        out = None
        if evaluate in ('run', 'grad'):
            out = stem + '.out.safetensors'
            command += ['--out', out]
        printed = json.loads(self._execute(command))
        tensors = {}
        if out:
            tensors = {name: np.array(value, dtype=np.float64)
                       for name, value in read_safetensors(out).items()}
        return printed, tensors

    def energy(self, artifact, **options):
        """The global energy of ARTIFACT at its bound values."""
        printed, _ = self.run(artifact, evaluate='energy', **options)
        return printed['energy']
