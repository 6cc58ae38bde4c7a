//===- PlanSteps.td - The kernel plan's steps as passes ----*- tablegen -*-===//
//
// The steps of the kernel plan. Each is total: it either leaves verified IR
// or puts the model back as it was and fails with a located internal error
// naming the step and the term (PlanStep.h). `energy-plan-kernels` runs
// them in the order of buildPlanStepPipeline (Pipelines.h). Included by
// Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PLANSTEPS_TD
#define ENERGY_TRANSFORMS_PLANSTEPS_TD

include "mlir/Pass/PassBase.td"

class EnergyPlanStep<string name, string stepSummary>
    : Pass<name, "::mlir::energy::ModelOp"> {
  let summary = stepSummary;
  let dependentDialects = ["::mlir::energy::EnergyDialect",
                           "::mlir::arith::ArithDialect"];
}

def EnergyPlanSliceTables : EnergyPlanStep<"energy-plan-slice-tables",
    "Computes a let's slice inlined by differentiation as a table"> {
  let description = [{
    Differentiation inlines a read of a let's slice (`q[b, i]` of a let over
    `(b, i, k)`) as `Σ_k embed(e_k into [k])`, which it differentiates op by
    op. A sum with no predicate over plain dims whose body's value is an
    `energy.embed` at exactly the sum's indices, in order, becomes the
    `energy.tabulate` of the embedded value over the same domain: the same
    array, which later steps hoist and batch as a table.
  }];
}

def EnergyPlanIndexMaps : EnergyPlanStep<"energy-plan-index-maps",
    "Writes sums over a vector's elements as linear maps of the vector"> {
  let description = [{
    Σ_k v[k] a(k) r(k), with v a vector from outside the sum read at its
    index, a(k) scalars and r(k) rows that do not depend on v, is the map
    Rᵀ (v ⊙ A) of v (A and R the tables of a and r over k, R the whole
    array where r is a row of one read at k); Σ_k v[k] a(k) is dot(v, A);
    a sum of such terms, the sum of their maps (a product with a sum among
    its factors expanded, each term with its own v). Likewise a loop over k that
    adds v[k] a(k) r into the slots [s…, k] (r not varying with k) adds
    (v ⊙ A) ⊗ r into [s…]. Only where the maps are the same at every
    position of a sum or loop around that v varies with: differentiation
    leaves such sums where a let's elements are pulled back per pair (the
    adjoint of a rotated query, and its projection's gradient), and
    energy-plan-linear-maps then takes the maps out of the sum over the
    pairs (energy-plan-loop-sums makes a sum of the loop), which becomes a
    contraction's.

    ```mlir
    %s = reduce sum (%j : @N) {
      %v = mul %w, %k_j                   // Y wide, per pair
      %m = reduce sum (%k : @Y) {
        %e = extract %v[%k]
        %r = read @Wq[%g, %k]              // D wide
        yield (mul (mul %e, %c_ik), %r)
      }
      yield %m
    }
    // becomes
    %s = reduce sum (%j : @N) {
      %v = mul %w, %k_j
      %c = tabulate (%k : @Y) { yield %c_ik }
      %wq = read @Wq[%g]                   // [Y, D]
      yield (matmul (transpose %wq), (mul %v, %c))
    }
    ```
  }];
}

def EnergyPlanOutputTables : EnergyPlanStep<"energy-plan-output-tables",
    "Computes an output over a domain as one table"> {
  let description = [{
    An `energy.output` over a domain (`[%c : @N]`, its body a value per
    position) becomes an output without one whose body is the
    `energy.tabulate` of the old body over the domain: the same array, which
    the later steps see whole (a per-row lse over columns becomes the rows
    of a contraction, products of rows GEMMs).
  }];
}

def EnergyPlanAggregations : EnergyPlanStep<"energy-plan-aggregations",
    "Tabulates the bodies of plugins' aggregations"> {
  let description = [{
    A `custom` reduction (a plugin's aggregation) reads every value of its
    body at once: its body becomes an `energy.tabulate` over the domain and
    the reduction an `energy.aggregate` of that table.
  }];
}

def EnergyPlanLinearMaps : EnergyPlanStep<"energy-plan-linear-maps",
    "Takes linear maps out of sums"> {
  let description = [{
    Σ_p L(u_p) = L(Σ_p u_p) for a linear map L whose other operands do not
    depend on p (a product by a matrix or a factor from outside, a quotient
    by one, a transpose, sums of elements, the backward of a normalisation
    at a row: any composition of ops linear in what varies). A sum or mean
    whose summand is a sum of such maps of a few values sums those values,
    and the maps apply once after it. What the summand reads at positions
    from outside the sum (plain reads) is read ahead of it first.

    ```mlir
    %s = reduce sum (%a : @N) {
      %w = ...                       // the pair's weight
      %u = mul %w, %k_a
      %v = matmul %WqT, %u           // Wqᵀ (w k_a), at every pair
      yield %v
    }
    // becomes
    %t = reduce sum (%a : @N) { ... yield %u }
    %s = matmul %WqT, %t             // once
    ```

    A summand that adds maps of several varying values becomes one sum per
    value, up to `max-terms` of them (each sum computes what its value
    needs): one, before softmax contractions form, since a contraction
    sums several terms linear in its weight together; more, after. With
    `scaled`, a summand whose maps apply to a sum of differently weighted
    terms is first distributed over it, L(x + y) = L(x) + L(y), when that
    makes it a sum of weights times transformed rows (DistributeSums.cpp).
    With `widening`, a summand whose maps widen the weighted row (a weight
    times an outer product with a row: Σ_p w_cp q_c ⊗ x_p, the gradient of
    a projection on an attention's column side) sums the row alone, the
    maps applied after (q_c ⊗ Σ_p w_cp x_p): the sum adds D values per pair,
    not D², and no table of pairs is left for the products to batch.
  }];
  let options = [
    Option<"maxTerms", "max-terms", "unsigned", /*default=*/"1",
           "The most varying values a sum is split into">,
    Option<"scaled", "scaled", "bool", /*default=*/"false",
           "Also sum varying scalars times a value, the multilinear maps "
           "of their product applied after (after contractions form: "
           "before, a contraction weighs its sums by such factors itself)">,
    Option<"widening", "widening", "bool", /*default=*/"false",
           "Also sum varying scalars times a value where the maps of their "
           "product widen the value (an outer product)">
  ];
}

def EnergyPlanExchangeSums : EnergyPlanStep<"energy-plan-exchange-sums",
    "Sums outer products over the side of the narrower factor"> {
  let description = [{
    Σ_i a_i ⊗ Σ_j w(i, j) v_j = Σ_j (Σ_i w(i, j) a_i) ⊗ v_j: a loop that
    adds an outer product of a row value a_i with a weighted sum of a value
    v_j that does not vary with i, into slots that ignore i, becomes a loop
    over j that adds the weighted sum of a_i over i, under the same
    predicate, times v_j, where a (or the vector a matrix maps to it) is
    estimated narrower than v. Where a is the same at every i (a head's
    vector) or absent (the loop adds Σ_j w(i, j) v_j itself), the pairs sum
    the weight alone, a multiplying after the sum: graph attention's key
    side reads a key through one number per head. The same holds for
    a_i ⊙ Σ_j w(i, j) v_j, and for a `reduce sum` of such terms (then the exchanged terms are a
    table over the new domain and its sum; for outer products, a table of
    the weighted sums of a_i and a sum of their outer products with v_j).
    The pairs of the contraction that forms then sum the narrower value (a
    query's Y numbers rather than a key input's D): a key projection's
    gradient through attention is the column side of the attention. By
    default only in declarations whose contractions have a column pass
    already (they read a `@T.gather` let); with `without-column-pass` in
    the others too, where the exchanged sums make a column pass of their
    own, which pays or not by what else the plan does with it:
    where that option exchanges more, runKernelPlanPipeline plans a CPU
    model both ways from this step on and keeps the plan of less
    estimated work.

    ```mlir
    foreach (%b : @B, %k : @H, %i : @N) {
      %s = reduce sum (%j : @N) where {...} { ...; %v = mul %w, %h_j; yield %v }
      %o = outer %a_i, %s
      accumulate %o into @Wk[%k]
    }
    // becomes
    foreach (%b : @B, %k : @H, %j : @N) {
      %t = reduce sum (%i : @N) where {...} { ...; %u = mul %w, %a_i; yield %u }
      %o = outer %t, %h_j
      accumulate %o into @Wk[%k]
    }
    ```
  }];
  let options = [
    Option<"withoutColumnPass", "without-column-pass", "bool",
           /*default=*/"false",
           "Also in declarations without a column pass (the exchanged sums "
           "then make one of their own)">
  ];
}

def EnergyPlanTransposeMaps : EnergyPlanStep<"energy-plan-transpose-maps",
    "Moves linear maps from one side of an inner product to the other"> {
  let description = [{
    ⟨L(u), v⟩ = ⟨u, Lᵀ(v)⟩: an inner product (a `dot`, or the sum of an
    elementwise product) of a linear map L of u with v, where a loop index
    around it varies u but not v nor L's other operands, and u varies with
    every index those do, takes the map to the other side; Lᵀ(v) is built
    by the maps' reverse-mode rules, and the contraction and loop tables
    compute it once per position of its indices. Gradient derivation does
    the same to the auxiliary terms ⟨∇ₓE, c⟩ it builds, before their own
    gradients are derived.

    ```mlir
    %s = reduce sum (%i : @S) {
      %u = mul %w, %k_j                // the pair's weight times a row
      %m = matmul %WqT, %u             // Wqᵀ (w k_j)
      %a = ... %m ... %mu_i ...        // a layer norm's backward at column i
      %c = read @mu.cotangent[%b, %i]
      %p = dot %a, %c
      yield %p
    }
    // becomes ⟨w k_j, Wq Jᵢᵀ c_i⟩, the second factor one per column
    ```
  }];
}

def EnergyPlanSoftmaxContracts : EnergyPlanStep<"energy-plan-softmax-contracts",
    "Forms softmax contractions from lse reductions and the sums weighted by them"> {
  let description = [{
    An `lse` and the sums over the same domain linear in its softmax weight
    (the child side of an lse term) become one `energy.softmax_contract`,
    lifted out of the loop over the rows around them when its body can be
    recomputed per pair (reads, effect-free ops, and tables that only read:
    a row's rotated query); a sum over rows weighted by the softmax of an lse
    that a `@T.gather` let recomputes (the parent side) becomes the column
    sums of a contraction; a sum whose normaliser is an lse in its own body
    (an M-step's statistics) takes that lse in. Contractions of one block
    with the same domains, predicate, temperature and score then merge.
  }];
}

def EnergyPlanPairBias : EnergyPlanStep<"energy-plan-pair-bias",
    "Reads a score's bias per pair of positions from a table the kernel takes"> {
  let description = [{
    A contraction (not bilinear) whose score adds an element of a tensor at
    an index linear in the last row index and the column alone (T5's
    `bias[h, i - j + N - 1]`, one learned number per head and relative
    offset) reads it instead from a table over its batch indices and that
    index, `[batch rows, L]`, which the kernels add at a·r + b·c + o (the
    bilinear form's pair bias), and states its scale x / s as x · (1 / s):
    only where every pair the predicate admits provably indexes within the
    table (each bound at the corners of the rows and columns, or through
    one of the predicate's constraints: a causal table of N offsets), and
    only when the contraction is then bilinear; otherwise
    nothing changes. It runs once the contractions have their final
    scores, so that the steps before it compare them with the sums they
    match as the model wrote them.
  }];
}

def EnergyPlanRowOrder : EnergyPlanStep<"energy-plan-row-order",
    "Orders a generic contraction's rows so that it is bilinear"> {
  let description = [{
    A generic contraction with row outputs only, whose rows nest so that
    its column table depends on the last row index (rows (h, i, b) over
    the keys of each sequence b), is replaced by the contraction over the
    same rows with another one last, (h, b, i), when that one is bilinear
    once its tables are hoisted and its pair bias tabulated (a table of a
    pair's bias that the old order hoisted is read through its element
    first); its outputs are read back in the old order. Otherwise nothing
    changes.
  }];
}

def EnergyPlanPairSums : EnergyPlanStep<"energy-plan-pair-sums",
    "Sums a pair bias's gradient in the contraction kernel"> {
  let description = [{
    A loop over pairs (r, c) that adds Σ_b exp(S − L) · w over other
    indices b into a tensor at an index linear in r and c (the gradient of
    T5's `bias[h, i - j + N - 1]`: S a softmax's score, L its normaliser,
    computed before the loop) becomes a contraction given L with rows (the
    tensor's other indices, b, r) and column c whose column values w are
    summed at its pair bias's index (`pair_sums`), then a sum over b added
    into the tensor: the CPU kernel computes the scores as small matrix
    products where the loop computed a dot product per pair and b. Only
    where that contraction is bilinear with a pair bias read where the
    loop adds (the pair bias step's table), on the CPU (the GPU's
    generated loops run as the loop did); otherwise nothing changes. It
    runs after energy-plan-engines, on the loops the plan left.
  }];
}

def EnergyPlanContractTables : EnergyPlanStep<"energy-plan-contract-tables",
    "Computes what a contraction's rows or columns need once, ahead of it"> {
  let description = [{
    Values of a contraction's regions that depend on the row indices only,
    or on the column (and batch) indices only, become tables ahead of it
    (`energy.tabulate`, a whole-tensor read, or the product X Wᵀ of a
    matrix applied to every row); a contraction whose score is then a dot
    product of two tables is marked `bilinear`, one of a mixture's
    quadratic form `quadratic`. Where the bilinear form fails only because
    a region reads a table over fewer batch indices than the contraction's
    (a token's row, the same for every head), that row is read from a table
    over all of them, and the contraction is bilinear; otherwise nothing
    changes.
  }];
}

def EnergyPlanWholeProducts : EnergyPlanStep<"energy-plan-whole-products",
    "Writes a program's products of whole matrices as batch_matmul"> {
  let description = [{
    A `matmul` of two rank-2 arrays directly in a step or backward program
    (a change of variables' products by its Gram matrix and its map)
    becomes a `batch_matmul` without a batch axis: one GEMM of the
    backend's, where the matmul is a support call, and an operand that is a
    `transpose` of a matrix is read with the product's `transposed` flag
    instead of being copied. Products whose shapes the flags cannot express
    stay as they are. Before that, a transpose of a sum or product of
    matrices that only it reads moves into it ((P Q)ᵀ = Qᵀ Pᵀ), and a sum
    of products that share a factor becomes one product (A X + B X =
    (A + B) X), so that the adjoint of W through W Wᵀ is one product.

    ```mlir
    %t = energy.transpose %g : !energy.array<B, H>
    %p = energy.matmul %t, %a : !energy.array<H, B>, !energy.array<B, H>
    // becomes
    %p = energy.batch_matmul %g transposed, %a : !energy.array<B, H>, !energy.array<B, H> -> !energy.array<H, H>
    ```
  }];
}

def EnergyPlanBatchedProducts : EnergyPlanStep<"energy-plan-batched-products",
    "Writes per-head and per-row matrix products as batch_matmul"> {
  let description = [{
    Tables of W[b] x[p] over (head, position), loops that add M[b] v[b, p]
    into row p of a tensor, tables of one matrix times every row, and sums
    of outer products over one or two indices (weighed by a scalar per
    position where both sides vary with every index of the sum: the weight
    goes with the left side's table) become `energy.batch_matmul`
    (one GEMM per head, or one of all the rows). A batch of products read
    only summed over its batch axis (each head's back-projection added
    over the heads) is the summed product, and a matrix per position of a
    loop's first index times a vector per position of both (a sequence's
    slots times each of its tokens) one batch of GEMMs over the first.
  }];
}

def EnergyPlanLoopTables : EnergyPlanStep<"energy-plan-loop-tables",
    "Computes values of nested loops once per position of the indices they use"> {
  let description = [{
    In a loop nested in others, a value that depends on fewer indices than
    the nest is computed once per position of the indices it uses, into a
    table ahead of the outermost loop it can leave.
  }];
}

def EnergyPlanRowTables : EnergyPlanStep<"energy-plan-row-tables",
    "Computes what a loop's body needs per position of some of its indices once"> {
  let description = [{
    In a loop over several indices that no other loop encloses (a table
    over (b, j, i)), a value that depends on some of them only and does more
    than element-wise work (the softmax of row (b, j), read at every slot i)
    is computed once per position of those, into a table ahead of the loop.
    Runs after the products are formed, which read such values in place.
  }];
}

def EnergyPlanPrefixSums : EnergyPlanStep<"energy-plan-prefix-sums",
    "Computes sums bounded by an outer index as running sums"> {
  let description = [{
    A sum over j ≤ i (j < i, j ≥ i, j > i) inside a loop over i, whose
    summand does not depend on i, reads a table of the summand's running
    sums along j (`energy.prefix_sum`), computed once ahead of the loops
    over the indices the summand uses: a causal linear attention's
    normalisers in O(N) rather than O(N²).
  }];
}

def EnergyPlanMergeContracts : EnergyPlanStep<"energy-plan-merge-contracts",
    "Merges contractions that compute the same weights"> {
  let description = [{
    Contractions of one block with the same domains, predicate, temperature
    and score, and the same normaliser (each computes its own, or both are
    given the same value), become one with the sums of both. Of two
    bilinear ones where
    the later one's column sums need what is computed from the earlier
    one's results, the later one's row sums join the earlier and its column
    sums take the earlier one's normaliser as given. With
    `across-row-orders` (once the plan's contractions have their tables),
    a contraction without column sums whose normaliser and row sums an
    earlier one computes over the same rows in another order, their tables
    compared across layouts, reads the earlier one's results in its order.
  }];
  let options = [
    Option<"acrossRowOrders", "across-row-orders", "bool",
           /*default=*/"false",
           "Also read a contraction's results from an earlier one over the "
           "same rows in another order">
  ];
}

def EnergyPlanLoopSums : EnergyPlanStep<"energy-plan-loop-sums",
    "Writes loops that add over indices their slots ignore as sums"> {
  let description = [{
    A loop over indices (J, K) that accumulates, at slots that only J
    chooses, what each position computes becomes a loop over J that
    accumulates a sum over K (the loop's predicate goes with the sum), so
    that what is added can come out of the sum by linearity.

    ```mlir
    foreach (%b : @B, %a : @N, %mu : @M) {
      accumulate %v into @x[%b, %a]
    }
    // becomes
    foreach (%b : @B, %a : @N) {
      %s = reduce sum (%mu : @M) { ... yield %v }
      accumulate %s into @x[%b, %a]
    }
    ```

    Likewise a sum over (J, K) whose body computes arrays that depend on J
    alone (more of them than on any other proper subset of its indices)
    becomes a sum over J of sums over K, those arrays computed once per
    position of J. And a table over K of Σ_I A[I, K], the column sums of an
    array (a mixture's weights), reads the element K of Σ_I A[I], whole
    rows added in A's order ahead of the table. A loop whose slots use none
    of its indices is one sum where it was, also of what a softmax weighs
    (inside a loop over the rows, whose contraction then takes it in). And
    a loop inside a loop over the rows that adds what a softmax weighs at
    slots its own indices and some of the rows' choose (a second
    derivative's column side, added per pair into the keys' slots) is a
    loop over those slots, ahead of the row loop, of sums over the rows'
    other indices, each recomputing what the row loop's body gives it: the
    parent side of a contraction, which energy-plan-softmax-contracts forms.
  }];
}

def EnergyPlanIndexProducts : EnergyPlanStep<"energy-plan-index-products",
    "Writes contractions over an index domain with an array's rows as matrix products"> {
  let description = [{
    In a body over an index k, dot(T[k], v) (T a whole array read at k, v
    not depending on k) is element k of T v — of the rows v times Tᵀ when
    v depends on other indices of the same body — computed ahead of it; and
    a sum over k alone of c_k T[k] (c a scalar) is Tᵀ c, c tabulated over
    k. Reductions inside softmax contractions and lse reductions are left
    to the contractions, which do not store their pairs.

    ```mlir
    foreach (%b : @B) {
      %s = reduce sum (%mu : @M) {
        %xi = read @xi[%mu]
        %c = relu (dot %xi, %g)       // %g from the loop's body
        yield (mul %c, %xi)
      }
    }
    // becomes
    foreach (%b : @B) {
      %p = matmul (read @xi), %g      // then one GEMM over b
      %c = tabulate (%mu : @M) { relu (extract %p[%mu]) }
      %s = matmul (transpose (read @xi)), %c
    }
    ```
  }];
}

def EnergyPlanFactorContractOutputs : EnergyPlanStep<"energy-plan-factor-contract-outputs",
    "Computes contraction outputs that are products of others after the contraction"> {
  let description = [{
    A contraction that sums both f(u) and f(u M) over the same weights sums
    f(u) only; the other output is its product with M after it. In a
    generic contraction, a value that is a map linear in the one operand
    varying with the pair, its other operands the output position's (a
    row's vector times a column's element-wise, a row's matrix times a
    column's vector, a quotient by a row's scalar), sums that operand, and
    the map applies after the contraction, once per output position; the
    form is marked again (often bilinear then). Before that, a product a
    side of a generic contraction yields is regrouped by what its factors
    depend on: the pair's, times those of the summed side's indices alone
    (one product, which energy-plan-contract-tables tabulates), times the
    output position's (taken out of the sum so). A value a side yields
    twice is summed once; row outputs that one table only adds up, scaled
    by numbers known ahead of the contraction, become one output.
  }];
}

def EnergyPlanReassociateProducts : EnergyPlanStep<"energy-plan-reassociate-products",
    "Multiplies matrices before rows where that is cheaper"> {
  let description = [{
    A product of rows and a matrix, P = A op(M), whose every use multiplies
    it by matrices again is not computed: the matrices meet first, where
    that is no more work at the estimated sizes. Products of a gradient or
    term that compute the same (share-products computes them once) count
    as one product with the uses of all, where every such use can be
    reassociated. A batch of products with a matrix each, P[b] = A[b]
    op(V[b]), summed against rows C is Σ_b (C[b]ᵀ A[b]) op(V[b]) (or its
    transpose's form), where that is no more work: a slot
    reconstruction's decoder gradient sums over the slots, not the tokens.
  }];
}

def EnergyPlanCombineProducts : EnergyPlanStep<"energy-plan-combine-products",
    "Combines products that share a factor into one"> {
  let description = [{
    Summands of what a gradient adds into one tensor that are products
    sharing a factor (up to scalars) become one product of that factor and
    the sum of the others: Σ_i c_i A_i M = (Σ_i c_i A_i) M. With `sums`,
    once the loops that add linear maps have joined: summands that are
    sums of one linear map of rows of different arrays, Σ_i c_i Σ_p
    L(A_i[p]), become one, Σ_p L(S[p]) for S = Σ_i c_i A_i; and the sums
    of whole arrays that the joined loops read, whose products nothing else
    reads, combine their products alike.
  }];
  let options = [
    Option<"sums", "sums", "bool", /*default=*/"false",
           "Also join sums of one linear map of rows, and combine the "
           "products of the sums of arrays that loops read">
  ];
}

def EnergyPlanShareProducts : EnergyPlanStep<"energy-plan-share-products",
    "Computes once what two sides of a pair's gradient both compute"> {
  let description = [{
    A table over one index whose rows later statements compute again at
    an index of the same size is read there instead; a product of two
    matrices that is the transpose of an earlier product in the same block
    (B Aᵀ after A Bᵀ: a pair energy's scores, per state row in one loop and
    per param row in the other) is that product read at swapped indices,
    and products that read a transpose take its matrix transposed.
  }];
}

def EnergyPlanAccumulateProducts : EnergyPlanStep<
    "energy-plan-accumulate-products",
    "Adds the products in a sum that a gradient accumulates on their own"> {
  let description = [{
    An `energy.accumulate` of a sum of terms into a whole tensor, some term
    a product of whole matrices that only the sum reads, becomes one
    accumulate per term, each product right ahead of its own: the kernels
    add a product into the gradient as the GEMM writes it, with no array,
    clearing or addition of its own. First, a `foreach` over the whole
    leading axes of a tensor that only adds the rows of an array into its
    rows (`accumulate V[i] into @T[i]`) becomes the whole-tensor accumulate
    of V.
  }];
}

def EnergyPlanJoinLinearLoops : EnergyPlanStep<
    "energy-plan-join-linear-loops",
    "Joins loops that add the same linear map of different rows"> {
  let description = [{
    `foreach` loops of one block over the same domain, each adding into
    the same tensor at the same indices a linear map of a row (of an array
    from outside the loop, `extract %V[i]`, or one the loop computes), the
    maps the same at each
    position (the same ops on the same other operands), become one loop
    at the later one's place that adds the map of the rows' sum:
    L(u₁[i]) + L(u₂[i]) = L(u₁[i] + u₂[i]). Nothing between them may read
    the tensor they add into or write what the earlier one reads.
  }];
}

def EnergyPlanTableOrder : EnergyPlanStep<"energy-plan-table-order",
    "Tabulates what products read in the order of the arrays the table reads"> {
  let description = [{
    A table of scalars over (i, j) whose body reads more arrays at [.., j, i]
    than at [.., i, j] (a parameter's adjoint Σ_b f(s[b, μ]) ⊗ σ[b] over
    (μ, b) from scores s[b, μ]), read only by `energy.batch_matmul` ops as a
    whole matrix, becomes the table over (j, i), which reads those arrays
    along their rows; the products take it with their operand marked
    transposed. CSE then finds it where the program already computes it.
  }];
}

def EnergyPlanFuseElementwise : EnergyPlanStep<"energy-plan-fuse-elementwise",
    "Computes chains of elementwise arithmetic on whole arrays as one table"> {
  let description = [{
    An expression of elementwise arithmetic on arrays of rank two or more,
    whose intermediate values feed only it, becomes one table of its rows:
    one pass over memory.
  }];
}

def EnergyPlanInlineTables : EnergyPlanStep<"energy-plan-inline-tables",
    "Computes tables inside the loops that read them at their positions"> {
  let description = [{
    A table (`energy.tabulate`) that only loops over the same positions
    read (a table, a foreach, a sum), each extracting the element at its own
    position (every loop index once, over the size the table has there),
    in the table's block, is computed inside those loops instead: its body
    cloned at each read, the array and its pass over memory gone. Read by
    one loop, its work is done once either way; read by several, only a
    table of at most six elementwise ops is. Where an op from the table up
    to its last reader may write a tensor the table reads (a store or an
    accumulation into it, or an op that writes without saying what), the
    table stays.
  }];
}

def EnergyPlanMarkParallel : EnergyPlanStep<"energy-plan-mark-parallel",
    "Marks the loops that may run on several threads"> {
  let description = [{
    A `foreach` whose positions along one index add into disjoint slots is
    marked `parallel`, its indices interchanged to bring that index first;
    sums outside every loop are marked `parallel`. Then the lets
    `energy-gather-gradients` made for the parent side of lse terms that
    nothing reads any more are dropped.
  }];
}


def EnergyPlanDropGatherLets : EnergyPlanStep<"energy-plan-drop-gather-lets",
    "Drops the gather lets that nothing reads"> {
  let description = [{
    The lets `energy-gather-gradients` made for the parent side of lse
    terms (`@T.gather`, `@T.gather_N`) that nothing reads once the plan has
    been canonicalized (a contraction's output nobody used, and the reads
    its regions made, gone) are dropped: the plan holds what runs (a let is
    computed where a kernel reads it, so they cost no time).
  }];
}

def EnergyPlanRunCaches : EnergyPlanStep<"energy-plan-run-caches",
    "Keeps what a call's steps and backward steps compute again"> {
  let description = [{
    A value of a gradient, of the step program or of the backward program
    that reads only params, inputs and consts that no program stores into
    (through lets of the same; no step number, no plugin code), that is
    more than a read, and that the program's other work reads (the keys
    W x of an attention over an input, W x in a recurrence), becomes an
    `energy.once` holding the ops it needs, kept in a new scratch tensor
    `@cache.N` with the scalar flag `@cache.N.valid`: a backend computes it
    at its first use in a call of the runtime and reads it at every later
    step and backward step of that call.

    Then, where the model has a backward step: a value that the backward
    step computes as the forward step does (the same ops on the same
    tensors, in the programs or in gradients only they call), from states
    no store ahead of it changed, and whose cone computes nothing that
    other ops read (or reads from outside the outputs of a contraction in
    it whose other outputs the step needs), becomes in both an
    `energy.once per_step` sharing a scratch tensor with a row per step
    (`[tape.steps, ...]`, the new dim `tape.steps` the dynamics' step
    count) and a flag per step: the backward step reads what its forward
    step kept (a network's hidden layer W1 x at every sample of JEM's
    sampler). Runs last, on CPU artifacts.
  }];
}

def EnergyPlanAccumulateAdjoints : EnergyPlanStep<
    "energy-plan-accumulate-adjoints",
    "Adds a program's gradients into the tensors they update in place"> {
  let description = [{
    In an update or backward program, a gradient (a result of `energy.grad`)
    that only `store (read @A + gradient) into @A` reads (a backward step
    adding a parameter's gradient of the step into its adjoint), where no op
    between the read, the grad op and the store names @A and the gradient
    called does not read @A, is added into @A by the grad op itself
    (`into`); the read, the sum and the store are dropped. A backend passes
    the adjoint's buffer to the gradient's kernel, which adds into it as it
    computes: no array of the gradient's own, no pass that clears it, none
    that adds it. Runs after the run caches.
  }];
}

def EnergyPlanDeferInvariantProducts : EnergyPlanStep<
    "energy-plan-defer-invariant-products",
    "Multiplies a backward pass's sums by run-invariant values once"> {
  let description = [{
    In a gradient that only the step of an unrolled backward program calls,
    `accumulate (batch_matmul A, X) into @P` (any flags), where X reads only
    what no call of the runtime changes (params, inputs, consts, values kept
    once per call) and A does not, and every call adds P's gradient into
    one tensor @P.adjoint: A adds into a new state tensor
    `@P.adjoint.deferred.N` (marked `deferred_of = @P.adjoint`, not part of
    the forward state) that the gradient also computes, into itself; the
    seed zeroes it and the finish adds the product of its sum and X into
    @P.adjoint. A product is linear in each factor, so the steps' products
    are the product of their sum: one product a backward pass instead of
    one a step (LISTA's We: Σ_t Σ_b ū_t[b] ⊗ x[b] = Σ_b (Σ_t ū_t[b]) ⊗ x[b]).
    The same for `accumulate L(V) into @P` where L is linear in a step value
    V (sums, differences, negations and transposes of L's, and products
    with or quotients by run-invariant values), has a transpose (an
    element-wise L is fused into the accumulation anyway) and its ops are
    read only by L: V adds into the sum and the finish adds L(sum)
    (continuous Hopfield's c·(G + Gᵀ) for W: one transpose a backward pass).
    Runs last.
  }];
}

def EnergyPlanPackInvariantOperands : EnergyPlanStep<
    "energy-plan-pack-invariant-operands",
    "Keeps the packed panels of products' run-invariant operands"> {
  let description = [{
    An `energy.batch_matmul` whose rhs reads only what no call of the
    runtime changes (params, inputs, consts that no program stores into,
    values kept once per call) is marked `packed in @cache.N valid
    @cache.N.valid`: a new scratch tensor of rhs's shape and its flag,
    marked as a kept value and its flag (the runtime clears the flag when a
    call begins). A CPU backend packs rhs's matrices for its GEMM tiles
    into the cache at the first product of a call and reads them at every
    later one: a step's and a backward step's products by a param (JEM's
    W1, a dense associative memory's patterns) copy it once a call instead
    of once a product. Products of the same matrices, transposed alike,
    share one cache. Runs last, on CPU artifacts.
  }];
}

#endif // ENERGY_TRANSFORMS_PLANSTEPS_TD
