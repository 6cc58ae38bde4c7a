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
CPU tensors only for now.
"""

import re

import torch

import energy


class EnergyModule(torch.nn.Module):
    """A compiled energy model as a ``torch.nn.Module``.

    ``source_or_model``: a ``.energy`` path or source text (compiled with
    ``caller_cotangents``), or an ``energy.Model`` compiled so. ``dtype``:
    ``"f32"`` or ``"f64"`` (default: torch's default dtype). ``seed``: the
    draw of params and states without an initialiser. ``steps``: the run's
    length (default: the model's). ``opt_level``: as ``energy.compile``'s.
    ``dims``: values of free dims, fixed for
    the module's life (and the sizes its kernels are planned at); every dim
    of a param's shape must be among them (or have a default in the model),
    the others are read from the tensors ``forward`` is given.
    """

    def __init__(self, source_or_model, *, dtype=None, seed=0, steps=None,
                 plugins=(), opt_level=None, **dims):
        super().__init__()
        if isinstance(source_or_model, energy.Model):
            model = source_or_model
        else:
            if dtype is None:
                dtype = ("f64" if torch.get_default_dtype() == torch.float64
                         else "f32")
            model = energy.compile(source_or_model, dtype=dtype,
                                   plugins=plugins, caller_cotangents=True,
                                   opt_level=opt_level, dims=dims)
        if not model.incoming:
            raise energy.Error(
                f"model {model.name} was compiled without caller "
                "cotangents: give EnergyModule its source, or compile it "
                "with caller_cotangents=True")
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
            self.register_parameter(name,
                                    torch.nn.Parameter(torch.from_numpy(value)))

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
        session = self.model.session(self.dims, seed=self.seed)
        for name, tensor in zip(names, tensors):
            if tensor.device.type != "cpu":
                raise energy.Error(
                    f"tensor '{name}' is on {tensor.device}: EnergyModule "
                    "runs on the CPU for now")
            session[name] = tensor.detach().contiguous()
        return session

    def functional(self, params=None, **given):
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

    def forward(self, **given):
        """Runs the dynamics from the given inputs (and initial states) and
        returns the outputs the model declares at the final states, or the
        final states when it declares none."""
        return self.functional(None, **given)

    def extra_repr(self):
        return f"model={self.model.name}, dims={self.dims}"


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
        return tuple(torch.from_numpy(session[name])
                     for name in module.returned_names)

    @staticmethod
    def backward(ctx, *incoming):
        module, names = ctx.module, ctx.names
        tensors = ctx.saved_tensors
        session = module._session(names, tensors)
        for name, gradient in zip(module.returned_names, incoming):
            if gradient is not None:
                session[module.model.incoming[name]] = (
                    gradient.detach().contiguous())
        grads = session.loss_grad(module.steps)["grads"]
        return (None, None) + tuple(
            torch.from_numpy(grads[name]).to(tensor.dtype)
            if needed else None
            for name, tensor, needed in zip(names, tensors,
                                            ctx.needs_input_grad[2:]))
