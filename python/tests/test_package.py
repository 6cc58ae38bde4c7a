"""The Python package against independent oracles: closed forms, central
finite differences of the package's own energies and losses (f64, where
their error is ~1e-9), and the same model compiled by energyc and loaded."""

import os
import subprocess

import numpy as np
import pytest

import energy
from specs import EXAMPLES, FIT


def random(rng, *shape):
    return rng.standard_normal(shape)


def test_closed_form_energy_gradient_and_newton_step():
    model = energy.compile(os.path.join(EXAMPLES, "quadratic_bowl.energy"),
                           dtype="f64")
    rng = np.random.default_rng(1)
    root = random(rng, 5, 5)
    a = root @ root.T + 5 * np.eye(5)
    c, y = random(rng, 5), random(rng, 5)
    session = model.session()
    session["A"], session["c"], session["y"] = a, c, y
    assert session.dims == {"D": 5}
    assert session.energy() == pytest.approx(0.5 * (y - c) @ a @ (y - c),
                                             rel=1e-12)
    np.testing.assert_allclose(session.grad()["y"], a @ (y - c), rtol=1e-12)
    result = session.run()
    assert result["steps"] == 1
    # One Newton step (16 CG iterations on a 5-dim SPD system) reaches c.
    np.testing.assert_allclose(session["y"], c, atol=1e-9)


def central_difference(evaluate, value, index, step=1e-6):
    plus, minus = value.copy(), value.copy()
    plus[index] += step
    minus[index] -= step
    return (evaluate(plus) - evaluate(minus)) / (2 * step)


def test_gradient_equals_finite_differences():
    model = energy.compile(os.path.join(EXAMPLES, "slot_attention.energy"),
                           dtype="f64", opt_level=0)
    rng = np.random.default_rng(2)
    values = {"x": random(rng, 6, 4), "mu": random(rng, 3, 4),
              "Wk": random(rng, 4, 4) / 2, "Wq": random(rng, 4, 4) / 2}
    session = model.session()
    for name, value in values.items():
        session[name] = value
    gradient = session.grad(wrt=["mu", "Wk"])
    assert set(gradient) == {"mu", "Wk"}

    def energy_at(name):
        def evaluate(value):
            probe = model.session()
            for other, bound in values.items():
                probe[other] = value if other == name else bound
            return probe.energy()
        return evaluate

    for name in ("mu", "Wk"):
        for index in [(0, 0), (1, 2), (2, 3)]:
            expected = central_difference(energy_at(name), values[name], index)
            assert gradient[name][index] == pytest.approx(expected, rel=1e-6,
                                                          abs=1e-8)


def test_loss_gradient_equals_finite_differences():
    model = energy.compile(FIT, dtype="f64", opt_level=0)
    assert model.losses == ["l"]
    rng = np.random.default_rng(3)
    values = {"x": random(rng, 4, 3), "t": random(rng, 3),
              "W": random(rng, 3, 3), "mu": random(rng, 3)}

    def session_with(**changed):
        session = model.session()
        for name, value in {**values, **changed}.items():
            session[name] = value
        return session

    session = session_with()
    result = session.loss_grad()
    assert result["steps"] == 3
    assert set(result["grads"]) >= {"W", "mu"}
    # The backward steps read saved states in place; the run still ends
    # where it started, so a second call gives the same bits.
    np.testing.assert_array_equal(session["mu"], values["mu"])
    again = session.loss_grad()
    for name in ("W", "mu"):
        np.testing.assert_array_equal(again["grads"][name],
                                      result["grads"][name])

    def loss_at(name):
        return lambda value: session_with(**{name: value}).loss_grad()["loss"]

    for name in ("W", "mu"):
        for index in np.ndindex(values[name].shape):
            expected = central_difference(loss_at(name), values[name], index)
            assert result["grads"][name][index] == pytest.approx(
                expected, rel=1e-6, abs=1e-8)


def test_torch_tensors_and_dlpack_round_trip():
    torch = pytest.importorskip("torch")
    model = energy.compile(os.path.join(EXAMPLES, "quadratic_bowl.energy"),
                           dtype="f64")
    session = model.session()
    # A transposed (strided) float32 tensor: read through its strides and
    # converted to the model's f64.
    a = torch.arange(16, dtype=torch.float32).reshape(4, 4).t()
    session["A"] = a
    session["c"] = torch.ones(4, dtype=torch.float64)
    session.set("y", [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(session["A"], a.numpy().astype(np.float64))
    assert any("converted" in note for note in session.notes)
    back = torch.utils.dlpack.from_dlpack(session.dlpack("A"))
    assert back.dtype == torch.float64
    assert torch.equal(back, a.double())
    np.testing.assert_array_equal(np.from_dlpack(torch.ones(4)),
                                  np.ones(4))


def test_inputs_and_params_are_bound_without_a_copy():
    torch = pytest.importorskip("torch")
    model = energy.compile(os.path.join(EXAMPLES, "quadratic_bowl.energy"),
                           dtype="f64")
    session = model.session()
    a, c, y = np.eye(3), np.ones(3), np.zeros(3)
    session["A"], session["c"], session["y"] = a, c, y
    assert session.energy() == pytest.approx(1.5, rel=1e-15)
    # A (an input, float64, row-major) is the session's memory: changed in
    # place, the session sees it. y (a state) was copied: the kernels write
    # states.
    a *= 2
    y[:] = 5
    assert session.energy() == pytest.approx(3.0, rel=1e-15)
    # The same for a torch tensor (DLPack), and not for a strided one or one
    # of another dtype (copied, converted).
    t = torch.eye(3, dtype=torch.float64)
    session["A"] = t
    t.mul_(3)
    assert session.energy() == pytest.approx(4.5, rel=1e-15)
    strided = torch.eye(6, dtype=torch.float64)[::2, ::2]
    single = np.eye(3, dtype=np.float32)
    for value in (strided, single):
        session["A"] = value
        value *= 5
        assert session.energy() == pytest.approx(1.5, rel=1e-15)
    # The session keeps what it borrowed alive.
    kept = np.full((3, 3), 0.0) + np.eye(3)
    session["A"] = kept
    del kept, a, t
    assert session.energy() == pytest.approx(1.5, rel=1e-15)


def test_errors_are_exceptions_with_places():
    with pytest.raises(energy.CompileError) as caught:
        energy.compile("model m {\n  dim N;\n  state x : [N];\n"
                       "  energy e = sum(i: N) x[i] * y;\n}\n")
    error = caught.value
    assert (error.file, error.line, error.column) == ("<source>", 4, 31)
    assert "unknown name `y`" in error.message
    assert "^" in str(error)

    model = energy.compile(os.path.join(EXAMPLES, "quadratic_bowl.energy"))
    session = model.session()
    session["A"] = np.eye(3)
    with pytest.raises(energy.ShapeError, match=r"'c'.*\[D\].*\[2, 2\]"):
        session["c"] = np.zeros((2, 2))
    with pytest.raises(energy.RuntimeError, match="'nope' is not a tensor"):
        session["nope"] = np.zeros(3)
    # Sizes that disagree are found when the dims are resolved.
    session["c"] = np.zeros(4)
    with pytest.raises(energy.ShapeError,
                       match="dim D is 3 from tensor 'A' but tensor 'c' "
                             "gives it 4"):
        session.energy()
    with pytest.raises(energy.Error, match="no such file"):
        energy.compile("missing.energy")
    with pytest.raises(energy.RuntimeError):
        energy.load(os.path.join(EXAMPLES, "quadratic_bowl.energy"))
    bowl = os.path.join(EXAMPLES, "quadratic_bowl.energy")
    for options in ({"target": "tpu"}, {"dtype": "f16"}, {"dtype": "bf16"},
                    {"opt_level": 9}):
        with pytest.raises(ValueError):
            energy.compile(bowl, **options)


def test_dims_the_kernels_are_planned_at():
    # The sizes given at compile time become the dims' defaults (as energyc
    # --dim sets them); the model still runs at other sizes, and the same
    # energy either way.
    hopfield = os.path.join(EXAMPLES, "hopfield.energy")
    planned = energy.compile(hopfield, dtype="f64", opt_level=0,
                             dims={"N": 7, "K": 5})
    assert planned.dims == {"N": 7, "K": 5, "D": 64}
    plain = energy.compile(hopfield, dtype="f64", opt_level=0)
    assert plain.dims == {"N": None, "K": None, "D": 64}
    rng = np.random.default_rng(4)
    x, m = random(rng, 3, 4), random(rng, 6, 4)
    energies = []
    for model in (planned, plain):
        session = model.session()
        session["x"], session["m"] = x, m
        energies.append(session.energy())
    assert energies[0] == pytest.approx(energies[1], rel=1e-14)
    with pytest.raises(energy.CompileError,
                       match="dims Q=3: the model has no dim 'Q'"):
        energy.compile(hopfield, dims={"Q": 3})
    with pytest.raises(ValueError, match="dims N=0: expected a positive"):
        energy.compile(hopfield, dims={"N": 0})


def test_energyc_artifact_loads_and_agrees(tmp_path):
    energyc = os.environ.get("ENERGYC")
    if not energyc:
        pytest.skip("ENERGYC (the energyc to compile with) is not set")
    path = os.path.join(EXAMPLES, "slot_attention.energy")
    artifact = tmp_path / "slot_attention.so"
    subprocess.run([energyc, path, "--dtype", "f64", "-o", str(artifact)],
                   check=True)
    loaded, compiled = energy.load(artifact), energy.compile(path, dtype="f64")
    assert loaded.manifest["model"] == "slot_attention"
    rng = np.random.default_rng(4)
    values = {"x": random(rng, 5, 4), "mu": random(rng, 2, 4),
              "Wk": random(rng, 4, 4), "Wq": random(rng, 4, 4)}
    sessions = [loaded.session(), compiled.session()]
    for session in sessions:
        for name, value in values.items():
            session[name] = value
    energies = [session.energy() for session in sessions]
    assert energies[0] == pytest.approx(energies[1], rel=1e-12)
    runs = [session.run(steps=2)["energy"] for session in sessions]
    assert runs[0] == pytest.approx(runs[1], rel=1e-12)


def test_the_module_stub_declares_what_the_module_has():
    # energy/_energy.pyi against the compiled module: every function, class,
    # method and property on one side is on the other.
    import ast
    import inspect

    stub = ast.parse(open(os.path.join(os.path.dirname(energy.__file__),
                                       "_energy.pyi")).read())
    declared = {}
    for node in stub.body:
        if isinstance(node, ast.FunctionDef):
            declared[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            declared[node.target.id] = None
        elif isinstance(node, ast.ClassDef):
            declared[node.name] = {item.name for item in node.body
                                   if isinstance(item, ast.FunctionDef)}
    module = energy._energy
    present = {name for name in dir(module) if not name.startswith("_")}
    assert present == set(declared)
    for name, members in declared.items():
        if members is None:
            continue
        cls = getattr(module, name)
        assert inspect.isclass(cls), name
        assert members == {member for member in vars(cls)
                           if not member.startswith("_")}, name
