"""EnergyModule under torch.nn.parallel.DistributedDataParallel with the
gloo backend, two processes on this machine: its gradients are torch's
autograd's, so DDP averages them across ranks as for any layer, and one
step on two half-batches equals one step on the whole batch in one process
(the mean of the shards' mean gradients is the batch's mean gradient)."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not (torch.distributed.is_available()
        and torch.distributed.is_gloo_available()):
    pytest.skip("torch without gloo", allow_module_level=True)

sys.path.insert(0, os.path.dirname(__file__))
import ddp_worker  # noqa: E402


def test_data_parallel_step_equals_the_whole_batch(tmp_path):
    rng = np.random.default_rng(8)
    data = {"x": rng.standard_normal((6, 4, 3)),
            "target": rng.standard_normal((6, 3)),
            "W": rng.standard_normal((3, 3)) / 2}
    np.savez(tmp_path / "data.npz", **data)
    workers = [subprocess.Popen(
        [sys.executable, ddp_worker.__file__, str(rank), "2",
         str(tmp_path / "init"), str(tmp_path / "data.npz"),
         str(tmp_path / "W.npy")]) for rank in range(2)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    parallel = np.load(tmp_path / "W.npy")

    loaded = np.load(tmp_path / "data.npz")
    layer = ddp_worker.make_layer(loaded)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    ddp_worker.step(layer, optimizer, torch.from_numpy(data["x"]),
                    torch.from_numpy(data["target"]))
    single = layer.W.detach().numpy()
    assert np.abs(single - data["W"]).max() > 1e-3
    np.testing.assert_allclose(parallel, single, rtol=1e-12, atol=1e-14)
