"""EnergyModule against the zoo's independent PyTorch implementations
(tests/zoo/models/NAME.py, written from the papers): the final states of a
run and the vector-Jacobian product of the run, for random cotangents of
the final states, with respect to every input, param and starting state,
against autograd through the unrolled PyTorch dynamics (f64), for every
model of the zoo: MLP energies (JEM, the RBM), attentions (multi-head slot
attention, ALiBi, RBF, causal linear), Hopfield networks, the Energy
Transformer, ..."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from energy.torch import EnergyModule  # noqa: E402

from specs import SOURCE_DIR  # noqa: E402
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "zoo"))
import zoo  # noqa: E402

MODELS = zoo.model_names()


@pytest.mark.parametrize("name", MODELS)
def test_layer_equals_the_unrolled_pytorch_model(name):
    model = zoo.load(name)
    rng = np.random.default_rng(7)
    arrays = model.make_inputs(model.TEST_DIMS, rng)
    copies = getattr(model, "COPIES", {})
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in arrays.items()}
    for state, source in copies.items():
        t[state] = t[source]
    reference = model.run(t, model.TEST_STEPS, create_graph=True)

    layer = EnergyModule(model.SOURCE, dtype="f64", steps=model.TEST_STEPS,
                         opt_level=0, **model.TEST_DIMS)
    assert sorted(layer.state_names) == sorted(reference)
    params = {p: t[p] for p in layer.param_names}
    given = {k: t[k] for k in arrays if k not in params}
    ours = layer.functional(params, **given)
    if not isinstance(ours, dict):
        ours = {layer.state_names[0]: ours}
    for state, value in reference.items():
        np.testing.assert_allclose(ours[state].detach().numpy(),
                                   value.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=f"final {state}")

    cotangents = {s: torch.tensor(rng.standard_normal(v.shape))
                  for s, v in reference.items()}
    names = sorted(arrays)
    wanted = torch.autograd.grad(
        sum((cotangents[s] * v).sum() for s, v in reference.items()),
        [t[n] for n in names], allow_unused=True)
    got = torch.autograd.grad(
        sum((cotangents[s] * v).sum() for s, v in ours.items()),
        [t[n] for n in names], allow_unused=True)
    for n, want, have in zip(names, wanted, got):
        want = np.zeros(arrays[n].shape) if want is None else want.numpy()
        have = np.zeros(arrays[n].shape) if have is None else have.numpy()
        scale = max(np.abs(want).max(), 1.0)
        np.testing.assert_allclose(have, want, rtol=1e-8, atol=1e-10 * scale,
                                   err_msg=f"gradient of {n}")
