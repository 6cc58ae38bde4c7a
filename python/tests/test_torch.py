"""energy.torch.EnergyModule: its backward (the compiler's adjoint through
the dynamics, seeded with torch's incoming gradients) against
torch.autograd.gradcheck's finite differences in f64, for gradient descent,
momentum with states initialised from an input, and Nesterov; and the layer
trained inside a PyTorch model."""

import os

import pytest

torch = pytest.importorskip("torch")

import energy  # noqa: E402
from energy.torch import EnergyModule  # noqa: E402

EXAMPLES = os.path.join(
    os.environ.get("ENERGY_SOURCE_DIR",
                   os.path.join(os.path.dirname(__file__), "..", "..")),
    "examples")

FIT = """
model fit {
  dim N, D;
  input x : [N, D], t : [D];
  param W : [D, D];
  state mu : [D];
  energy e = sum(i: N) 0.5 * sqnorm(mu - W @ x[i]);
  loss l = sqnorm(mu - t);
  dynamics { mu: gd(lr = 0.1); steps 3; }
}
"""


def gradcheck(module, params, **given):
    names = list(params) + list(given)
    values = [value.detach().clone().double().requires_grad_(True)
              for value in list(params.values()) + list(given.values())]

    def run(*tensors):
        bound = dict(zip(names, tensors))
        result = module.functional(
            {name: bound[name] for name in params},
            **{name: bound[name] for name in given})
        return tuple(result.values()) if isinstance(result, dict) else result

    return torch.autograd.gradcheck(run, tuple(values), eps=1e-6, atol=1e-7,
                                    rtol=1e-5)


def test_gradient_descent_layer_passes_gradcheck():
    torch.manual_seed(0)
    module = EnergyModule(FIT, dtype="f64", opt_level=0, D=3)
    assert [name for name, _ in module.named_parameters()] == ["W"]
    assert module.state_names == ["mu"] and "x" in module.input_names
    assert gradcheck(module, {"W": module.W}, x=torch.randn(4, 3),
                     mu=torch.randn(3))


def test_momentum_from_an_input_passes_gradcheck():
    torch.manual_seed(1)
    module = EnergyModule(os.path.join(EXAMPLES, "momen_mha.energy"),
                          dtype="f64", seed=3, opt_level=0, D=8,
                          L=2)
    assert set(module.state_names) == {"z", "hk"}
    assert gradcheck(module, {"Wq": module.Wq * 4}, h=torch.randn(3, 8))


def test_nesterov_from_a_given_state_passes_gradcheck():
    torch.manual_seed(2)
    module = EnergyModule(os.path.join(EXAMPLES, "nag_attention.energy"),
                          dtype="f64", opt_level=0, D=4, L=2)
    assert gradcheck(module, {"Wk": module.Wk}, x=torch.randn(3, 4))


def test_hopfield_layer_passes_gradcheck():
    torch.manual_seed(4)
    module = EnergyModule(os.path.join(EXAMPLES, "hopfield.energy"),
                          dtype="f64", opt_level=0, D=4)
    assert gradcheck(module, {}, x=torch.randn(3, 4), m=torch.randn(5, 4))


def test_mlp_energy_layer_passes_gradcheck():
    # JEM's sampler (tests/zoo/models/jem.energy): an MLP's log-sum-exp.
    source = os.path.join(EXAMPLES, "..", "tests", "zoo", "models",
                          "jem.energy")
    torch.manual_seed(5)
    module = EnergyModule(source, dtype="f64", opt_level=0, steps=3, D=4,
                          H=5, C=3)
    params = {name: torch.randn_like(getattr(module, name)) / 2
              for name in ("W1", "b1", "W2", "b2")}
    assert gradcheck(module, params, x0=torch.rand(2, 4) * 2 - 1)


def test_layer_trains_inside_a_torch_model():
    # A teacher the model can represent: after 3 steps of gd from 0 with
    # lr 0.1 over N = 4 rows, mu = (1 - 0.6^3) mean_i(W x_i).
    torch.manual_seed(3)
    f64 = torch.float64
    encoder = torch.nn.Linear(3, 3).to(f64)
    layer = EnergyModule(FIT, dtype="f64", opt_level=0, D=3)
    data = torch.randn(8, 4, 3, dtype=f64)
    teacher = torch.randn(3, 3, dtype=f64)
    target = (1 - 0.6 ** 3) * data.mean(1) @ teacher.T
    optimizer = torch.optim.SGD(
        list(encoder.parameters()) + list(layer.parameters()), lr=0.1)

    def loss_of_batch():
        finals = torch.stack([layer(x=encoder(sample),
                                    mu=torch.zeros(3, dtype=f64))
                              for sample in data])
        return torch.nn.functional.mse_loss(finals, target)

    first = loss_of_batch().item()
    for _ in range(300):
        optimizer.zero_grad()
        loss = loss_of_batch()
        loss.backward()
        assert torch.isfinite(layer.W.grad).all()
        assert encoder.weight.grad.abs().sum() > 0
        optimizer.step()
    assert loss_of_batch().item() < 0.1 * first


def test_misuse_is_an_energy_error():
    module = EnergyModule(FIT, dtype="f64", opt_level=0, D=3)
    with pytest.raises(energy.Error, match="'?nope'?: not an input or state"):
        module(nope=torch.zeros(3))
    plain = energy.compile(FIT, dtype="f64")
    with pytest.raises(energy.Error, match="without caller cotangents"):
        EnergyModule(plain)
    with pytest.raises(energy.Error, match="give EnergyModule the value of "
                                           "dim D"):
        EnergyModule(FIT, dtype="f64", opt_level=0)
