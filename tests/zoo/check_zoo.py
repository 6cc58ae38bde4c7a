#!/usr/bin/env python3
"""The zoo's models against their PyTorch implementations, in float64.

For each model of tests/zoo/models (or those named): every tensor drawn at
TEST_DIMS and bound with --in; then, the model compiled in double precision
(`energyc --dtype f64 --opt-level 0`, run by energy-run) against PyTorch
(float64, autograd):
  - the energy, and its gradient with respect to every tensor;
  - the states after TEST_STEPS steps of the dynamics;
  - the losses after them and their gradient with respect to every tensor
    that carries an adjoint (params, inputs, the states' starting values),
    through the steps.
Tolerance: 1e-9 relative to the reference's largest magnitude (floored at
1e-3). Both sides compute in double precision and differ only in the
order of operations (sums of up to ~10^3 terms here, a few ulps each,
amplified by at most a few steps of dynamics and their reverse).

  check_zoo.py ENERGYC ENERGY_RUN [NAME...]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tools', 'python'))
import zoo  # noqa: E402
from attention_numpy import read_safetensors, write_safetensors  # noqa: E402

TOLERANCE = 1e-9


class Mismatch(Exception):
    pass


def tool(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise Mismatch('%s failed:\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result.stdout


def compare(label, got, want):
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        raise Mismatch('%s: %d values ours, %d PyTorch' % (label, got.size, want.size))
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-3)
    error = float(np.max(np.abs(got - want))) if want.size else 0.0
    ok = error <= TOLERANCE * scale
    print('  %-34s max|diff| %.2e  scale %.2e  %s' % (label, error, scale, 'ok' if ok else 'MISMATCH'))
    if not ok:
        raise Mismatch('%s differs: %.3e > %.0e * %.3e' % (label, error, TOLERANCE, scale))


def check(energyc, energy_run, name):
    model = zoo.load(name)
    print('%s (%s)' % (name, model.CITATION.split('\n')[0]))
    rng = np.random.default_rng(20261129)
    arrays = model.make_inputs(model.TEST_DIMS, rng)
    with tempfile.TemporaryDirectory() as directory:
        inputs = os.path.join(directory, 'in.safetensors')
        write_safetensors(inputs, arrays, dtype='F64')
        artifact = os.path.join(directory, name + '.so')
        # Planned at the benchmark's sizes (the estimates its choices weigh
        # work by), run at the test's.
        plan_dims = ['--dim=%s=%d' % kv for kv in model.BENCH_DIMS.items()]
        tool([energyc, model.SOURCE, '--dtype', 'f64', '--opt-level', '0', '-o', artifact]
             + plan_dims)

        def ours(energy_run, model, inputs, extra):
            return tool([energy_run, artifact, '--in', inputs, '--threads', '1'] + extra)

        copies = getattr(model, 'COPIES', {})

        def tensors(aliased):
            # A state initialised from another tensor (COPIES: state ->
            # source) starts as that tensor: in a run the same value (its
            # gradient flows to the source), for the energy a value of its
            # own.
            t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
                 for k, v in arrays.items()}
            for state, source in copies.items():
                t[state] = t[source] if aliased else \
                    t[source].detach().clone().requires_grad_(True)
            return t

        # The energy and every gradient.
        t = tensors(aliased=False)
        energy = model.energy(t, 0)
        reference = json.loads(ours(energy_run, model, inputs, ['--eval', 'energy', '--json']))
        compare('energy', reference['energy'], energy.item())
        names = sorted(t)
        grads = torch.autograd.grad(energy, [t[n] for n in names], allow_unused=True)
        report = json.loads(ours(energy_run, model, inputs,
                                 ['--eval', 'grad', '--wrt', ','.join(names), '--json']))
        for n, g in zip(names, grads):
            want = np.zeros(t[n].shape) if g is None else g.detach().numpy()
            compare('gradient ' + n, report['grad.' + n]['data'], want)

        # The run.
        t = tensors(aliased=True)
        final = model.run(t, model.TEST_STEPS, create_graph=False)
        out = os.path.join(directory, 'out.safetensors')
        ours(energy_run, model, inputs, ['--eval', 'run', '--steps', str(model.TEST_STEPS),
                                         '--out', out])
        states = read_safetensors(out)
        for n, value in sorted(final.items()):
            compare('after %d steps: %s' % (model.TEST_STEPS, n), states[n], value.detach().numpy())

        # The losses and their gradients through the run.
        if hasattr(model, 'loss'):
            t = tensors(aliased=True)
            final = model.run(t, model.TEST_STEPS, create_graph=True)
            loss = model.loss(final, t)
            report = json.loads(ours(energy_run, model, inputs,
                                     ['--eval', 'loss-grad', '--steps', str(model.TEST_STEPS),
                                      '--json']))
            compare('losses', sum(report['losses'].values()), loss.item())
            adjoints = sorted(k[len('adjoint.'):] for k in report if k.startswith('adjoint.'))
            if not set(model.TRAINED) <= set(adjoints):
                raise Mismatch('no adjoint for %s' % sorted(set(model.TRAINED) - set(adjoints)))
            sources = [n for n in adjoints if n in arrays]
            grads = torch.autograd.grad(loss, [t[n] for n in sources], allow_unused=True)
            for n, g in zip(sources, grads):
                want = np.zeros(arrays[n].shape) if g is None else g.detach().numpy()
                compare('loss gradient ' + n, report['adjoint.' + n]['data'], want)


def main():
    energyc, energy_run = sys.argv[1:3]
    names = sys.argv[3:] or zoo.model_names()
    failed = []
    for name in names:
        try:
            check(energyc, energy_run, name)
        except Mismatch as error:
            print('  FAILED: %s' % error)
            failed.append(name)
    print('%d of %d zoo models agree with PyTorch' % (len(names) - len(failed), len(names)))
    if failed:
        sys.exit('differ: ' + ', '.join(failed))


if __name__ == '__main__':
    main()
