"""The zoo of the literature's models: what the equality test (check_zoo.py)
and the benchmark (bench/zoo.py) share.

Each model is a pair of files in tests/zoo/models/: NAME.energy, the model
in our language, and NAME.py, the same model written independently in
PyTorch. NAME.py defines:

  CITATION     the paper (authors, year, title, the equations used)
  TEST_DIMS    small dims for the equality test (float64)
  BENCH_DIMS   dims at which the PyTorch version takes 5-500 ms
  STEPS        steps of the dynamics, the .energy's `steps`
  TEST_STEPS   steps the equality test runs (fewer, for speed)
  make_inputs(dims, rng)          every tensor of the model (inputs, params
                                  and the states' starting values) as
                                  float64 numpy arrays, by name
  energy(t, step)                 the global energy of tensors `t` (a dict
                                  of torch tensors) at dynamics step `step`
  run(t, steps, create_graph)     the states after `steps` steps of the
                                  dynamics from `t` (a dict of the final
                                  states), differentiable when create_graph
  loss(final, t)                  the sum of the losses at the final states
                                  `final` (t: every tensor), or absent when
                                  the model has no loss
  TRAINED      the tensors whose loss gradient a training step needs
  COPIES       optional: states initialised from another tensor (`state x
               = x0`), state -> source; make_inputs leaves them out

Dynamics are written with the optimizers below, which follow
docs/dynamics.md (the language's semantics), not our compiler.
"""
import importlib.util
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, 'models')


def model_names():
    return sorted(f[:-len('.energy')] for f in os.listdir(MODELS) if f.endswith('.energy'))


def load(name):
    """The PyTorch module of model `name`."""
    spec = importlib.util.spec_from_file_location('zoo_' + name, os.path.join(MODELS, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.NAME = name
    module.SOURCE = os.path.join(MODELS, name + '.energy')
    return module


def torch_steps(model, arrays, device='cpu'):
    """The PyTorch inference and training step of `model` on `arrays`
    (numpy, by name) in float32 on `device`: inference() returns the final
    states, training() the trained tensors' loss gradients (what the
    benchmarks time)."""
    copies = getattr(model, 'COPIES', {})

    def tensors(grad):
        t = {k: torch.tensor(v, dtype=torch.float32, device=device, requires_grad=grad)
             for k, v in arrays.items()}
        for state, source in copies.items():
            t[state] = t[source]
        return t

    base = tensors(False)

    def inference():
        return model.run(base, model.STEPS, create_graph=False)

    def training():
        t = tensors(True)
        final = model.run(t, model.STEPS, create_graph=True)
        model.loss(final, t).backward()
        return {name: t[name].grad for name in model.TRAINED}

    return inference, training


def gradient(energy, states, create_graph):
    """∇E with respect to each of `states` (zeros where E does not depend
    on one)."""
    grads = torch.autograd.grad(energy, states, create_graph=create_graph, allow_unused=True)
    return [torch.zeros_like(s) if g is None else g for g, s in zip(grads, states)]


def descend_from_copy(energy_fn, t, lr, steps, create_graph):
    """Gradient descent with step `lr` on the state x, which starts as a copy
    of an input (COPIES) and may be the same tensor object: a clone keeps
    the gradient through the copy but makes x a node of its own, so that the
    gradient in x does not also count the input's other uses (keys read
    from it)."""
    t = dict(t, x=t['x'].clone())
    return descend(energy_fn, t, {'x': ('gd', lr)}, steps, create_graph)


def half_squared_error(prediction, target):
    """½ |prediction - target|² over the last axis, averaged over the rest."""
    return 0.5 * (prediction - target).pow(2).sum(-1).mean()


def causal_log_normalisers(scores):
    """Σ over the leading axes and rows i of log Σ_{j <= i} exp(scores[..., i, j])."""
    n = scores.shape[-1]
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    return torch.logsumexp(scores.masked_fill(j > i, float('-inf')), dim=-1).sum()


def descend(energy_fn, t, rules, steps, create_graph, sequential=False):
    """Runs `steps` steps of gradient rules from `t` and returns the final
    states. `rules` maps a state to (kind, options): ('gd', lr),
    ('momentum', lr, beta), ('nesterov', lr, beta), ('euler', dt),
    ('heun', dt). Rules form one group (their gradient taken at the same
    entry values), or each its own group with `sequential`. `energy_fn(t,
    step)` is the global energy."""
    names = list(rules)
    x = {n: t[n] if create_graph else t[n].detach().clone().requires_grad_(True) for n in names}
    velocity = {n: torch.zeros_like(t[n]) for n in names}
    groups = [[n] for n in names] if sequential else [names]

    def energy_at(values, step):
        current = dict(t)
        current.update(values)
        return energy_fn(current, step)

    for step in range(steps):
        for group in groups:
            entry = dict(x)
            point = dict(x)
            for n in group:  # Nesterov's look-ahead, before the gradient
                if rules[n][0] == 'nesterov':
                    point[n] = x[n] - rules[n][2] * velocity[n]
            grads = dict(zip(group, gradient(energy_at(point, step), [point[n] for n in group],
                                             create_graph)))
            for n in group:
                kind = rules[n][0]
                g = grads[n]
                if kind == 'gd':
                    x[n] = entry[n] - rules[n][1] * g
                elif kind in ('momentum', 'nesterov'):
                    velocity[n] = rules[n][2] * velocity[n] + g
                    x[n] = entry[n] - rules[n][1] * velocity[n]
                elif kind == 'euler':
                    x[n] = entry[n] - rules[n][1] * g
                elif kind == 'heun':
                    dt = rules[n][1]
                    predicted = dict(entry)
                    predicted[n] = entry[n] - dt * g
                    (g2,) = gradient(energy_at(predicted, step), [predicted[n]], create_graph)
                    x[n] = entry[n] - dt * (g + g2) / 2
                else:
                    raise ValueError(kind)
            if not create_graph:
                x = {n: v.detach().requires_grad_(True) for n, v in x.items()}
    return x
