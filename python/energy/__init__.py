"""energy: compile energy-graph models and run them from Python.

    import energy
    model = energy.compile("model.energy")          # or source text
    session = model.session(N=64, D=32)
    session["x"] = numpy_array_or_torch_tensor
    session.energy(); session.grad(); session.run(); session.loss_grad()

``energy.load("model.so")`` loads an artifact written by ``energyc``. Tensors
go in as numpy arrays, DLPack producers (torch tensors; on the GPU for a
model compiled with ``target="cuda"``), nested sequences or numbers, and
come out as numpy arrays (``session["x"]``) or DLPack capsules
(``session.dlpack("x")``). Errors are ``energy.Error``s: ``CompileError``,
``ShapeError``, ``RuntimeError`` (energy/errors.py).
"""

from __future__ import annotations

import os
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List,
                    Mapping, Optional)

from . import _energy
from .errors import CompileError, Error, RuntimeError, ShapeError

if TYPE_CHECKING:
    import numpy

__all__ = ["compile", "load", "Model", "Session", "Trainer", "Error",
           "CompileError", "ShapeError", "RuntimeError"]


def compile(source_or_path: str | os.PathLike, *, target: str = "cpu",
            dtype: str = "f32", plugins: Iterable[str | os.PathLike] = (),
            caller_cotangents: bool = False, opt_level: Optional[int] = None,
            dims: Optional[Mapping[str, int]] = None) -> Model:
    """Compiles a model in this process and returns it as a ``Model``.

    ``source_or_path`` is a path to a ``.energy`` file or the source text
    itself. ``target`` is ``"cpu"`` or ``"cuda"``, ``dtype`` ``"f32"``,
    ``"f64"`` or ``"bf16"`` (cuda), ``plugins`` paths of plugin libraries.
    With ``caller_cotangents`` (as ``energyc --caller-cotangents``), the
    backward program is seeded by the caller's cotangents of the final
    states, inputs ``X.incoming``, instead of the model's losses, and
    differentiates the inputs too: what ``energy.torch.EnergyModule``
    compiles. ``opt_level`` (0-3; default 2) is how hard the kernels are
    optimised: lower levels compile faster and run slower, 3 compiles
    longer and runs no faster. ``dims``: sizes (a mapping of dim names to
    positive integers) at which the kernels are planned, the dims'
    defaults: the artifact runs at any sizes, fastest at these. Raises ``CompileError``
    with the first error's place.
    """
    if not _energy.has_compiler:
        raise Error("this build of the energy package has no compiler (it "
                    "was built without MLIR): load artifacts that energyc "
                    "wrote with energy.load")
    if target not in ("cpu", "cuda"):
        raise ValueError(f"target {target!r}: expected 'cpu' or 'cuda'")
    if dtype not in ("f32", "f64", "bf16"):
        raise ValueError(f"dtype {dtype!r}: expected 'f32', 'f64' or 'bf16'")
    if dtype == "bf16" and target != "cuda":
        raise ValueError("dtype 'bf16' needs target 'cuda' (bf16 products "
                         "run on tensor cores; the cpu target computes in "
                         "f32 or f64)")
    if opt_level not in (None, 0, 1, 2, 3):
        raise ValueError(f"opt_level {opt_level!r}: expected 0, 1, 2 or 3")
    sizes = []
    for dim, size in dict(dims or {}).items():
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError(f"dims {dim}={size!r}: expected a positive "
                             "integer")
        sizes.append((str(dim), size))
    is_path = isinstance(source_or_path, os.PathLike)
    source = os.fspath(source_or_path)
    name = "<source>"
    if is_path or ("\n" not in source and "{" not in source):
        if not os.path.exists(source):
            raise Error(f"{source}: no such file (pass a path to a .energy "
                        "file or the model's source text)")
        name = source
        with open(source, encoding="utf-8") as file:
            source = file.read()
    return Model(_energy.compile(source, name, target, dtype,
                                 [os.fspath(p) for p in plugins],
                                 caller_cotangents, opt_level, sizes))


def load(path: str | os.PathLike) -> Model:
    """Loads an artifact compiled by ``energyc`` (a shared library)."""
    return Model(_energy.load(os.fspath(path)))


class Model:
    """A compiled model: its manifest and dims, and sessions of it."""

    def __init__(self, compiled: _energy.Model):
        self._model = compiled

    name = property(lambda self: self._model.name)
    dtype = property(lambda self: self._model.dtype)
    device = property(lambda self: self._model.device)
    dims = property(lambda self: self._model.dims,
                    doc="Dim names and their defaults (None: no default).")
    free_dims = property(lambda self: self._model.free_dims,
                         doc="The dims a session may be given (not derived).")
    tensors = property(lambda self: self._model.tensors,
                       doc="Tensor names and their role and declared shape.")
    outputs = property(lambda self: self._model.outputs)
    terms = property(lambda self: self._model.terms)
    losses = property(lambda self: self._model.losses)
    adjoints = property(
        lambda self: self._model.adjoints,
        doc="The tensors loss_grad differentiates, in manifest order.")
    incoming = property(
        lambda self: self._model.incoming,
        doc="Each state and the input holding the caller's cotangent of its "
            "final value (a model compiled with caller_cotangents).")
    has_dynamics = property(lambda self: self._model.has_dynamics)

    @property
    def manifest(self) -> Dict[str, Any]:
        """The artifact's manifest, as a dict."""
        import json
        return json.loads(self._model.manifest_text)

    def set_threads(self, threads: int) -> bool:
        """Sets the kernels' thread count; False when they have no threads."""
        return self._model.set_threads(threads)

    def session(self, dims: Optional[Mapping[str, int]] = None, *,
                seed: Optional[int] = None,
                consts: Optional[Mapping[str, float]] = None,
                **more_dims: int) -> Session:
        """A session: values for the model's tensors.

        Dims are keyword arguments (``model.session(N=8)``) or a dict
        (``model.session({"seed": 3})`` for a dim named like an option).
        ``seed`` draws tensors without an initialiser at random; ``consts``
        overrides the source's constants.
        """
        all_dims = dict(dims or {})
        all_dims.update(more_dims)
        return Session(self, self._model.session(all_dims, dict(consts or {}),
                                                 seed))

    def __repr__(self):
        return f"<energy.Model {self.name} ({self.dtype}, {self.device})>"


class Session:
    """Values of a model's tensors, and what can be computed from them."""

    def __init__(self, model: Model, session: _energy.Session):
        self.model = model
        self._session = session

    def __setitem__(self, name: str, value: Any) -> None:
        self._session.set(name, value)

    def set(self, name: str, value: Any) -> None:
        """Binds tensor ``name`` to ``value``. On the CPU, a row-major array
        or tensor of the model's dtype that is an input or param is used in
        place (the session reads its memory at each call); anything else is
        copied, converted to the model's dtype. A session of a CUDA model
        also takes tensors on CUDA device 0 (torch's ``cuda`` tensors, of
        the model's dtype, contiguous), copied on the device."""
        self._session.set(name, value)

    def __getitem__(self, name: str) -> numpy.ndarray:
        return self._session.get(name)

    def get(self, name: str) -> numpy.ndarray:
        """Tensor ``name``'s value, as a numpy array (a copy)."""
        return self._session.get(name)

    def dlpack(self, name: str) -> Any:
        """Tensor ``name``'s value as a DLPack capsule: on the CPU a copy it
        owns; for a CUDA model, a view of the session's buffer on the GPU
        (no copy; it keeps the session alive, and the session's next
        evaluation changes it: ``torch.from_dlpack(...).clone()`` keeps a
        value)."""
        return self._session.dlpack(name)

    def adjoint_dlpack(self, name: str) -> Any:
        """The adjoint of ``name`` that the last ``loss_grad`` left, as
        ``dlpack`` gives a tensor (a view on the GPU for a CUDA model)."""
        return self._session.adjoint_dlpack(name)

    def set_stream(self, stream: Any) -> None:
        """For a CUDA model: each evaluation's kernels, products and copies
        go on ``stream`` (a ``torch.cuda.Stream``, or a CUstream handle as
        an integer; 0 for the legacy default stream), after the work queued
        there; each call returns when its own work is done."""
        handle = getattr(stream, "cuda_stream", stream)
        self._session.set_stream(int(handle or 0))

    @property
    def dims(self) -> Dict[str, int]:
        """Every dim's value, resolved from the bound tensors."""
        return self._session.dims()

    def energy(self, term: Optional[str] = None) -> float:
        """The global energy, or energy term ``term``'s."""
        return self._session.energy(term)

    def grad(self, wrt: Optional[Iterable[str]] = None
             ) -> Dict[str, numpy.ndarray]:
        """Gradients of the energy: {name: array} for the tensors ``wrt``
        names, by default every state tensor but optimizer state."""
        return self._session.grad(None if wrt is None else list(wrt))

    def step(self) -> None:
        """One step of the dynamics."""
        self._session.step()

    def run(self, steps: Optional[int] = None,
            trace: bool = False) -> Dict[str, Any]:
        """Runs the dynamics (``steps``, else the model's count) and returns
        {"steps", "energy", "trace"} (the energy after each step when
        ``trace``)."""
        return self._session.run(steps, trace)

    def loss_grad(self, steps: Optional[int] = None,
                  store_all_steps: bool = False,
                  grads: bool = True) -> Dict[str, Any]:
        """Runs the dynamics and the backward program through them: returns
        {"loss", "losses", "steps", "grads"}, grads the derivative of the
        summed losses with respect to every param and state as numpy arrays
        (without ``grads``, left out: read them with ``adjoint_dlpack``)."""
        return self._session.loss_grad(steps, store_all_steps, grads)

    def reset_states(self) -> None:
        """Sets every state tensor back to its value before the first run."""
        self._session.reset_states()

    @property
    def notes(self) -> List[str]:
        """What the runtime noted (conversions of dtype, ...)."""
        return self._session.notes


class Trainer:
    """Trains a compiled model's params on minibatches, as ``energy-train``
    does (docs/training.md): per batch the data's rows are bound, the state
    is reset, the model's losses are differentiated through the run and
    every param is updated.

    ``data`` (and ``validation``) map input or state names to arrays whose
    first axis holds the examples (the model's batch dim). ``optimizer``:
    ``"sgd"``, ``"momentum"``, ``"adam"``, ``"adamw"`` or a plugin's;
    ``schedule``: ``"constant"``, ``"cosine"``, ``"step"``; ``fixed``: tensors
    bound in every session (fixed inputs, initial params).

    Data-parallel: every process creates the trainer with the same data and
    options and gives ``all_gather`` (a function from this rank's float64
    array to every rank's, concatenated in rank order: with
    torch.distributed, ``dist.all_gather`` then ``torch.cat``), ``rank`` and
    ``size``; each takes a shard of every batch, the shards' gradients are
    summed in rank order, and every rank takes the same update.
    """

    def __init__(self, model: Model, data: Mapping[str, Any], *,
                 validation: Optional[Mapping[str, Any]] = None,
                 batch: int = 0, epochs: int = 1, optimizer: str = "adam",
                 lr: float = 1e-3, weight_decay: float = 0.0,
                 schedule: str = "constant", seed: int = 0,
                 shuffle: bool = True,
                 fixed: Optional[Mapping[str, Any]] = None,
                 all_gather: Optional[Callable[[numpy.ndarray],
                                               numpy.ndarray]] = None,
                 rank: int = 0, size: int = 1):
        if (all_gather is None) != (size == 1 and rank == 0):
            raise ValueError("all_gather, rank and size go together: a "
                             "data-parallel trainer needs all three")
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} of size {size}")
        self.model = model
        self._trainer = _energy.make_trainer(
            model._model, dict(data),
            None if validation is None else dict(validation), batch, epochs,
            optimizer, lr, weight_decay, schedule, seed, shuffle,
            dict(fixed or {}), all_gather, rank, size)

    @property
    def finished(self) -> bool:
        """Whether every epoch has run."""
        return self._trainer.finished

    def run_epoch(self) -> Dict[str, Any]:
        """Runs the next epoch: {"epoch", "train_loss", "validation_loss"}."""
        return self._trainer.run_epoch()

    def train(self) -> List[Dict[str, Any]]:
        """Runs the epochs left; one summary per epoch."""
        summaries = []
        while not self.finished:
            summaries.append(self.run_epoch())
        return summaries

    def params(self) -> Dict[str, numpy.ndarray]:
        """The trained params: {name: array}."""
        return self._trainer.params()

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Params, the optimiser's state and the position in the run, as
        one safetensors file (written atomically)."""
        self._trainer.save_checkpoint(os.fspath(path))

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        self._trainer.load_checkpoint(os.fspath(path))
