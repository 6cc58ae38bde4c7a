"""energy.Trainer: the runtime's trainer from Python equals energy-train on
the same data and options, and, data-parallel over torch.distributed's
gloo all_gather in two processes, equals itself alone (f64: the shards'
gradients summed in another order, so to rounding)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import energy
from specs import ATTENTION_TRAIN, SOURCE_DIR


def data(seed=5):
    rng = np.random.default_rng(seed)
    return {"h": rng.standard_normal((12, 4, 5)) * 0.7,
            "y": rng.standard_normal((12, 4, 5)) * 0.7,
            "Wq": rng.standard_normal((5, 5)) * 0.5,
            "Wk": rng.standard_normal((5, 5)) * 0.5}


def train_alone(arrays):
    model = energy.compile(ATTENTION_TRAIN, dtype="f64", opt_level=0)
    trainer = energy.Trainer(
        model, {"h": arrays["h"], "y": arrays["y"]}, batch=6, epochs=2, seed=3,
        lr=0.01, fixed={"Wq": arrays["Wq"], "Wk": arrays["Wk"]})
    summaries = trainer.train()
    assert [s["epoch"] for s in summaries] == [1, 2]
    return trainer.params(), summaries


def test_trainer_equals_energy_train(tmp_path):
    energyc, energy_train = (os.environ.get("ENERGYC"),
                             os.environ.get("ENERGY_TRAIN"))
    if not energyc or not energy_train:
        pytest.skip("ENERGYC and ENERGY_TRAIN (the tools) are not set")
    sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e", "training"))
    import safetensors_io

    arrays = data()
    safetensors_io.write(tmp_path / "data.safetensors",
                         {"h": arrays["h"], "y": arrays["y"]})
    safetensors_io.write(tmp_path / "init.safetensors",
                         {"Wq": arrays["Wq"], "Wk": arrays["Wk"]})
    subprocess.run([energyc, ATTENTION_TRAIN, "--dtype", "f64", "-o",
                    str(tmp_path / "model.so")], check=True)
    subprocess.run([energy_train, str(tmp_path / "model.so"), "--data",
                    str(tmp_path / "data.safetensors"), "--in",
                    str(tmp_path / "init.safetensors"), "--dim", "N=4",
                    "--dim", "D=5", "--batch", "6", "--epochs", "2", "--seed",
                    "3", "--lr", "0.01", "--quiet", "--out",
                    str(tmp_path / "out.safetensors")], check=True,
                   stdout=subprocess.DEVNULL)
    theirs = safetensors_io.read(tmp_path / "out.safetensors")
    ours, _ = train_alone(arrays)
    for name in ("Wq", "Wk"):
        assert np.abs(ours[name] - arrays[name]).max() > 1e-3
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-12,
                                   atol=1e-14)


def test_data_parallel_trainer_over_torch_distributed(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_gloo_available():
        pytest.skip("torch without gloo")
    arrays = data()
    np.savez(tmp_path / "data.npz", **arrays)
    worker = os.path.join(os.path.dirname(__file__), "trainer_worker.py")
    processes = [subprocess.Popen(
        [sys.executable, worker, str(rank), "2", str(tmp_path / "init"),
         str(tmp_path / "data.npz"), str(tmp_path / "params.npz")])
        for rank in range(2)]
    for process in processes:
        assert process.wait(timeout=120) == 0
    parallel = np.load(tmp_path / "params.npz")
    alone, _ = train_alone(arrays)
    for name in ("Wq", "Wk"):
        np.testing.assert_allclose(parallel[name], alone[name], rtol=1e-12,
                                   atol=1e-14)


def test_trainer_misuse():
    model = energy.compile(ATTENTION_TRAIN, dtype="f64", opt_level=0)
    arrays = data()
    with pytest.raises(ValueError):
        energy.Trainer(model, {"h": arrays["h"]}, size=2)
    with pytest.raises(energy.RuntimeError, match="batch size 20"):
        energy.Trainer(model, {"h": arrays["h"], "y": arrays["y"]}, batch=20)
    # Sizes that disagree are found when the first batch's dims are resolved.
    trainer = energy.Trainer(model, {"h": arrays["h"],
                                     "y": arrays["y"][:, :3]}, batch=6)
    with pytest.raises(energy.ShapeError, match="dim N is 4"):
        trainer.run_epoch()
