#!/usr/bin/env python3
"""One training step of energy-train equals PyTorch's on the same model.

attention_train.energy (a batch of self-attention energies descended by three
momentum steps, then a squared-error loss) is written again in PyTorch: the
energy E(x) = -sum_b sum_c logsumexp_p (Wq x_bc . Wk x_bp) / sqrt(D), its
gradient by torch.autograd.grad with create_graph=True (so the loss
differentiates through every step), the momentum steps of the language
(p <- beta p + dE/dx; x <- x - lr p), the loss, loss.backward(), and one
update of torch.optim.SGD / Adam / AdamW. energy-train runs one update on the
same batch from the same initial params (an f64 artifact, --no-shuffle, the
whole data as one batch). The params after the update must agree to 1e-9
relative: both compute in double precision, and the backward pass through
three steps adds a few hundred rounding errors of 1e-16, far below that;
a wrong term in the derivative through the steps would show at 1e-3 or more.
Usage: torch_step.py ENERGY_TRAIN ARTIFACT(f64) WORK_DIR
"""
import math
import os
import subprocess
import sys

import numpy as np
import torch

import safetensors_io

B, N, D = 3, 4, 5
LR_DYN, BETA_DYN, STEPS = 0.5, 0.8, 3


def energy(x, wq, wk):
    q = x @ wq.T
    k = x @ wk.T
    scores = q @ k.transpose(1, 2) / math.sqrt(D)
    return -torch.logsumexp(scores, dim=2).sum()


def torch_loss(h, y, wq, wk):
    x = h.clone()
    velocity = torch.zeros_like(x)
    for _ in range(STEPS):
        (gradient,) = torch.autograd.grad(energy(x, wq, wk), x, create_graph=True)
        velocity = BETA_DYN * velocity + gradient
        x = x - LR_DYN * velocity
    return 0.5 * ((x - y) ** 2).sum(dim=(1, 2)).mean()


def main():
    energy_train, artifact, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    h = rng.standard_normal((B, N, D)) * 0.7
    y = rng.standard_normal((B, N, D)) * 0.7
    wq0 = rng.standard_normal((D, D)) * 0.5
    wk0 = rng.standard_normal((D, D)) * 0.5
    data = os.path.join(work, 'data.safetensors')
    init = os.path.join(work, 'init.safetensors')
    safetensors_io.write(data, {'h': h, 'y': y})
    safetensors_io.write(init, {'Wq': wq0, 'Wk': wk0})

    cases = [('sgd', ['--lr', '0.1'], lambda p: torch.optim.SGD(p, lr=0.1)),
             ('momentum', ['--lr', '0.1', '--momentum', '0.9', '--weight-decay', '0.01'],
              lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
             ('adam', ['--lr', '0.01'], lambda p: torch.optim.Adam(p, lr=0.01)),
             ('adamw', ['--lr', '0.01', '--weight-decay', '0.1'],
              lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1))]
    worst = 0.0
    for name, flags, make in cases:
        out = os.path.join(work, 'params-%s.safetensors' % name)
        command = [energy_train, artifact, '--data', data, '--in', init,
                   '--dim', 'N=%d' % N, '--dim', 'D=%d' % D, '--epochs', '1',
                   '--no-shuffle', '--quiet', '--optimizer', name, '--out', out] + flags
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit('FAILED: %s\n%s%s' % (' '.join(command), result.stdout, result.stderr))
        ours = safetensors_io.read(out)

        wq = torch.tensor(wq0, dtype=torch.float64, requires_grad=True)
        wk = torch.tensor(wk0, dtype=torch.float64, requires_grad=True)
        optimizer = make([wq, wk])
        loss = torch_loss(torch.tensor(h, requires_grad=True), torch.tensor(y), wq, wk)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for param, value in (('Wq', wq), ('Wk', wk)):
            theirs = value.detach().numpy()
            error = np.abs(ours[param] - theirs).max() / max(np.abs(theirs).max(), 1e-3)
            moved = np.abs(theirs - (wq0 if param == 'Wq' else wk0)).max()
            print('%-9s %-3s relative difference %.2e (the update moved it by %.2e)'
                  % (name, param, error, moved))
            if moved < 1e-4:
                sys.exit('%s: the update did not move %s: nothing is compared' % (name, param))
            worst = max(worst, error)
    if worst > 1e-9:
        sys.exit('energy-train differs from PyTorch: %.2e > 1e-9' % worst)
    print('one training step equals PyTorch\'s for sgd, momentum, adam and adamw')


if __name__ == '__main__':
    main()
