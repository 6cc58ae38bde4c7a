//===- EnergyOps.td - Operations of the energy dialect -------*- tablegen -*-===//
//
// The ops of an energy graph: declarations inside `energy.model`, gradient
// programs and the dynamics that minimise the energy; the expression ops of
// energy terms are EnergyExprOps.td, the kernel plan's EnergyKernelOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_OPS_TD
#define ENERGY_OPS_TD

include "energy/IR/EnergyDialect.td"
include "energy/IR/EnergyTypes.td"
include "energy/IR/EnergyAttrs.td"
include "energy/Interfaces/DerivativeOpInterface.td"
include "energy/Interfaces/ElementwiseOpInterface.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/LoopLikeInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def Energy_ModelOp : Energy_Op<"model", [
    IsolatedFromAbove, SymbolTable, Symbol, NoTerminator, SingleBlock,
    NoRegionArguments, OpAsmOpInterface]> {
  let summary = "An energy graph: declarations, energy terms, outputs, dynamics";
  let description = [{
    The declarations of one model. The global energy is the sum of the
    model's `energy.term`s; its `energy.dynamics` (at most one) says how state
    tensors evolve.

    ```mlir
    energy.model @hopfield {
      energy.dim @N
      energy.tensor @x : state [@N]
      energy.term @e {
        %x = energy.read @x : !energy.array<N>
        %s = energy.reduce_all sqnorm %x : !energy.array<N>
        energy.yield %s : !energy.array<>
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
  let extraClassDeclaration = [{
    /// The dynamics of the model, or null when it has none.
    DynamicsOp getDynamics();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_DimOp : Energy_Op<"dim", [Symbol, HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A symbolic size, bound at run time, with a default or derived";
  let description = [{
    `energy.dim @N` is bound at run time; `energy.dim @D = 64` has a default;
    `energy.dim @Dh = @D / @H` is derived from dims declared before it and is
    never set directly.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<I64Attr>:$default_value,
                       OptionalAttr<Energy_DimExprAttr>:$derived);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Energy_IndexCheckOp : Energy_Op<"index_check", [HasParent<"ModelOp">]> {
  let summary = "An index whose range the runtime checks once it knows the dims";
  let description = [{
    Index `index` of the read `read` (its source text; the op's location is
    the read's) on an axis of size `size`, which the checker could not prove
    in range for every value of the dims. `below` are the conditions (each an
    expression `c` meaning `c ≥ 0`, over dims and `step`) under which some
    index of the read is negative, `above` those under which one reaches
    `size`; a side is absent when it was proven. The runtime refuses to call
    a kernel when every condition of a side holds.

    ```mlir
    energy.index_check "bias[i - j + N]" index 0 of #energy.dim<@N * 2 - 1>
        above [#energy.dim<@N - 1>]
    ```
  }];
  let arguments = (ins StrAttr:$read, I64Attr:$index, Energy_DimExprAttr:$size,
                       OptionalAttr<TypedArrayAttrBase<Energy_DimExprAttr, "conditions">>:$below,
                       OptionalAttr<TypedArrayAttrBase<Energy_DimExprAttr, "conditions">>:$above);
  let assemblyFormat = [{
    $read `index` $index `of` $size (`below` $below^)? (`above` $above^)? attr-dict
  }];
}

def Energy_TensorOp : Energy_Op<"tensor", [Symbol, HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A tensor node of the graph: an input, a param or a state";
  let description = [{
    A named tensor with a role and a shape over the model's dims, and an
    optional initialiser: `zeros`, `ones`, `eye`, `normal(mean, std)`,
    `uniform(low, high)`, or another tensor's value (`= @x`).

    ```mlir
    energy.tensor @Wq : param [@H, @Dh, @D] = normal(0.0, 0.02)
    energy.tensor @z : state [@N, @D] = @x
    ```

    The passes that add state tensors say whose they are, each naming
    another tensor (the manifest carries them; the runtime keeps all but
    optimizer state out of the forward state): `optimizer_state` (set by
    energy-build-updates: the node an optimizer's state belongs to),
    `adjoint_of`, `cotangent_of`, `solver_of` (energy-build-backward: the
    adjoint of a tensor, the scratch of a cotangent, a vector of the
    implicit solve), `deferred_of` (energy-plan-defer-invariant-products:
    a sum over the backward steps that the finish multiplies into that
    adjoint), `cache_flag` and `flag_of` (energy-plan-run-caches: a value
    kept across calls names its flag, the flag its value). An input may say
    `incoming_of` (energy-caller-cotangents: the caller's cotangent of that
    state's final value, which seeds the backward program). An input or
    param marked `exchanged` is set by the runtime between the kernels of
    one call (energy-supplied-gradients: one rank's gathered copies and
    supplied gradients), so no value read from it is kept across kernels.
    A state marked `per_call` (energy-change-of-variables: optimizer state
    that a call's begin computes and its finish turns back into the state)
    holds nothing between calls of the runtime: the runtime keeps it in the
    forward state of a backward pass but lists it with no model tensor.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Energy_RoleAttr:$role,
                       TypedArrayAttrBase<FlatSymbolRefAttr, "dims">:$shape,
                       OptionalAttr<Energy_InitKindAttr>:$init,
                       OptionalAttr<DenseF64ArrayAttr>:$init_args,
                       OptionalAttr<FlatSymbolRefAttr>:$init_source,
                       OptionalAttr<FlatSymbolRefAttr>:$optimizer_state,
                       OptionalAttr<FlatSymbolRefAttr>:$adjoint_of,
                       OptionalAttr<FlatSymbolRefAttr>:$cotangent_of,
                       OptionalAttr<FlatSymbolRefAttr>:$solver_of,
                       OptionalAttr<FlatSymbolRefAttr>:$deferred_of,
                       OptionalAttr<FlatSymbolRefAttr>:$cache_flag,
                       OptionalAttr<FlatSymbolRefAttr>:$flag_of,
                       OptionalAttr<FlatSymbolRefAttr>:$incoming_of,
                       UnitAttr:$exchanged, UnitAttr:$per_call);
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$sym_name, "Role":$role,
                   "::mlir::ArrayAttr":$shape, "InitKindAttr":$init,
                   "::mlir::DenseF64ArrayAttr":$init_args,
                   "::mlir::FlatSymbolRefAttr":$init_source), [{
      build($_builder, $_state, sym_name, role, shape, init, init_args,
            init_source, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The value type of the whole tensor.
    ArrayType getArrayType();
    /// Whether it is part of the forward state: a state tensor that no pass
    /// added (no provenance mark), as the runtime's isForwardState (but
    /// without optimizer state) reads the manifest.
    bool isForwardState();
  }];
}

def Energy_ConstOp : Energy_Op<"const", [Symbol, HasParent<"ModelOp">]> {
  let summary = "A named scalar constant, overridable at run time";
  let arguments = (ins SymbolNameAttr:$sym_name, F64Attr:$value);
  let assemblyFormat = "$sym_name `=` $value attr-dict";
}

def Energy_LetOp : Energy_Op<"let", [Symbol, HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "A named tensor defined by a comprehension over an index domain";
  let description = [{
    `let q[c: N, h: H] = Wq[h] @ z[c]` is a definition, not a buffer: the
    body gives the element at each index. Reads of the let see the domain
    axes followed by the axes of the element type.

    ```mlir
    energy.let @q [%c : @N, %h : @H] : !energy.array<Dh> {
      ...
      energy.yield %v : !energy.array<Dh>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypedArrayAttrBase<Energy_DimExprAttr, "dims">:$domain,
                       TypeAttrOf<Energy_AnyArray>:$element_type);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// Shape of the whole let: domain dims, then the element's dims.
    ArrayType getArrayType();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_TermOp : Energy_Op<"term", [Symbol, HasParent<"ModelOp">,
    SingleBlock, NoRegionArguments, OpAsmOpInterface]> {
  let summary = "An energy term; the global energy is the sum of all terms";
  let description = [{
    A term marked `auxiliary` is not part of the global energy: passes add
    such terms when they need the gradient of another scalar (Newton's
    Hessian-vector products differentiate ⟨∇E, v⟩). A term marked `loss`
    (always also `auxiliary`) is a training objective (`loss NAME = ...;`),
    evaluated after the dynamics at the final values; its gradient through
    the steps is what training follows.

    ```mlir
    energy.term @retrieval {
      ...
      energy.yield %e : !energy.array<>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, UnitAttr:$auxiliary,
                       UnitAttr:$loss);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name (`auxiliary` $auxiliary^)? (`loss` $loss^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name), [{
    build($_builder, $_state, $_builder.getStringAttr(name), false, false);
  }]>];
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_OutputOp : Energy_Op<"output", [Symbol, HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "A read-out computed after the dynamics";
  let description = [{
    ```mlir
    energy.output @F [%t : @N, %j : @D] : !energy.array<> { ... }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypedArrayAttrBase<Energy_DimExprAttr, "dims">:$domain,
                       TypeAttrOf<Energy_AnyArray>:$element_type);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ArrayType getArrayType();
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_YieldOp : Energy_Op<"yield", [Pure, Terminator, ReturnLike]> {
  let summary = "Yields the values of a body";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let hasVerifier = 1;
}

include "energy/IR/EnergyExprOps.td"

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

def Energy_GradientOp : Energy_Op<"gradient", [HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, SingleBlock,
    NoTerminator, NoRegionArguments, OpAsmOpInterface]> {
  let summary = "The gradient of the global energy with respect to tensors";
  let description = [{
    A program whose effect is the gradient: a buffer of the tensor's shape
    starts at zero and every `energy.accumulate` in the body adds into it.
    Derived by `energy-derive-gradients`: the body recomputes each energy
    term (only the term `of` names, when given), then runs its reverse
    sweep, with `energy.foreach` loops where the term reduces over an index
    domain.

    A joint program (`and [...]`) computes the gradients of several tensors
    at the same values in one sweep: it has a buffer per tensor, and each
    accumulation adds into the buffer of the tensor it names.

    ```mlir
    energy.gradient @x {
      energy.foreach (%i : @N) {
        ...
        energy.accumulate %g into @x[%i] : !energy.array<D>
      }
    }
    energy.gradient @mu and [@prec] { ... }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$tensor,
                       OptionalAttr<TypedArrayAttrBase<FlatSymbolRefAttr,
                                                       "tensors">>:$also,
                       OptionalAttr<FlatSymbolRefAttr>:$of);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$tensor (`and` $also^)? (`of` $of^)? attr-dict-with-keyword $body";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
    /// The tensors whose gradients the program computes, `tensor` first.
    ::llvm::SmallVector<::mlir::FlatSymbolRefAttr> getTensors();
    /// Whether the program computes the gradient of `tensor`.
    bool computes(::llvm::StringRef tensor);
    /// Whether the program computes the gradients of more than one tensor.
    bool isJoint() { return getAlso().has_value() && !getAlso()->empty(); }
  }];
}

def Energy_ForeachOp : Energy_Op<"foreach", [NoTerminator,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<LoopLikeOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "Runs a body at every admitted position of an index domain";
  let description = [{
    The loop of a gradient program: the same domain and predicate as an
    `energy.reduce`, a body with side effects (accumulations) and no result.
    `parallel<n>` (set by `energy-plan-kernels`; `parallel` for n = 1) says
    that positions differing in any of the first n indices write disjoint
    slots, so that those indices may be shared out among threads (a CPU
    shares the first, a GPU runs all n as one loop).
  }];
  let arguments = (ins TypedArrayAttrBase<Energy_DimExprAttr, "sizes">:$sizes,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$parallel);
  let regions = (region AnyRegion:$predicate, SizedRegion<1>:$body);
  let builders = [
    OpBuilder<(ins "::mlir::ArrayAttr":$sizes), [{
      build($_builder, $_state, sizes, ::mlir::IntegerAttr());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    bool hasPredicate() { return !getPredicate().empty(); }
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_AccumulateOp : Energy_Op<"accumulate", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite]>]> {
  let summary = "Adds a value into a gradient at affine indices";
  let description = [{
    Adds `value` into the gradient buffer of the enclosing `energy.gradient`
    at the given indices, which slice leading axes as `energy.read` does.
  }];
  let arguments = (ins Energy_AnyArray:$value, FlatSymbolRefAttr:$tensor,
                       AffineMapAttr:$map, Variadic<Index>:$indices);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Dynamics
//===----------------------------------------------------------------------===//

def Energy_DynamicsOp : Energy_Op<"dynamics", [HasParent<"ModelOp">, NoTerminator,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, OpAsmOpInterface]> {
  let summary = "How the state evolves: rules, a step count, a stopping rule";
  let description = [{
    The rules run in the order written once per step, `steps` times or until
    the stopping rule (a region yielding an `i1`) holds after a step.

    With `implicit_iterations` (and `implicit_tolerance`), a loss's gradient
    is taken at the fixed point the run reaches (`backward implicit` in the
    language): `energy-build-backward` solves with the energy's Hessian by
    at most that many rounds of conjugate gradients, stopping at a residual
    of `implicit_tolerance` relative to the right-hand side.

    ```mlir
    energy.dynamics steps 12 order sequential {
      energy.update @x gd(lr = 0.1)
    } until {
      ...
      energy.yield %done : i1
    }
    ```
  }];
  let arguments = (ins Energy_DimExprAttr:$steps, Energy_OrderAttr:$order,
                       OptionalAttr<I64Attr>:$implicit_iterations,
                       OptionalAttr<F64Attr>:$implicit_tolerance);
  let regions = (region SizedRegion<1>:$rules, AnyRegion:$until);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_UpdateOp : Energy_Op<"update", [HasParent<"DynamicsOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, OpAsmOpInterface]> {
  let summary = "A rule that updates a state tensor with a named optimizer";
  let description = [{
    The optimizer (`gd`, `momentum`, `nesterov`, `newton`, `precond`, `ode`,
    `stationary`, or one a plugin registers) and its options, each option a
    body yielding its value. A literal option prints as `lr = 0.1`; others
    print their body. An identifier option (`ode`'s method) is a string.

    ```mlir
    energy.update @x momentum(lr = 1.0, beta = 0.9)
    energy.update @v ode(method = "heun", dt = 0.5)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$node, StrAttr:$optimizer,
                       StrArrayAttr:$option_names,
                       DictionaryAttr:$string_options);
  let regions = (region VariadicRegion<SizedRegion<1>>:$options);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_AssignOp : Energy_Op<"assign", [HasParent<"DynamicsOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, SingleBlock,
    NoRegionArguments, OpAsmOpInterface]> {
  let summary = "An explicit update rule: the node takes the body's value";
  let arguments = (ins FlatSymbolRefAttr:$node);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$node attr-dict-with-keyword $body";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_UpdateProgramOp : Energy_Op<"update_program", [
    HasParent<"ModelOp">, SingleBlock, NoTerminator, NoRegionArguments,
    OpAsmOpInterface]> {
  let summary = "One step of the dynamics, as a program over the state";
  let description = [{
    Built by `energy-build-updates` from `energy.dynamics`. The body runs
    once per step, in order: `energy.read` sees the current value of a
    tensor (as last stored), `energy.grad @x` the gradient of the global
    energy at the current values, and `energy.store` replaces a state
    tensor's value for the rest of the step and for later steps.

    ```mlir
    energy.update_program {
      %g = energy.grad @x : !energy.array<N, D>
      %x = energy.read @x : !energy.array<N, D>
      %lr = energy.constant 0.1
      %step = energy.mul %lr, %g : !energy.array<>, !energy.array<N, D>
      %new = energy.sub %x, %step : !energy.array<N, D>, !energy.array<N, D>
      energy.store %new into @x : !energy.array<N, D>
    }
    ```

    A change of the state's variables (energy-change-of-variables) adds
    two programs that run once per call of the runtime around its steps:
    `begin`, before the first step (it computes the tensors the steps run
    on from the state), and `finish`, after the last (it writes the state
    back from them). Between `finish` and the next `begin` the state is
    what the model declares; the steps alone need not keep it.
  }];
  let regions = (region SizedRegion<1>:$body, AnyRegion:$begin,
                        AnyRegion:$finish);
  let assemblyFormat =
      "attr-dict-with-keyword $body (`begin` $begin^)? (`finish` $finish^)?";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_BackwardProgramOp : Energy_Op<"backward_program", [
    HasParent<"ModelOp">, NoTerminator, NoRegionArguments, OpAsmOpInterface]> {
  let summary = "The dynamics run backwards: a loss's gradient through the steps";
  let description = [{
    Built by `energy-build-backward` from `energy.update_program` and the
    model's losses. Each tensor X that carries an adjoint (every state and
    param) has a state tensor `@X.adjoint` (marked `adjoint_of = @X`). Three
    programs, each run like an update program:

    - `seed`, once after the forward run: the adjoints start as the
      gradient of the sum of the losses at the final values.
    - `step`, once per step t from the last step to the first, with
      `energy.step` = t and every state tensor at its value at the start of
      step t (restored from checkpoints by the caller): on entry `@X.adjoint`
      holds the derivative of the loss with respect to X after step t (for a
      tensor the step never stores, such as a param, summed over the later
      steps and the loss itself), and the program leaves there the
      derivative with respect to X before step t. The body is the step's
      ops (each store preceded by a read of the value it replaces), then the
      reverse sweep, which stores those values back as it passes their
      stores, so that each `energy.grad` of the sweep sees the values its
      forward counterpart saw. The vector-Jacobian product of a gradient is
      the gradient of an auxiliary term ⟨∇E, c⟩ with the cotangent c stored
      in `@X.cotangent`; where the energy reads lets that read no state, the
      term is taken of the energy with each such let S read from a tensor
      `@S.value` (marked `cotangent_of = @S`) holding its value, and the
      gradient with respect to `@S.value` is pulled back through S.
    - `finish`, once after the first step's: a state initialised from
      another tensor (`state x = h`) passes its adjoint on to it.
    - `cotangents` (optional, only in one rank's model of a sharded run,
      made by `energy-supplied-gradients`): the part of `step` that stores
      the cotangents, run before it at the same step and states, so that
      the runtime can gather every rank's cotangents in between. A caller
      that does not shard runs the two one after the other.

    An `implicit` program differentiates at the fixed point the run ends
    at, where the gradient of the energy with respect to the updated nodes
    x is zero: its `step` is empty and never runs (nothing is checkpointed),
    and `finish` solves H v = x̄ (H the Hessian of the energy in x, x̄ the
    seeded adjoints of x) by conjugate gradients on Hessian-vector products,
    in an `energy.repeat` whose vectors live in state tensors marked
    `solver_of`, then subtracts ∇_Y ⟨∇_x E, v⟩ from the adjoint of every
    other tensor Y. The updated nodes and their optimizer states end with
    zero adjoints: the fixed point does not depend on where the run started.

    ```mlir
    energy.backward_program seed {
      %g = energy.grad @x of @mse : !energy.array<D>
      energy.store %g into @x.adjoint : !energy.array<D>
    } step {
      %x = energy.read @x : !energy.array<D>
      ...
      energy.store %x into @x : !energy.array<D>
      %a = energy.read @x.adjoint : !energy.array<D>
      energy.store %a into @x.cotangent : !energy.array<D>
      %h = energy.grad @x of @x.backprop : !energy.array<D>
      ...
      energy.store %new into @x.adjoint : !energy.array<D>
    } finish {
    }
    ```
  }];
  let arguments = (ins UnitAttr:$implicit);
  let regions = (region SizedRegion<1>:$seed, SizedRegion<1>:$body,
                        SizedRegion<1>:$finish,
                        MaxSizedRegion<1>:$cotangents);
  let assemblyFormat =
      "(`implicit` $implicit^)? attr-dict-with-keyword `seed` "
      "custom<Block>($seed) (`cotangents` $cotangents^)? `step` "
      "custom<Block>($body) `finish` custom<Block>($finish)";
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_RepeatOp : Energy_Op<"repeat", [SingleBlock, NoRegionArguments,
    RecursiveMemoryEffects, OpAsmOpInterface]> {
  let summary = "Runs a body of an update program until it yields true";
  let description = [{
    The loop of adaptive steps (`ode` with `rtol`/`atol`): the body runs, its
    reads seeing the stores of earlier rounds, until the `i1` it yields is
    true. Running `max_iterations` rounds without finishing is an error.

    ```mlir
    energy.repeat max 1000 {
      ...
      energy.yield %done : i1
    }
    ```
  }];
  let arguments = (ins I64Attr:$max_iterations);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`max` $max_iterations attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

def Energy_StoreOp : Energy_Op<"store", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite]>]> {
  let summary = "Replaces the value of a state tensor";
  let arguments = (ins Energy_AnyArray:$value, FlatSymbolRefAttr:$tensor);
  let assemblyFormat = "$value `into` $tensor attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Energy_GradOp : Energy_Op<"grad", [
    DeclareOpInterfaceMethods<ConditionallySpeculatable>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The gradient of the global energy (or of one term) at the current values";
  let description = [{
    Used by stopping rules (`maxabs(grad)`) and update programs; evaluated
    through the `energy.gradient` that `energy-derive-gradients` builds for
    the same tensors (and the same term, with `of`). With `and [...]` it has
    one result per tensor, computed by one joint gradient program
    (`energy-join-gradients` forms these).

    ```mlir
    %g = energy.grad @x : !energy.array<N, D>
    %m, %p = energy.grad @mu and [@prec] : !energy.array<K, D>, !energy.array<K, D, D>
    ```

    Inside a program, `into` (one entry per tensor, `energy-plan-accumulate-
    adjoints` sets it) adds the gradients of some tensors to other tensors
    of the same type in place, instead of returning them: an entry is the
    tensor the gradient is added to, or `unit` for a gradient that is a
    result. The results are the `unit` entries' gradients, in order.

    ```mlir
    %gx = energy.grad @x and [@W] of @t {into = [unit, @W.adjoint]} : !energy.array<N, D>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$tensor,
                       OptionalAttr<TypedArrayAttrBase<FlatSymbolRefAttr,
                                                       "tensors">>:$also,
                       OptionalAttr<FlatSymbolRefAttr>:$of,
                       OptionalAttr<ArrayAttr>:$into);
  let results = (outs Variadic<Energy_AnyArray>:$results);
  let assemblyFormat =
      "$tensor (`and` $also^)? (`of` $of^)? attr-dict (`:` type($results)^)?";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::FlatSymbolRefAttr":$tensor,
                   "::mlir::FlatSymbolRefAttr":$of)>
  ];
  let extraClassDeclaration = [{
    /// The tensors whose gradients the op computes, in order (the results
    /// and the gradients added `into` other tensors).
    ::llvm::SmallVector<::mlir::FlatSymbolRefAttr> getTensors();
    /// Per tensor of getTensors(), the tensor its gradient is added to, or
    /// null where the gradient is a result.
    ::llvm::SmallVector<::mlir::FlatSymbolRefAttr> getIntoTensors();
    /// The result that is the gradient of tensor `position` of getTensors(),
    /// or null where that gradient is added `into` a tensor.
    ::mlir::Value getResultOf(unsigned position);
    /// The model's `energy.gradient` that computes these gradients (the
    /// same tensors and term), or null before `energy-derive-gradients`.
    GradientOp getGradient();
  }];
}

def Energy_CmpOp : Energy_Op<"cmp", [Pure, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "Compares two scalars";
  let arguments = (ins Energy_CmpPredicateAttr:$predicate, Energy_Scalar:$lhs,
                       Energy_Scalar:$rhs);
  let results = (outs I1:$result);
  let assemblyFormat = "``$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Energy_SelectOp : Energy_Op<"select", [Pure,
    AllTypesMatch<["true_value", "false_value", "result"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Chooses between two values by a condition";
  let arguments = (ins I1:$condition, Energy_AnyArray:$true_value,
                       Energy_AnyArray:$false_value);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($result)
  }];
}

include "energy/IR/EnergyKernelOps.td"

#endif // ENERGY_OPS_TD
