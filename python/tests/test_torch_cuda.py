"""energy.torch on the GPU: EnergyModule on CUDA tensors, in sessions of
models compiled for CUDA, against the same modules on the CPU (f64: outputs,
gradients of params and inputs, an Adam loop), gradcheck on the GPU, tensors
in and out of a CUDA session without the host, and torch's current stream.

Skipped without a CUDA GPU (CI has none). bench/gpu_bundle.sh runs it on a
GPU machine, whose package has no compiler (python/runtime-only), over the
artifacts this file compiles here:

    test_torch_cuda.py prepare ENERGYC DIR
    ENERGY_TORCH_CUDA_ARTIFACTS=DIR pytest test_torch_cuda.py
"""

import os
import subprocess
import sys
import tempfile
from collections import namedtuple

import pytest

torch = pytest.importorskip("torch")

import energy  # noqa: E402
from energy.torch import EnergyModule  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specs import EXAMPLES, FIT  # noqa: E402

# A model: its source (a path, or the text), the module's dims and steps,
# and the shapes of the tensors forward is given.
Spec = namedtuple("Spec", "source dims steps inputs")
MODELS = {
    "fit": Spec(FIT, {"D": 3}, None, {"x": (4, 3), "mu": (3,)}),
    "hopfield": Spec(os.path.join(EXAMPLES, "hopfield.energy"), {"D": 4},
                     None, {"x": (3, 4), "m": (5, 4)}),
    "attention": Spec(os.path.join(EXAMPLES, "momen_mha.energy"),
                      {"D": 8, "L": 2}, None, {"h": (3, 8)}),
    "mlp": Spec(os.path.join(EXAMPLES, "..", "tests", "zoo", "models",
                             "jem.energy"), {"D": 4, "H": 5, "C": 3}, 3,
                {"x0": (2, 4)}),
}
TARGETS = ("cpu", "cuda")
F64 = torch.float64


def prepare(energyc, directory):
    """Compiles every model for both targets into DIRECTORY, as the tests
    load them where the package has no compiler."""
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for name, spec in MODELS.items():
            source = spec.source
            if not os.path.exists(source):
                source = os.path.join(work, name + ".energy")
                with open(source, "w", encoding="utf-8") as file:
                    file.write(spec.source)
            for target in TARGETS:
                subprocess.check_call(
                    [energyc, "--caller-cotangents", "--dtype", "f64",
                     "--target", target, "--opt-level", "0", source, "-o",
                     os.path.join(directory, f"{name}.{target}.so")])


pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU")


def models(name):
    """The model compiled for the CPU and for CUDA."""
    if energy._energy.has_compiler:
        return tuple(energy.compile(MODELS[name].source, target=target,
                                    dtype="f64", caller_cotangents=True,
                                    opt_level=0) for target in TARGETS)
    where = os.environ.get("ENERGY_TORCH_CUDA_ARTIFACTS")
    if not where:
        pytest.skip("no compiler in this build: set "
                    "ENERGY_TORCH_CUDA_ARTIFACTS (test_torch_cuda.py "
                    "prepare)")
    return tuple(energy.load(os.path.join(where, f"{name}.{target}.so"))
                 for target in TARGETS)


def modules(name):
    """The same EnergyModule on the CPU and on the GPU, with equal params."""
    spec = MODELS[name]
    on_cpu, on_gpu = (EnergyModule(model, seed=3, steps=spec.steps,
                                   **spec.dims) for model in models(name))
    for param, value in on_cpu.named_parameters():
        on_device = getattr(on_gpu, param)
        assert on_device.is_cuda and on_device.dtype == F64
        # Both initialised as the spec says, from the same draws.
        assert torch.equal(on_device.cpu(), value), param
    return on_cpu, on_gpu


def returned(result):
    return tuple(result.values()) if isinstance(result, dict) else (result,)


def assert_near(gpu, cpu):
    # f64 on both sides; the GPU's exp and log differ from the host's in
    # the last bits, which a few steps amplify well below this.
    assert gpu.is_cuda, gpu.device
    scale = max(1.0, cpu.abs().max().item())
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=1e-9 * scale)


def test_cuda_tensors_go_in_and_come_out_on_the_gpu():
    cpu_model, gpu_model = models("hopfield")
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=F64, device="cuda")
    m = torch.randn(5, 4, dtype=F64, device="cuda")
    session, reference = gpu_model.session(D=4), cpu_model.session(D=4)
    session["x"], session["m"] = x, m
    reference["x"], reference["m"] = x.cpu(), m.cpu()
    view = torch.from_dlpack(session.dlpack("x"))
    assert view.is_cuda and torch.equal(view, x)
    # The session's own buffer, copied on the device; each dlpack is a view
    # of it, not a copy.
    assert view.data_ptr() != x.data_ptr()
    assert torch.from_dlpack(session.dlpack("x")).data_ptr() == \
        view.data_ptr()
    energy_there, energy_here = session.energy(), reference.energy()
    assert abs(energy_there - energy_here) <= 1e-12 * max(1.0,
                                                          abs(energy_here))
    session.run()
    reference.run()
    assert_near(torch.from_dlpack(session.dlpack("x")),
                torch.from_numpy(reference["x"]))
    with pytest.raises(energy.Error, match="convert it on the device"):
        session["x"] = x.float()
    with pytest.raises(energy.Error, match="runs on the CPU"):
        reference["x"] = x


@pytest.mark.parametrize("name", list(MODELS))
def test_gpu_module_equals_the_cpu_module(name):
    on_cpu, on_gpu = modules(name)
    torch.manual_seed(1)
    given = {tensor: torch.randn(*shape, dtype=F64)
             for tensor, shape in MODELS[name].inputs.items()}
    here = {tensor: value.clone().requires_grad_(True)
            for tensor, value in given.items()}
    there = {tensor: value.cuda().requires_grad_(True)
             for tensor, value in given.items()}
    out_cpu, out_gpu = returned(on_cpu(**here)), returned(on_gpu(**there))
    for gpu, cpu in zip(out_gpu, out_cpu):
        assert_near(gpu.detach(), cpu.detach())
    incoming = [torch.randn_like(value) for value in out_cpu]
    wrt_cpu = list(on_cpu.parameters()) + list(here.values())
    wrt_gpu = list(on_gpu.parameters()) + list(there.values())
    grads_cpu = torch.autograd.grad(out_cpu, wrt_cpu, incoming,
                                    allow_unused=True)
    grads_gpu = torch.autograd.grad(out_gpu, wrt_gpu,
                                    [value.cuda() for value in incoming],
                                    allow_unused=True)
    assert any(grad is not None for grad in grads_cpu)
    for gpu, cpu in zip(grads_gpu, grads_cpu):
        assert (gpu is None) == (cpu is None)
        if cpu is not None:
            assert_near(gpu, cpu)


def test_gpu_module_passes_gradcheck():
    _, gpu_model = models("fit")
    module = EnergyModule(gpu_model, D=3)
    torch.manual_seed(2)
    values = (module.W.detach().clone().requires_grad_(True),
              torch.randn(4, 3, dtype=F64, device="cuda", requires_grad=True),
              torch.randn(3, dtype=F64, device="cuda", requires_grad=True))

    def run(weights, x, mu):
        return module.functional({"W": weights}, x=x, mu=mu)

    assert torch.autograd.gradcheck(run, values, eps=1e-6, atol=1e-7,
                                    rtol=1e-5)


def test_gpu_module_waits_for_torch_current_stream():
    on_cpu, on_gpu = modules("fit")
    base = torch.randn(2048, 2048, dtype=F64, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # Queued on the side stream behind a product that takes a while:
        # the module reads x only once it is there.
        product = base @ base
        x = (product[:4, :3] / product[:4, :3].abs().max()).contiguous()
        mu = torch.zeros(3, dtype=F64, device="cuda")
        out = on_gpu(x=x, mu=mu)
    torch.cuda.synchronize()
    assert_near(out.detach(),
                on_cpu(x=x.cpu(), mu=mu.cpu()).detach())


def adam_steps(layer, device, x, target):
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    for _ in range(5):
        optimizer.zero_grad()
        final = layer(x=x.to(device), mu=torch.zeros(3, dtype=F64,
                                                     device=device))
        loss = ((final - target.to(device)) ** 2).sum()
        loss.backward()
        optimizer.step()


def test_adam_on_the_gpu_follows_the_cpu():
    on_cpu, on_gpu = modules("fit")
    torch.manual_seed(3)
    x, target = torch.randn(4, 3, dtype=F64), torch.randn(3, dtype=F64)
    initial = on_cpu.W.detach().clone()
    adam_steps(on_cpu, "cpu", x, target)
    adam_steps(on_gpu, "cuda", x, target)
    assert (on_cpu.W.detach() - initial).abs().max() > 1e-3
    assert_near(on_gpu.W.detach(), on_cpu.W.detach())


def test_training_on_a_side_stream_follows_the_cpu():
    # The sessions' kernels, products and snapshot copies go on the side
    # stream, in order with torch's work there.
    on_cpu, on_gpu = modules("fit")
    torch.manual_seed(4)
    x, target = torch.randn(4, 3, dtype=F64), torch.randn(3, dtype=F64)
    adam_steps(on_cpu, "cpu", x, target)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        adam_steps(on_gpu, "cuda", x, target)
    torch.cuda.synchronize()
    assert_near(on_gpu.W.detach(), on_cpu.W.detach())


def test_module_from_source_moves_to_the_gpu():
    if not energy._energy.has_compiler:
        pytest.skip("compiles from source: needs the compiler")
    module = EnergyModule(FIT, dtype="f64", opt_level=0, D=3)
    reference = EnergyModule(FIT, dtype="f64", opt_level=0, D=3)
    module.to("cuda")
    x, mu = torch.randn(4, 3, dtype=F64), torch.randn(3, dtype=F64)
    assert_near(module(x=x.cuda(), mu=mu.cuda()).detach(),
                reference(x=x, mu=mu).detach())


if __name__ == "__main__" and sys.argv[1:2] == ["prepare"]:
    prepare(*sys.argv[2:4])
