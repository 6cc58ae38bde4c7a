"""energy.torch.EnergyModule: its backward (the compiler's adjoint through
the dynamics, seeded with torch's incoming gradients) against
torch.autograd.gradcheck's finite differences in f64, for gradient descent,
momentum with states initialised from an input, and Nesterov; and the layer
trained inside a PyTorch model."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import energy  # noqa: E402
from energy.torch import EnergyModule  # noqa: E402
from specs import EXAMPLES, FIT  # noqa: E402


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


OUTPUTS = """
model readout {
  dim N, D, C;
  input h : [N, D];
  state x : [N, D] = h;
  param W : [C, D];
  energy anchor = sum(i: N) 0.5 * sqnorm(x[i] - h[i]);
  energy attn = -sum(i: N) lse(j: N) dot(x[i], x[j]);
  output logits[i: N, c: C] = dot(W[c], x[i]);
  output pooled = sum(i: N) x[i];
  dynamics { x: gd(lr = 0.1); steps 2; }
}
"""


def test_outputs_are_returned_and_pass_gradcheck():
    torch.manual_seed(6)
    module = EnergyModule(OUTPUTS, dtype="f64", opt_level=0, D=3, C=2)
    assert module.returned_names == ["logits", "pooled"]
    h = torch.randn(4, 3, dtype=torch.float64)
    out = module(h=h)
    assert set(out) == {"logits", "pooled"}
    assert out["logits"].shape == (4, 2) and out["pooled"].shape == (3,)
    # The outputs are the spec's functions of the final state, here read
    # from a session's run.
    session = module.model.session()
    session["h"], session["W"] = h, module.W.detach()
    session.run()
    final, weights = session["x"], module.W.detach().numpy()
    np.testing.assert_allclose(out["logits"].detach().numpy(),
                               final @ weights.T, rtol=1e-12)
    np.testing.assert_allclose(out["pooled"].detach().numpy(),
                               final.sum(0), rtol=1e-12)
    assert gradcheck(module, {"W": module.W}, h=h)


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


def test_adam_in_a_torch_loop_follows_energy_train(tmp_path):
    """Four Adam updates (two epochs of two batches, in order) of a batch
    of attention energies descended by momentum (tests/e2e/training/
    attention_train.energy): energy-train on an f64 artifact, and the
    EnergyModule of the same source with the spec's loss written in
    PyTorch and torch.optim.Adam, from the same initial params. Both
    compute in double precision; a wrong term of either backward would
    show at 1e-3 or more."""
    energyc, energy_train = (os.environ.get("ENERGYC"),
                             os.environ.get("ENERGY_TRAIN"))
    if not energyc or not energy_train:
        pytest.skip("ENERGYC and ENERGY_TRAIN (the tools) are not set")
    source = os.path.join(EXAMPLES, "..", "tests", "e2e", "training")
    sys.path.insert(0, source)
    import safetensors_io

    model = os.path.join(source, "attention_train.energy")
    rng = np.random.default_rng(3)
    h = rng.standard_normal((6, 4, 5)) * 0.7
    y = rng.standard_normal((6, 4, 5)) * 0.7
    initial = {"Wq": rng.standard_normal((5, 5)) * 0.5,
               "Wk": rng.standard_normal((5, 5)) * 0.5}
    safetensors_io.write(tmp_path / "data.safetensors", {"h": h, "y": y})
    safetensors_io.write(tmp_path / "init.safetensors", initial)
    artifact = tmp_path / "model.so"
    subprocess.run([energyc, model, "--dtype", "f64", "-o", str(artifact)],
                   check=True)
    subprocess.run([energy_train, str(artifact), "--data",
                    str(tmp_path / "data.safetensors"), "--in",
                    str(tmp_path / "init.safetensors"), "--dim", "N=4",
                    "--dim", "D=5", "--epochs", "2", "--batch", "3",
                    "--no-shuffle", "--quiet", "--optimizer", "adam", "--lr",
                    "0.01", "--out", str(tmp_path / "out.safetensors"),
                    "--log", str(tmp_path / "loss.csv")], check=True)
    with open(tmp_path / "loss.csv") as log:
        theirs = [float(row["loss"]) for row in csv.DictReader(log)]
    trained = safetensors_io.read(tmp_path / "out.safetensors")

    layer = EnergyModule(model, dtype="f64", opt_level=0, N=4, D=5)
    with torch.no_grad():
        for name, value in initial.items():
            getattr(layer, name).copy_(torch.from_numpy(value))
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.01)
    ours = []
    for _ in range(2):
        for batch in (slice(0, 3), slice(3, 6)):
            x = layer(h=torch.from_numpy(h[batch]))
            target = torch.from_numpy(y[batch])
            loss = 0.5 * ((x - target) ** 2).sum(dim=(1, 2)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ours.append(loss.item())
    assert len(theirs) == 4
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    for name in initial:
        value = getattr(layer, name).detach().numpy()
        assert np.abs(value - initial[name]).max() > 1e-3
        np.testing.assert_allclose(value, trained[name], rtol=1e-9,
                                   atol=1e-12)


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
    with pytest.raises(energy.Error, match="compiled for cpu, not cuda"):
        EnergyModule(module.model, device="cuda", D=3)
    with pytest.raises(energy.Error, match="runs on the CPU or on CUDA"):
        EnergyModule(FIT, dtype="f64", opt_level=0, device="meta", D=3)
