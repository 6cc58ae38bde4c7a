"""CUDA sessions on an application's stream, without a GPU: models compiled
for CUDA run against the fake driver of the runtime's tests
(tests/unit/runtime/KernelSupport/fake_cuda_driver.c, also standing in for
cuBLAS), which runs no kernel but logs every launch, product, copy, prefetch
and wait with its stream. With a stream set, all of a call's GPU work goes on
that stream, the host waits for nothing else (no context-wide wait), the
backward pass's snapshots are copied there without a wait, and each step
adds exactly one wait: the one before the step returns (no host round trip
inside a step or a backward step; checked on a self-attention model trained
through its dynamics and on the Energy Transformer). Without one, the work goes on the legacy
default stream as before. Each case runs in a child process, which loads the
fake driver first (ENERGY_CUDA_DRIVER is read once per process)."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specs import ATTENTION_TRAIN, EXAMPLES, SOURCE_DIR  # noqa: E402

FAKE_DRIVER = os.environ.get("ENERGY_FAKE_CUDA_DRIVER")
pytestmark = pytest.mark.skipif(
    not FAKE_DRIVER or not os.path.exists(FAKE_DRIVER),
    reason="the fake CUDA driver is built with the tests "
           "(ENERGY_FAKE_CUDA_DRIVER)")

STREAM = 0x5000
STREAM_TAG = "@" + hex(STREAM)
# GPU work; "copy!" is the driver's synchronous copy, "wait" a wait for the
# whole device, "sync" a wait for one stream.
WORK = ("launch:", "gemm", "copy", "prefetch")


class FakeCudaTensor:
    """A DLPack producer whose tensor says it is on CUDA device 0 (the fake
    driver's device memory is the host's): records the stream a consumer
    asks it to make the tensor ready on."""

    def __init__(self, array):
        import ctypes
        self.array, self.streams = array, []

        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int),
                        ("device_id", ctypes.c_int), ("ndim", ctypes.c_int),
                        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16),
                        ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)),
                        ("byte_offset", ctypes.c_uint64)]

        class DLManagedTensor(ctypes.Structure):
            _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                        ("deleter", ctypes.c_void_p)]

        self.shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        self.managed = DLManagedTensor()
        tensor = self.managed.dl_tensor
        tensor.data = array.ctypes.data
        tensor.device_type, tensor.device_id, tensor.ndim = 2, 0, array.ndim
        tensor.code, tensor.bits, tensor.lanes = 2, array.itemsize * 8, 1
        tensor.shape = self.shape

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        import ctypes
        self.streams.append(stream)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), b"dltensor", None)


def child(case):
    """Runs `case` against the fake driver; prints its logs as JSON."""
    import ctypes

    import numpy as np

    import energy

    TRAINED = {
        "attention": (ATTENTION_TRAIN, {"B": 2, "N": 4, "D": 8}),
        "energy-transformer": (
            os.path.join(SOURCE_DIR, "tests", "zoo", "models",
                         "energy_transformer.energy"),
            {"B": 2, "N": 4, "D": 8, "H": 2, "Y": 4, "M": 6}),
    }

    fake = ctypes.CDLL(os.environ["ENERGY_CUDA_DRIVER"])
    fake.fake_cuda_take_events.restype = ctypes.c_char_p

    def events():
        return fake.fake_cuda_take_events().decode().split()

    rng = np.random.default_rng(0)
    logs = {}
    if case == "device-tensor":
        model = energy.compile(os.path.join(EXAMPLES, "hopfield.energy"),
                               target="cuda")
        session = model.session(N=8, K=4)
        session.set_stream(STREAM)
        session["x"] = rng.standard_normal((8, 64)).astype(np.float32)
        memories = FakeCudaTensor(
            rng.standard_normal((4, 64)).astype(np.float32))
        session["m"] = memories  # bound before the first evaluation
        session.run(steps=1)
        events()
        session["m"] = memories  # copied at once
        logs["streams"] = memories.streams
        logs["set"] = events()
        logs["copied"] = bool(np.array_equal(session["m"], memories.array))
        print(json.dumps(logs))
        return
    if case in ("run", "default-stream", "failure"):
        model = energy.compile(os.path.join(EXAMPLES, "hopfield.energy"),
                               target="cuda")
        session = model.session(N=8, K=4)
        session["m"] = rng.standard_normal((4, 64)).astype(np.float32)
        session["x"] = rng.standard_normal((8, 64)).astype(np.float32)
        if case != "default-stream":
            session.set_stream(STREAM)
        if case == "failure":
            try:
                session.run(steps=1)
            except energy.RuntimeError as error:
                logs["error"] = str(error)
            print(json.dumps(logs))
            return
        for steps in (2, 3):
            events()
            session.run(steps=steps)
            logs[steps] = events()
    else:
        source, dims = TRAINED[case]
        model = energy.compile(source, target="cuda")
        session = model.session(**dims)
        for name, info in model.tensors.items():
            if info["role"] in ("input", "param"):
                shape = [dims[dim.strip()]
                         for dim in info["shape"].strip("[]").split(",")]
                session[name] = rng.standard_normal(shape).astype(np.float32)
        session.set_stream(STREAM)
        for steps in (2, 3):
            session.loss_grad(steps=steps)  # the snapshots' memory, once
            events()
            session.loss_grad(steps=steps)
            logs[steps] = events()
    print(json.dumps(logs))


def run_child(case, **environment):
    env = dict(os.environ, ENERGY_CUDA_DRIVER=FAKE_DRIVER,
               ENERGY_CUBLAS=FAKE_DRIVER, **environment)
    for name in ("ENERGY_CUDA_SYNC", "ENERGY_CUDA_TRACE"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), case], env=env,
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def waits(log):
    return sum(event.startswith(("sync", "wait")) for event in log)


def check_on_stream(log):
    work = [event for event in log if event.startswith(WORK)]
    assert work, log
    assert all(event.endswith(STREAM_TAG) for event in work), log
    assert all(event == "sync" + STREAM_TAG
               for event in log if event.startswith(("sync", "wait"))), log


def test_a_run_goes_on_the_stream_and_waits_once_per_step():
    logs = run_child("run")
    for log in logs.values():
        check_on_stream(log)
    assert waits(logs["3"]) - waits(logs["2"]) == 1, logs


@pytest.mark.parametrize("model", ["attention", "energy-transformer"])
def test_a_training_step_stays_on_the_stream(model):
    logs = run_child(model)
    for log in logs.values():
        check_on_stream(log)
        # The snapshots of the forward steps: copied on the stream.
        assert any(event.startswith("copy@") for event in log), log
    # One more step: a forward and a backward step, one wait each.
    assert waits(logs["3"]) - waits(logs["2"]) == 2, logs


def test_without_a_stream_the_work_goes_on_the_default_stream():
    logs = run_child("default-stream")
    for log in logs.values():
        launches = [event for event in log if event.startswith("launch:")]
        assert launches and all("@" not in event for event in launches), log
        assert "wait" in log and not any(
            event.startswith("sync@") for event in log), log


STEP_WAIT_MODELS = {
    # The Energy Transformer's training step; the RBM's, whose step count
    # a scalar that a kernel adds to and whose seed's sums kernels take
    # from the GPU's memory (before: 2 waits a step, 4 in the seed);
    # self-attention stepped by Newton, whose backward step's conjugate
    # gradients choose their result by a convergence test on the GPU.
    "energy_transformer": ("tests/zoo/models",
                           ["B=2", "N=4", "D=8", "H=2", "Y=4", "M=6"], 12),
    "rbm_free_energy": ("tests/zoo/models", ["B=3", "D=5", "H=4"], 10),
    "attention_newton": ("tests/e2e/loss_models", ["N=4", "D=3"], 4),
}


@pytest.mark.parametrize("model", sorted(STEP_WAIT_MODELS))
def test_the_runtime_reports_one_wait_per_step(tmp_path, model):
    # What the GPU bundle runs on a GPU (tests/e2e/device/step_waits.py):
    # the runtime's own account of the host's waits, here against the fake
    # driver, for a training step.
    folder, dims, steps = STEP_WAIT_MODELS[model]
    energyc = os.environ["ENERGYC"]
    artifact = str(tmp_path / (model + ".so"))
    subprocess.run([energyc, "--target", "cuda", os.path.join(
        SOURCE_DIR, folder, model + ".energy"),
        "-o", artifact], check=True, timeout=300)
    script = os.path.join(SOURCE_DIR, "tests", "e2e", "device",
                          "step_waits.py")
    dim_arguments = [part for dim in dims for part in ("--dim", dim)]
    result = subprocess.run(
        [sys.executable, script, "--once",
         "energy_kernel_step,energy_kernel_backward_step,"
         "energy_kernel_backward_seed",
         os.path.join(os.path.dirname(energyc), "energy-exec"), artifact,
         *dim_arguments, "--init", "random:1"],
        env=dict(os.environ, ENERGY_CUDA_DRIVER=FAKE_DRIVER,
                 ENERGY_CUBLAS=FAKE_DRIVER),
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["energy_kernel_step"]["calls"] >= steps, summary
    assert summary["energy_kernel_backward_step"]["calls"] == steps, summary


def test_a_gpu_tensor_is_copied_on_the_stream():
    # Made ready on the session's stream (DLPack's handshake), copied there
    # by the driver, and that stream waited for (not the device).
    logs = run_child("device-tensor")
    assert logs["streams"] == [STREAM, STREAM], logs
    assert "copy" + STREAM_TAG in logs["set"], logs
    assert "copy!" not in logs["set"] and "wait" not in logs["set"], logs
    assert "sync" + STREAM_TAG in logs["set"], logs
    assert logs["copied"], logs


def test_a_failed_launch_names_the_kernel():
    logs = run_child("failure", ENERGY_FAKE_CUDA_FAIL_LAUNCH="gradient")
    assert "cannot launch kernel energy_gradient" in logs["error"], logs
    assert "CUDA_ERROR_LAUNCH_FAILED" in logs["error"], logs


if __name__ == "__main__":
    child(sys.argv[1])
