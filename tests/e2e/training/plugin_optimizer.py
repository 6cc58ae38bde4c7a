#!/usr/bin/env python3
"""A plugin's parameter optimiser trains through energy-train --plugin.

The example plugin's run-time library (examples/plugins/research, built in
this tree) exports Lion. energy-train --plugin LIB --optimizer lion runs two
updates of attention_train (an f64 artifact, one epoch of two batches, in
order); the same two updates are computed here: the loss's gradient by
PyTorch's autograd through the unrolled dynamics (torch_step.py's model,
which that test checks against energy-train), and Lion's formula with NumPy:
  c = beta1 m + (1 - beta1) g;  p <- p (1 - lr wd) - lr sign(c);
  m <- beta2 m + (1 - beta2) g,   m = 0 before the first update.
The params must agree to 1e-12 relative (double precision throughout; no
element of c is near enough to 0 for rounding to flip its sign, which the
test checks). The test also checks that the first batch's gradient, carried
in m, decides the sign of some of the second update's elements, so a plugin
optimiser whose state were lost would fail.
Also: unknown optimiser names list the registered ones (lion among them
with the plugin, not without), and a plugin that cannot be loaded is one
line naming the file, never a crash.
Usage: plugin_optimizer.py ENERGY_TRAIN ARTIFACT(f64) PLUGIN_LIBRARY WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import torch

import safetensors_io
from torch_step import B, D, N, torch_loss

LR, BETA1, BETA2, WEIGHT_DECAY = 0.01, 0.9, 0.2, 0.1


def run(command, expect_failure=False):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode < 0:
        sys.exit('crashed (signal %d): %s\n%s' % (-result.returncode, ' '.join(command),
                                                 result.stderr))
    if (result.returncode != 0) != expect_failure:
        sys.exit('%s: %s\n%s%s' % ('succeeded' if expect_failure else 'FAILED',
                                   ' '.join(command), result.stdout, result.stderr))
    return result


def gradients(h, y, wq, wk):
    """d loss / d(Wq, Wk) at the given params, by autograd."""
    wq = torch.tensor(wq, requires_grad=True)
    wk = torch.tensor(wk, requires_grad=True)
    loss = torch_loss(torch.tensor(h, requires_grad=True), torch.tensor(y), wq, wk)
    loss.backward()
    return wq.grad.numpy(), wk.grad.numpy()


def main():
    energy_train, artifact, plugin, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(11)
    h = rng.standard_normal((2 * B, N, D)) * 0.7
    y = rng.standard_normal((2 * B, N, D)) * 0.7
    params = {'Wq': rng.standard_normal((D, D)) * 0.5, 'Wk': rng.standard_normal((D, D)) * 0.5}
    data = os.path.join(work, 'data.safetensors')
    init = os.path.join(work, 'init.safetensors')
    out = os.path.join(work, 'params-lion.safetensors')
    safetensors_io.write(data, {'h': h, 'y': y})
    safetensors_io.write(init, params)
    common = [energy_train, artifact, '--data', data, '--in', init,
              '--dim', 'N=%d' % N, '--dim', 'D=%d' % D, '--no-shuffle', '--quiet']
    run(common + ['--plugin', plugin, '--optimizer', 'lion', '--batch', str(B),
                  '--lr', str(LR), '--beta1', str(BETA1), '--beta2', str(BETA2),
                  '--weight-decay', str(WEIGHT_DECAY), '--out', out])
    ours = safetensors_io.read(out)

    momentum = {name: np.zeros_like(value) for name, value in params.items()}
    smallest, decided = np.inf, 0
    for batch in (slice(0, B), slice(B, 2 * B)):
        grads = dict(zip(('Wq', 'Wk'),
                         gradients(h[batch], y[batch], params['Wq'], params['Wk'])))
        for name in params:
            c = BETA1 * momentum[name] + (1 - BETA1) * grads[name]
            smallest = min(smallest, np.abs(c).min() / np.abs(c).max())
            decided += np.sum(np.sign(c) != np.sign(grads[name]))
            params[name] = params[name] * (1 - LR * WEIGHT_DECAY) - LR * np.sign(c)
            momentum[name] = BETA2 * momentum[name] + (1 - BETA2) * grads[name]
    if smallest < 1e-8:
        sys.exit('an element of Lion\'s direction is %.1e of the largest: its sign '
                 'is not a safe comparison' % smallest)
    if decided == 0:
        sys.exit('the momentum decides no sign: its state is not compared')
    worst = max(np.abs(ours[name] - params[name]).max() / np.abs(params[name]).max()
                for name in params)
    print('lion: two updates of energy-train against NumPy: relative difference %.2e '
          '(the momentum decides the sign of %d elements)' % (worst, decided))
    if worst > 1e-12:
        sys.exit('energy-train with the plugin\'s lion differs from the formula: '
                 '%.2e > 1e-12' % worst)

    # Bad input: one line naming what is wrong, a non-zero exit, no crash.
    one_epoch = common + ['--epochs', '1']
    failures = [
        (['--plugin', plugin, '--optimizer', 'lino'],
         ["unknown param optimiser 'lino'", 'adamw, lion, momentum, sgd']),
        (['--optimizer', 'lion'],
         ["unknown param optimiser 'lion' (known: adam, adamw, momentum, sgd)"]),
        (['--plugin', os.path.join(work, 'missing.so')],
         ['--plugin: cannot load run-time library ' + os.path.join(work, 'missing.so')]),
        (['--plugin', artifact],
         [artifact + ' has no entry point energyGetPluginRuntimeInfo']),
        (['--plugin', plugin, '--optimizer', 'lion', '--beta1', '1.5'],
         ['lion: beta1 and beta2 must be in [0, 1]']),
    ]
    for extra, expected in failures:
        result = run(one_epoch + extra, expect_failure=True)
        lines = result.stderr.strip().splitlines()
        if len(lines) != 1 or not all(text in lines[0] for text in expected):
            sys.exit('%s: expected one line with %s, got:\n%s'
                     % (' '.join(extra), expected, result.stderr))
        print('refused: %s' % lines[0])
    # The same library twice registers once; a bare file name is found in
    # ENERGY_PLUGIN_PATH.
    directory, name = os.path.split(plugin)
    result = subprocess.run(one_epoch + ['--plugin', plugin, '--plugin', name,
                                         '--optimizer', 'lion'],
                            capture_output=True, text=True,
                            env=dict(os.environ, ENERGY_PLUGIN_PATH=directory))
    if result.returncode != 0:
        sys.exit('loading the plugin twice, by path and by name: %s' % result.stderr)
    print('energy-train trains with a plugin\'s optimiser')


if __name__ == '__main__':
    main()
