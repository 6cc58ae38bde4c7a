"""energy.torch: compiled energy models as layers of PyTorch models.

    from energy.torch import EnergyModule
    layer = EnergyModule("model.energy", D=64)      # params: nn.Parameters
    final = layer(x=inputs)                          # runs the dynamics

``forward(**tensors)`` binds the model's inputs and, optionally, initial
values of its states, runs the dynamics and returns the model's outputs at
the final states, or the final states when it declares no output (a tensor
when there is one, else a dict by name). Its backward is the compiler's
adjoint through the dynamics, seeded with the incoming gradients of what
forward returned (the model compiled with ``caller_cotangents``): it
gives gradients to the params, the inputs and the initial states, so the
layer composes with other layers, ``torch.optim`` and
``torch.autograd.gradcheck`` (f64). The model's own losses are not used.

On the GPU: ``EnergyModule(..., device="cuda")`` (or ``.to("cuda")`` on a
module built from source) runs CUDA tensors in a session of the model
compiled with ``target="cuda"``: inputs are copied on the device, the
session's work goes on torch's current stream, and outputs and
gradients come back as CUDA tensors without passing through the host. The
runtime uses CUDA device 0.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, Iterable, Mapping, Optional, Union

import torch

import energy

if TYPE_CHECKING:
    import os


class EnergyModule(torch.nn.Module):
    """A compiled energy model as a ``torch.nn.Module``.

    ``source_or_model``: a ``.energy`` path or source text (compiled with
    ``caller_cotangents``), or an ``energy.Model`` compiled so. ``dtype``:
    ``"f32"`` or ``"f64"`` (default: torch's default dtype). ``seed``: the
    draw of params and states without an initialiser. ``steps``: the run's
    length (default: the model's). ``opt_level``: as ``energy.compile``'s.
    ``device``: where the params start, ``"cpu"`` or ``"cuda"`` (default:
    the model's device, else the CPU); from source, the model is compiled
    for each device the module's tensors are on when it first sees them.
    ``dims``: values of free dims, fixed for
    the module's life (and the sizes its kernels are planned at); every dim
    of a param's shape must be among them (or have a default in the model),
    the others are read from the tensors ``forward`` is given.
    """

    def __init__(self, source_or_model: Union[str, "os.PathLike",
                                              energy.Model], *,
                 dtype: Optional[str] = None, seed: int = 0,
                 steps: Optional[int] = None, plugins: Iterable[str] = (),
                 opt_level: Optional[int] = None,
                 device: Union[str, torch.device, None] = None,
                 **dims: int):
        super().__init__()
        self._models = {}
        if isinstance(source_or_model, energy.Model):
            model = source_or_model
            self._source = None
            if device is not None and torch.device(device).type != model.device:
                raise energy.Error(
                    f"model {model.name} was compiled for {model.device}, "
                    f"not {device}: give EnergyModule its source, or a "
                    f"model compiled with target={torch.device(device).type!r}")
        else:
            if dtype is None:
                dtype = ("f64" if torch.get_default_dtype() == torch.float64
                         else "f32")
            self._source = source_or_model
            self._compile_options = dict(dtype=dtype, plugins=plugins,
                                         opt_level=opt_level, dims=dims)
            model = self._compile(_device_type(device or "cpu"))
        if not model.incoming:
            raise energy.Error(
                f"model {model.name} was compiled without caller "
                "cotangents: give EnergyModule its source, or compile it "
                "with caller_cotangents=True")
        self._models[model.device] = model
        self.model, self.dims, self.seed, self.steps = model, dims, seed, steps
        incoming = set(model.incoming.values())
        tensors = model.tensors
        self.output_names = list(model.outputs)
        self.state_names = [name for name in model.incoming
                            if name not in self.output_names]
        self.returned_names = self.output_names or self.state_names
        self.input_names = [name for name, info in tensors.items()
                            if info["role"] == "input"
                            and name not in incoming]
        self.param_names = [name for name, info in tensors.items()
                            if info["role"] == "param"]
        for name, value in self._initial_params().items():
            self.register_parameter(name, torch.nn.Parameter(
                torch.from_numpy(value).to(model.device)))

    def _compile(self, device_type):
        return energy.compile(self._source, target=device_type,
                              caller_cotangents=True,
                              **self._compile_options)

    def _model_on(self, device):
        """The model whose sessions take tensors on ``device``."""
        kind = _device_type(device)
        if kind not in self._models:
            if self._source is None:
                raise energy.Error(
                    f"the tensors are on {device}, but model "
                    f"{self.model.name} was compiled for {self.model.device}:"
                    " give EnergyModule its source, or a model compiled "
                    f"with target={kind!r}")
            self._models[kind] = self._compile(kind)
        return self._models[kind]

    def _initial_params(self):
        """The params' values as the model initialises them, from a session
        whose other dims are 1 (their values do not change a param's)."""
        known = ({name for name, default in self.model.dims.items()
                  if default is not None or name not in self.model.free_dims}
                 | set(self.dims))
        for name in self.param_names:
            shape = self.model.tensors[name]["shape"]
            for dim in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", shape):
                if dim not in known:
                    raise energy.Error(
                        f"param '{name}' is {shape}: give EnergyModule the "
                        f"value of dim {dim} ({dim}=...)")
        dims = {dim: 1 for dim in self.model.free_dims}
        dims.update(self.dims)
        session = self.model.session(dims, seed=self.seed)
        return {name: session[name] for name in self.param_names}

    def _session(self, names, tensors):
        devices = {tensor.device for tensor in tensors}
        if len(devices) > 1:
            raise energy.Error(
                "the tensors are on different devices: " + ", ".join(
                    f"{name} on {tensor.device}"
                    for name, tensor in zip(names, tensors)))
        device = devices.pop() if devices else torch.device("cpu")
        session = self._model_on(device).session(self.dims, seed=self.seed)
        if device.type == "cuda":
            session.set_stream(torch.cuda.current_stream(device))
        for name, tensor in zip(names, tensors):
            _bind(session, name, tensor)
        return session

    def functional(self, params: Optional[Mapping[str, torch.Tensor]] = None,
                   **given: torch.Tensor
                   ) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
        """``forward`` with some params replaced by ``params`` (a dict of
        tensors), so that they can be differentiated as arguments
        (``torch.autograd.gradcheck``)."""
        params = params or {}
        unknown = (set(given) - set(self.input_names)
                   - set(self.state_names))
        if unknown:
            raise energy.Error(
                f"{', '.join(sorted(unknown))}: not an input or state of "
                f"model {self.model.name} (inputs: "
                f"{', '.join(self.input_names)}; states: "
                f"{', '.join(self.state_names)})")
        names = list(self.param_names) + list(given)
        tensors = [params.get(name, getattr(self, name))
                   for name in self.param_names] + list(given.values())
        finals = _Run.apply(self, names, *tensors)
        if len(self.returned_names) == 1:
            return finals[0] if isinstance(finals, tuple) else finals
        return dict(zip(self.returned_names, finals))

    def forward(self, **given: torch.Tensor
                ) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
        """Runs the dynamics from the given inputs (and initial states) and
        returns the outputs the model declares at the final states, or the
        final states when it declares none."""
        return self.functional(None, **given)

    def extra_repr(self) -> str:
        return f"model={self.model.name}, dims={self.dims}"


def _device_type(device):
    kind = torch.device(device).type
    if kind not in ("cpu", "cuda"):
        raise energy.Error(f"device {device}: EnergyModule runs on the CPU "
                           "or on CUDA")
    return kind


def _bind(session, name, tensor):
    """Binds ``tensor`` in the model's dtype (on the GPU the runtime takes
    no other)."""
    dtype = torch.float32 if session.model.dtype == "f32" else torch.float64
    session[name] = tensor.detach().to(dtype).contiguous()


def _from_dlpack(capsule):
    """A tensor of its own from ``Session.dlpack``'s capsule (on the GPU, a
    view of the session's buffer: copied)."""
    tensor = torch.from_dlpack(capsule)
    return tensor.clone() if tensor.is_cuda else tensor


class _Run(torch.autograd.Function):
    """A run of the dynamics; its backward reruns it and the backward
    program from the incoming gradients (no state is kept between the
    two)."""

    @staticmethod
    def forward(ctx, module, names, *tensors):
        session = module._session(names, tensors)
        session.run(module.steps)
        ctx.module, ctx.names = module, names
        ctx.save_for_backward(*tensors)
        return tuple(_from_dlpack(session.dlpack(name))
                     for name in module.returned_names)

    @staticmethod
    def backward(ctx, *incoming):
        module, names = ctx.module, ctx.names
        tensors = ctx.saved_tensors
        session = module._session(names, tensors)
        for name, gradient in zip(module.returned_names, incoming):
            if gradient is not None:
                _bind(session, module.model.incoming[name], gradient)
        session.loss_grad(module.steps, grads=False)
        return (None, None) + tuple(
            _from_dlpack(session.adjoint_dlpack(name)).to(tensor.dtype)
            if needed else None
            for name, tensor, needed in zip(names, tensors,
                                            ctx.needs_input_grad[2:]))
