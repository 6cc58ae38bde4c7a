//===- Passes.td - Passes over the energy dialect ------------*- tablegen -*-===//
//
// Declares the passes that analyse and transform energy graphs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PASSES_TD
#define ENERGY_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def EnergyCheckDifferentiable : Pass<"energy-check-differentiable", "::mlir::energy::ModelOp"> {
  let summary = "Reports energy terms that depend on an op with no derivative rule";
  let description = [{
    Walks every energy term of a model and reports, with its location, each
    op that produces an energy value without implementing
    `DerivativeOpInterface`, and each index-domain reduction whose kind has
    no rule (`max`). Gradient derivation runs this check first.

    ```mlir
    energy.term @e {
      %m = energy.maximum %a, %b : !energy.array<>, !energy.array<>
      // error: 'energy.maximum' op has no derivative rule; energy term @e
      // depends on it
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyOrderLseRows : Pass<"energy-order-lse-rows", "::mlir::energy::ModelOp"> {
  let summary = "Orders the indices of a sum over lse rows: batch axes, then the row";
  let description = [{
    A sum whose summand is an lse over another index (the rows of an
    attention term) gets its indices in one order, whatever order the model
    wrote them in: first those at which the lse's column side reads tensors
    (its values that vary with the column, not with every index; a position
    as a number, ALiBi's m[k] · (i − j), is no read), the ones that also
    index a state, an input or a let (a sequence's axis) ahead of those that
    index params only (a head's), then the row's own. The planning steps
    form one contraction per term and its column pass in that order;
    written with the row or the head first, the Energy Transformer's
    backward step took 2.7 to 630 times the work, the ALiBi attention's
    training 25 times. Summing in another order changes rounding only.

    ```mlir
    %e = energy.reduce sum (%h : @H, %b : @B, %c : @N) {
      %l = energy.reduce lse (%a : @N) { ... Wk[%h] @ x[%b, %a] ... }
    }
    // becomes
    %e = energy.reduce sum (%b : @B, %h : @H, %c : @N) { ... }
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyJoinGradients : Pass<"energy-join-gradients", "::mlir::energy::ModelOp"> {
  let summary = "Asks for the gradients taken at the same values in one go";
  let description = [{
    In each block of a stopping rule or step program, `energy.grad` ops of
    the same term with no store (or loop of stores) between them see the
    same values: they become one `energy.grad` with a result per tensor, at
    the place of the first, which `energy-derive-gradients` then derives as
    one joint program (one recomputation of the energy and one reverse
    sweep, whose softmax contractions the kernel plan merges).

    ```mlir
    %gm = energy.grad @mu : !energy.array<K, D>
    %gp = energy.grad @prec : !energy.array<K, D, D>
    // becomes
    %gm, %gp = energy.grad @mu and [@prec] : !energy.array<K, D>, !energy.array<K, D, D>
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyDeriveGradients : Pass<"energy-derive-gradients", "::mlir::energy::ModelOp"> {
  let summary = "Derives the gradient of the global energy for every updated node";
  let description = [{
    Adds to the model one `energy.gradient @T` per tensor T whose gradient is
    needed: every tensor an `energy.update` rule updates, every tensor an
    `energy.grad` asks for, and the tensors named by `wrt` (params too).

    The derivation is reverse mode through each energy term. The body of the
    gradient first recomputes the term (reads of lets inlined), then walks it
    backwards, asking each op's `DerivativeOpInterface` rule for the adjoints
    of its operands. A reduction over an index domain becomes an
    `energy.foreach` over the same domain that recomputes the body and seeds
    its adjoint with `buildBodyAdjoint` (the softmax weight of an `lse`). A
    read of T adds its adjoint into the gradient at the read's indices
    (`energy.accumulate`), so a tensor read through the child index, the
    parent index or both gets the corresponding terms of the gradient without
    any role being declared. Values that depend on T and are used inside a
    reduction are recomputed inside it, so every adjoint stays local to its
    loop.

    An op through which the energy reaches T without a rule is an error at
    the op's location.
  }];
  let options = [
    ListOption<"wrt", "wrt", "std::string",
               "Further tensors (e.g. params) to differentiate with respect to">
  ];
  let dependentDialects = ["::mlir::energy::EnergyDialect",
                           "::mlir::arith::ArithDialect"];
}

def EnergyGatherGradients : Pass<"energy-gather-gradients", "::mlir::energy::ModelOp"> {
  let summary = "Turns repeated accumulations and nested scatters into sums";
  let description = [{
    In a gradient program, an `energy.accumulate` inside an `energy.foreach`
    whose indices do not depend on the loop's indices adds the same slot at
    every position: it becomes one accumulation of a `reduce sum` over the
    loop's domain (gather form), and a factor of the summand that does not
    depend on the loop (a matrix applied to it, a scalar) is taken out of
    the sum. For self-attention the child-side term becomes
    Wqᵀ Σ_p w_p k_p, the shape of paper 004 eq. 16.

    A loop nested in a top-level loop that only accumulates at its own
    indices (a scatter: the parent side of an lse term) moves out: a new
    top-level loop over its domain accumulates, at each slot, the sum over
    the outer domain of what it added there, with loop-invariant factors
    taken out (Wkᵀ Σ_c w_c q_c). Reductions of the outer body that the
    scatter needed (each child's lse) are read from a new let over the outer
    domain, `@T.gather`, and so are the values the outer body computes from
    them that the scatter reads (a row's factor exp(lse − c)): the moved
    loop never computes a row's lse again. Every slot is then written by one position of one
    loop, so the code generator can run the loops on several threads without
    atomics. Outer loops with a predicate, or over a dim expression, are left
    as they are.

    Before both, what a top-level loop over (…, row) adds per pair into
    slots the row does not choose (a parameter's gradient), when summed over
    the columns it adds a matrix per pair and summed over the rows first
    less (summedWidth in Linearity.h: Σ_j outer(w_ij (q_i − k_j), x_j) adds
    a vector per pair over the rows), is gathered the same way over the
    loop's other indices and the columns: Σ_j outer(Σ_i w_ij (q_i − k_j),
    x_j), the outer product once per column. This holds for loops over
    columns that accumulate and for sums over columns that an accumulation
    adds.
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyBuildUpdates : Pass<"energy-build-updates", "::mlir::energy::ModelOp"> {
  let summary = "Turns the dynamics into one step program";
  let description = [{
    Builds an `energy.update_program` from `energy.dynamics`, with the step
    semantics of the language: statements run in the written order; adjacent
    gradient rules form a group whose gradient is taken once, after every
    rule's `prepare` phase (Nesterov's look-ahead), at the group's entry
    values; `order sequential` makes every rule its own group; an explicit
    rule stores its body's value. Optimizers come from the optimizer
    registry; their state (momentum buffers) becomes state tensors of the
    model (`@x.velocity`), starting at zero, so a run can be saved and
    resumed.

    ```mlir
    energy.update_program {
      %x = energy.read @x : !energy.array<D>
      %g = energy.grad @x : !energy.array<D>
      ...
      energy.store %new into @x : !energy.array<D>
    }
    ```

    Adjacent `stationary` rules form an EM M-step (ClosedForms.h): the
    responsibilities of the energy's lse are computed once at the group's
    entry and held fixed, then each node is solved in closed form in the
    order written.
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyChangeOfVariables : Pass<"energy-change-of-variables",
                                   "::mlir::energy::ModelOp"> {
  let summary = "Runs gd on a state in the image of the one map it is read through";
  let description = [{
    A state x = [R, D] whose only rule is `gd` (a step size that reads no
    state, no stopping rule, no implicit backward), and that the energy
    terms read only row by row through one param W = [H, D] (every read of
    x[r] is the right operand of W @ x[r]; no let reads x), descends in
    u = x Wᵀ: the gradient is ∇ₓE = ∇ᵤẼ W for Ẽ the energy with each W @ x[r]
    read from u[r], so a step u ← u − lr ∇ᵤẼ(u) G with G = W Wᵀ and the sum
    s ← s + lr ∇ᵤẼ(u) give x = x₀ − s W after the steps. The update program
    gets a `begin` (u = x₀ Wᵀ, G, s = 0) and a `finish` (x ← x − s W), run
    once per call around the steps; the steps take one product by G
    (R·H² multiply-adds) where they took two by W (2·R·H·D). The hidden
    tensors `x.image`, `x.descent` and `x.gram` are x's optimizer state;
    the auxiliary term `x.image_energy` is Ẽ. It fires where the estimated
    sizes (SizeEstimates.h) say that the steps save more than the call adds
    (2·R·H·D + H²·D), and leaves the model unchanged otherwise.
  }];
}

def EnergyExchangedTensors : Pass<"energy-exchanged-tensors", "::mlir::energy::ModelOp"> {
  let summary = "Marks the tensors the runtime sets between the kernels of one call";
  let description = [{
    For one rank of a sharded run (energy-run --shard): the gathered copies
    of the sharded tensors (`x__all`, params of the rank's model) hold every
    rank's rows as they are at each step, set by the runtime before each
    kernel that reads them. Marked `exchanged`, they count as varying from
    step to step: nothing read from them is kept across the kernels of a
    call (energy-plan-run-caches, energy-plan-defer-invariant-products), and
    the backward program differentiates through the lets that read them as
    through those that read states. Each sharded tensor's gradient and its
    copy's are also derived as one joint gradient, which the artifact
    exports (`joint_gradients` in its manifest), so that the runtime gets
    both from one kernel: one pass for what their sums share (an
    attention's lse of each row). A name that is not a tensor is an error.
  }];
  let options = [
    ListOption<"copies", "copies", "std::string",
               "Each sharded tensor and its gathered copy, as X=C">
  ];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergySuppliedGradients : Pass<"energy-supplied-gradients", "::mlir::energy::ModelOp"> {
  let summary = "The step program reads the gradient its caller supplies";
  let description = [{
    For one rank of a sharded run (energy-run --shard): the gradient a
    step needs is put together by the runtime from every rank's part
    before the step, so the update program reads it instead of computing
    it. Each `grad @X` of the update program becomes a read of a new input
    tensor `@X.supplied_gradient` (zeros until set). The program must take
    the gradient once, at the step's start (before any store), of the
    global energy, and the dynamics must have no stopping rule: otherwise
    the pass fails at the op that does not fit (nesterov's look-ahead,
    heun's second evaluation, a `until` rule).

    ```mlir
    update_program {
      %g = grad @x : !energy.array<N, D>
    // becomes
    tensor @x.supplied_gradient : input [@N, @D] = zeros
    update_program {
      %g = read @x.supplied_gradient : !energy.array<N, D>
    ```

    The backward program (a loss's gradient through the run) then
    differentiates the ranks' sum: the step's Hessian-vector product pairs
    the cotangent of each state X's rows with its gradient and, where X has
    a gathered copy C (`copies`, `X=C`), the cotangent of the copy — every
    rank's cotangents, which the runtime gathers into `@C.cotangent` — with
    the gradient in C. The cotangents' stores move to the program's
    `cotangents` part, which the runtime runs first, so that it can gather
    them before the rest of the step. The part a state without an axis of
    `rows-dim` (held whole by every rank) gets from the rank's energy goes
    to `@V.rank_adjoint`, which the runtime sums over the ranks into
    `@V.adjoint`. A backward step that needs the gradient's value itself (an
    optimizer not linear in it), a program at a fixed point, or a
    Hessian-vector product taken through lets that read no state is an
    error.
  }];
  let options = [
    Option<"rowsDim", "rows-dim", "std::string", /*default=*/"\"\"",
           "The dim of which the rank holds some rows">,
    ListOption<"copies", "copies", "std::string",
               "Each sharded tensor and its gathered copy, as X=C">
  ];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyCallerCotangents : Pass<"energy-caller-cotangents", "::mlir::energy::ModelOp"> {
  let summary = "Seeds the backward program with the caller's cotangents of the final states";
  let description = [{
    For a model that is a layer of a larger program (energy.torch's
    EnergyModule): the model's losses are replaced by one loss
    `@incoming` = Σ_X ⟨X̄, X⟩ over the forward states X (state tensors no
    pass added), each X̄ a new input tensor `@X.incoming` marked
    `incoming_of = @X`, which the caller sets to its cotangent of X's final
    value. energy-build-backward then gives the vector-Jacobian product of
    the run with those cotangents, and differentiates the inputs too, so
    that the caller can pass it on. Does nothing to a model that has
    incoming tensors already.

    ```mlir
    tensor @mu : state [@D]
    // gets
    tensor @mu.incoming : input [@D] = zeros {incoming_of = @mu}
    term @incoming auxiliary loss {
      %0 = read @mu.incoming : !energy.array<D>
      %1 = read @mu : !energy.array<D>
      %2 = mul %0, %1 : !energy.array<D>, !energy.array<D>
      %3 = reduce_elements sum %2 : !energy.array<D>
      yield %3 : !energy.array<>
    }
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyBuildBackward : Pass<"energy-build-backward", "::mlir::energy::ModelOp"> {
  let summary = "Builds the dynamics run backwards, for gradients of a loss";
  let description = [{
    For a model with a `loss`, builds `energy.backward_program` from the
    step program: the gradient of the sum of the losses at the final values
    (`seed`), the reverse-mode derivative of one step (`step`), run from the
    last step to the first on the values each step started from, and the
    hand-over from states to the tensors that initialise them (`finish`).
    Every state and param X gets an adjoint tensor `@X.adjoint`. The step is
    reversed op by op with each op's derivative rule; a store hands the
    adjoint of its tensor to the stored value and is undone, so that the
    sweep sees the values the forward step saw; the vector-Jacobian product
    of `energy.grad @x` (and of a whole read of a let) is the gradient of an
    auxiliary term ⟨∇E, c⟩ (⟨S, c⟩) with the cotangent c stored in the
    state tensor `@x.cotangent` — the Hessian-vector products of Newton's
    steps, applied to the adjoint.
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyFactorOuterSums : Pass<"energy-factor-outer-sums", "::mlir::energy::ModelOp"> {
  let summary = "Takes outer products' invariant sides out of sums in second derivatives";
  let description = [{
    In the gradients of auxiliary terms (Newton's Hessian-vector products,
    the backward pass through gradient rules), a parameter's adjoint is a
    sum over pairs of outer products. By linearity a side that does not
    depend on the sum's indices comes out of it:
    Σ_p outer(s_p u, v_p) = outer(u, Σ_p s_p v_p), and so does a linear
    map applied to what is summed whose other operands come from outside
    (a matrix, Σ_p A X_p = A Σ_p X_p; a scalar factor or divisor; a
    transpose; a negation), after a sum of such
    products is split into sums (Σ (x + y) = Σ x + Σ y) and outer products
    of sums are distributed (outer(a + b, c) = outer(a, c) + outer(b, c)).
    D² work per pair becomes D.
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyPlanKernels : Pass<"energy-plan-kernels", "::mlir::energy::ModelOp"> {
  let summary = "Writes how the kernels run as IR: softmax contractions, tables, parallel loops";
  let description = [{
    Takes the decisions that shape the kernels and writes them as ops and
    attributes that every backend lowers as they say. It runs the plan's
    steps, each a pass of its own (`energy-plan-aggregations`,
    `energy-plan-softmax-contracts`, ... `energy-plan-mark-parallel`), in
    the order of `buildPlanStepPipeline`; each step leaves verified IR or
    fails with the model as it was:

    - Plugin aggregations. A `custom` reduction becomes a table of its body
      over the domain and `energy.aggregate` of it (the plugin's run-time
      code reads every value at once).
    - Softmax contractions. An `lse` and the sums over the same domain whose
      summand is linear in its softmax weight exp((x − L)/T) (the child side
      of an lse term) become one `energy.softmax_contract`, lifted out of
      the loop over the rows around them when its body can be recomputed
      per pair (then the loop reads its row of each result). A sum over
      rows weighted by the softmax of an lse that a let recomputes (the
      parent side, after `energy-gather-gradients`) becomes the column sum
      of a contraction; contractions with the same score merge, so the
      parent side reuses the child side's L. Factors of a summand that do
      not depend on the column are taken out of the sums.
    - Tables. Values of a contraction's regions that depend on the row side
      or the column side only (the projections q = Wq x, k = Wk x; log
      weights and log-determinants of a mixture's components) are computed
      once ahead of it: `energy.tabulate`, a whole-tensor read, or a matrix
      product X Wᵀ. A contraction whose score is then a dot product of two
      tables (times a scale) is marked `bilinear`.
    - Parallel loops. A `foreach` whose positions along one index add into
      disjoint slots is marked `parallel`, its indices interchanged to
      bring that index first; sums outside every loop are marked `parallel`
      (fixed chunks, added in order).

    Before (self-attention's child side, after gradient derivation):

    ```mlir
    foreach (%c : @N) {
      %q = matmul %Wq, (read @x[%c])
      %L = reduce lse (%p : @N) { dot %q, (matmul %Wk, (read @x[%p])) }
      %s = reduce sum (%p : @N) { ... exp(dot(...) − %L) · k_p · −1 ... }
      accumulate (matmul %WqT, %s) into @x[%c]
    }
    ```

    After:

    ```mlir
    %Q = matmul (read @x), (transpose %Wq)
    %K = matmul (read @x), (transpose %Wk)
    %L, %S = softmax_contract bilinear rows (%c : @N) cols (%p : @N)
        score { dot (extract %Q[%c]), (extract %K[%p]) }
        row_values { extract %K[%p] }
    foreach parallel (%c : @N) {
      accumulate (matmul %WqT, (mul (extract %S[%c]), -1)) into @x[%c]
    }
    ```
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

include "PlanSteps.td"

def EnergyShareScores : Pass<"energy-share-scores", "::mlir::energy::ModelOp"> {
  let summary = "Marks the column sums that may read the scores of the contraction that gives their normaliser";
  let description = [{
    Where a bilinear contraction's column sums need what is computed from
    another's results (second derivatives), the plan keeps them as a
    contraction of their own, after the other and with its normaliser
    given. When the two have the same domains, constraints, temperature
    and score operands, and the later one's pair terms are among the
    earlier one's, the later one is marked
    `reuses_scores`: a backend may keep the earlier one's scores and pair
    terms, when they are few, and read them instead of computing them again
    (the CPU kernel keeps at most 16 MiB). Runs after the plan has
    been canonicalized and CSE'd, so that equal operands are one value.
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyPlanSeparateScores : Pass<"energy-plan-separate-scores", "::mlir::energy::ModelOp"> {
  let summary = "Writes generic contractions' scores as dot products plus one-sided biases";
  let description = [{
    A generic softmax contraction whose score is, through sums,
    differences, negations, products and quotients by what does not depend
    on the pair, and ‖a ∓ b‖² = ‖a‖² + ‖b‖² ∓ 2 a·b, dot products of a
    row's vector and a column's (at most 8 pairs of vectors) plus terms of
    one side each (an RBF kernel's score, ALiBi's slope times the
    positions' difference, rotary attention's q1·k1 + q2·k2) gets the
    score Σ c · dot(a, b) + r + k, its tables ahead of it, and becomes
    bilinear with biases (r at the rows, k at the batch rows and the
    column), which backends fold into the features, as they put the pairs
    of tables' rows side by side. A copy is rewritten
    and replaces the contraction only when the copy is bilinear. Runs after
    the other plan steps that compare scores (forming column sides, merging
    contractions).
  }];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

def EnergyPlanEngines : Pass<"energy-plan-engines", "::mlir::energy::ModelOp"> {
  let summary = "Chooses what computes each softmax contraction, for the artifact's target";
  let description = [{
    Writes `engine` on every softmax contraction that has none, from its
    form and the target (EnergyKernelOps.td), so that code generation only
    reads the choice. On a CPU (`target=cpu`): bilinear ones `"cpu"`, the
    support library's kernel; quadratic and generic ones `"loops"`
    (generated loops, vectorised in one pass, are the faster for a
    quadratic one's few columns). On CUDA (`target=cuda`): bilinear ones
    with pair terms, value factors or a score that is a sum of bilinear
    forms `"loops"` (the GPU kernels take none of them and would leave them
    to the host's threads; generated loops run on the GPU), other bilinear and quadratic ones `"cuda"`, the support
    library's GPU kernels, or with
    `bf16-products` bilinear ones `"cuda-tensor-cores"`, and among those
    the ones cuDNN's fused flash attention computes `"cudnn"`: its row
    values plain table rows, no column values, no given normaliser,
    unmasked or causal (SoftmaxContractOp::checkFusedAttention;
    energy_support_cuda_fused_attention_bf16 runs them on cuDNN where it is
    installed and takes their sizes, heads of up to 128 features and
    values, and on the tensor-core kernel otherwise); a contraction with
    column sums whose row side alone cuDNN computes (an attention energy's
    gradient) becomes two, the row side (normaliser and row sums) `"cudnn"`
    and the column sums given its normaliser `"cuda-tensor-cores"`, each
    side one pass over the pairs as before; generic ones `"loops"`. On
    CUDA (or with `device-loops`) it also marks the model
    `energy.device_loops`: code generation then writes the exp of a
    panel, a log determinant and an inverse as loops instead of calls of
    the host's support functions, so that the loops around them can run
    on the GPU.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The device the artifact runs on: cpu or cuda">,
    Option<"bf16Products", "bf16-products", "bool", /*default=*/"false",
           "On CUDA, bf16 products on tensor cores (--dtype bf16)">,
    Option<"deviceLoops", "device-loops", "bool", /*default=*/"false",
           "Mark the model `energy.device_loops` on a CPU too (always on "
           "CUDA): loops without host calls where code can do the work">
  ];
  let dependentDialects = ["::mlir::energy::EnergyDialect"];
}

#endif // ENERGY_TRANSFORMS_PASSES_TD
