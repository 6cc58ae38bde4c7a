#!/usr/bin/python3
"""Reference trajectories from torch.optim for ParamOptimizerTest.cpp.

Run it (with Debian's python3-torch) from anywhere; it writes
param_optimizer_reference.json next to itself:

    /usr/bin/python3 tests/unit/runtime/param_optimizer_reference.py

What it writes
--------------
A JSON object holding

* ``torch_version``: the version of torch that made the file;
* ``shape``: the shape of the param, [2, 3];
* ``initial``: its initial value, 6 numbers (row-major), each of magnitude
  in [0.5, 1.5];
* ``lrs``: the learning rate of each of the 5 updates (they change from
  update to update, as a schedule makes them, so that the test sees every
  use of lr, including AdamW's decay 1 - lr*wd);
* ``gradients``: the 5 gradients, 6 numbers each, in [-1, 1];
* ``cases``: one per optimiser and set of hyper-parameters: ``optimizer``
  (the runtime's name: sgd, momentum, adam, adamw), ``options`` (the
  runtime's ParamOptimizerOptions: momentum, beta1, beta2, eps,
  weightDecay) and ``params``: the param after each of the 5 updates, as
  torch.optim computes it in float64. Each optimiser has a case without
  weight decay, one with it, and one with other hyper-parameters (momentum
  0.5; betas 0.8 and 0.95 with eps 1e-3, so that eps matters).

The initial values and the gradients are float32 numbers (drawn in float32
and widened), so that the test can start an F32 param from exactly the same
numbers as an F64 one. All floats are written with Python's shortest
round-trip repr (full double precision).

The optimisers are torch.optim's single-tensor implementations
(foreach=False): SGD(momentum=0 or mu, dampening=0, nesterov=False), Adam
(amsgrad=False) and AdamW, each with its param group's lr set before every
step.

Checks (exit status 1 on failure)
---------------------------------
Every element of the param stays of magnitude >= 0.1, so that the test's
relative tolerances are meaningful for every element; and after every
update it is at least half the largest magnitude it had so far, which
bounds the float32 rounding the test allows for F32 params (see the test).
"""

import json
import os
import sys

import torch

SHAPE = [2, 3]
UPDATES = 5
LRS = [0.05, 0.04, 0.03, 0.02, 0.01]


def options(momentum=0.9, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    return {
        "momentum": momentum,
        "beta1": beta1,
        "beta2": beta2,
        "eps": eps,
        "weightDecay": weight_decay,
    }


CASES = [
    ("sgd", options()),
    ("sgd", options(weight_decay=0.1)),
    ("sgd", options(weight_decay=0.5)),
    ("momentum", options()),
    ("momentum", options(weight_decay=0.1)),
    ("momentum", options(momentum=0.5, weight_decay=0.2)),
    ("adam", options()),
    ("adam", options(weight_decay=0.1)),
    ("adam", options(beta1=0.8, beta2=0.95, eps=1e-3, weight_decay=0.2)),
    ("adamw", options()),
    ("adamw", options(weight_decay=0.1)),
    ("adamw", options(beta1=0.8, beta2=0.95, eps=1e-3, weight_decay=0.2)),
]


def make_optimizer(name, opts, param):
    wd = opts["weightDecay"]
    if name == "sgd":
        return torch.optim.SGD(
            [param], lr=LRS[0], weight_decay=wd, foreach=False)
    if name == "momentum":
        return torch.optim.SGD(
            [param],
            lr=LRS[0],
            momentum=opts["momentum"],
            dampening=0,
            nesterov=False,
            weight_decay=wd,
            foreach=False,
        )
    betas = (opts["beta1"], opts["beta2"])
    if name == "adam":
        return torch.optim.Adam(
            [param], lr=LRS[0], betas=betas, eps=opts["eps"], weight_decay=wd,
            amsgrad=False, foreach=False)
    if name == "adamw":
        return torch.optim.AdamW(
            [param], lr=LRS[0], betas=betas, eps=opts["eps"], weight_decay=wd,
            amsgrad=False, foreach=False)
    raise ValueError(name)


def trajectory(name, opts, initial, gradients):
    param = torch.tensor(initial, dtype=torch.float64).reshape(SHAPE)
    param.requires_grad_(True)
    optimizer = make_optimizer(name, opts, param)
    params = []
    for lr, gradient in zip(LRS, gradients):
        for group in optimizer.param_groups:
            group["lr"] = lr
        param.grad = torch.tensor(gradient, dtype=torch.float64).reshape(SHAPE)
        optimizer.step()
        params.append(param.detach().reshape(-1).tolist())
    return params


def main():
    generator = torch.Generator().manual_seed(20261122)
    count = SHAPE[0] * SHAPE[1]
    magnitude = 0.5 + torch.rand(
        count, generator=generator, dtype=torch.float32)
    sign = torch.where(torch.rand(count, generator=generator) < 0.5, -1.0, 1.0)
    initial = (magnitude * sign).to(torch.float32).double().tolist()
    gradients = [
        (2 * torch.rand(count, generator=generator, dtype=torch.float32) - 1)
        .double()
        .tolist()
        for _ in range(UPDATES)
    ]

    cases = []
    ok = True
    for name, opts in CASES:
        params = trajectory(name, opts, initial, gradients)
        smallest = min(abs(x) for row in params for x in row)
        if smallest < 0.1:
            print(f"{name} {opts}: a param reaches {smallest}",
                  file=sys.stderr)
            ok = False
        rows = [initial] + params
        for k in range(1, len(rows)):
            for i in range(count):
                largest = max(abs(row[i]) for row in rows[: k + 1])
                if abs(rows[k][i]) < largest / 2:
                    print(f"{name} {opts}: element {i} shrinks to "
                          f"{rows[k][i]} from {largest}", file=sys.stderr)
                    ok = False
        cases.append({"optimizer": name, "options": opts, "params": params})

    reference = {
        "torch_version": torch.__version__,
        "shape": SHAPE,
        "initial": initial,
        "lrs": LRS,
        "gradients": gradients,
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "param_optimizer_reference.json")
    with open(path, "w") as out:
        json.dump(reference, out, indent=1)
        out.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
