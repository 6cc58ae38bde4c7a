#!/usr/bin/env python3
"""Three training updates of LISTA equal PyTorch's.

LISTA (tests/zoo/models/lista.energy) adds Σ_b ū[b] ⊗ x[b] into We's
adjoint at every backward step, x an input: the compiler sums the steps'
ū into a tensor of its own, which the backward pass's seed zeroes and its
finish multiplies by x (energy-plan-defer-invariant-products). Three
updates of energy-train (f64, plain SGD, the whole data as one batch) from
the same params as three of torch.optim.SGD on the zoo's PyTorch LISTA
(autograd through the unrolled steps) must agree to 1e-9 relative: a sum
left from an earlier update, or one multiplied twice, would show at 1e-2 or
more.
Usage: deferred_updates.py ENERGYC ENERGY_TRAIN LISTA.energy WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import torch

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'zoo'))
import zoo  # noqa: E402

DIMS = dict(B=6, P=5, K=7)
UPDATES, LR = 3, 0.1


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
    return result.stdout


def main():
    energyc, energy_train, source, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    model = zoo.load('lista')
    arrays = model.make_inputs(DIMS, np.random.default_rng(11))
    artifact = os.path.join(work, 'lista.f64.so')
    run([energyc, source, '--dtype', 'f64', '--opt-level', '0', '-o', artifact])
    plan = run([energyc, source, '--emit=plan'])
    if 'deferred_of' not in plan:
        sys.exit('the plan defers no product: nothing is tested')
    data = os.path.join(work, 'data.safetensors')
    init = os.path.join(work, 'init.safetensors')
    out = os.path.join(work, 'params.safetensors')
    safetensors_io.write(data, {'x': arrays['x'], 'zstar': arrays['zstar']})
    safetensors_io.write(init, {n: arrays[n] for n in ('Wd', 'We', 'S', 'theta')})
    run([energy_train, artifact, '--data', data, '--in', init,
         '--dim', 'P=%d' % DIMS['P'], '--dim', 'K=%d' % DIMS['K'],
         '--epochs', str(UPDATES), '--no-shuffle', '--quiet', '--optimizer', 'sgd',
         '--lr', str(LR), '--out', out])
    ours = safetensors_io.read(out)

    t = {n: torch.tensor(v, dtype=torch.float64) for n, v in arrays.items()}
    trained = [t[n].requires_grad_(True) for n in model.TRAINED]
    optimizer = torch.optim.SGD(trained, lr=LR)
    for _ in range(UPDATES):
        optimizer.zero_grad()
        final = model.run(t, model.STEPS, create_graph=True)
        model.loss(final, t).backward()
        optimizer.step()
    worst = 0.0
    for name in model.TRAINED:
        theirs = t[name].detach().numpy()
        error = np.abs(ours[name] - theirs).max() / max(np.abs(theirs).max(), 1e-3)
        moved = np.abs(theirs - arrays[name]).max()
        print('%-6s relative difference %.2e (the updates moved it by %.2e)'
              % (name, error, moved))
        if moved < 1e-4:
            sys.exit('the updates did not move %s: nothing is compared' % name)
        worst = max(worst, error)
    if worst > 1e-9:
        sys.exit('energy-train differs from PyTorch: %.2e > 1e-9' % worst)
    print('%d training updates of LISTA equal PyTorch\'s' % UPDATES)


if __name__ == '__main__':
    main()
