// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s

// The pass runs alone here (no canonicalization or CSE after it, unlike
// buildKernelPlanPipeline), so values it leaves unused stay in the output;
// the checks skip them. The inputs are reduced from `energyc --emit=update`.

// Child side. In the loop over i, the lse over mu and the sum linear in its
// weight exp(s − L) become one contraction lifted out of the loop, over
// rows (i) and cols (mu); the loop reads its row of L and of the sum. The
// factors −1 and beta, which do not depend on mu, are taken out of the sum
// (the row value is m_mu alone) and applied to the row the loop reads. The
// term's lse is lifted out of its sum the same way. Reads of a tensor's row
// at one side's index become a whole read and an extract.
// CHECK-LABEL: energy.model @child_side
// CHECK:       term @e {
// CHECK:         %[[BETA:.*]] = read @beta : !energy.array<>
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK:         %[[M:.*]] = read @m : !energy.array<K, D>
// CHECK:         %[[L:.*]] = softmax_contract bilinear rows (%[[I:.*]] : @N) cols (%[[MU:.*]] : @K) score {
// CHECK-NEXT:      %[[XI:.*]] = extract %[[X]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[MM:.*]] = extract %[[M]][%[[MU]]] : !energy.array<K, D> -> !energy.array<D>
// CHECK-NEXT:      %[[D:.*]] = dot %[[XI]], %[[MM]] : !energy.array<D>
// CHECK-NEXT:      %[[S:.*]] = mul %[[BETA]], %[[D]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      yield %[[S]] : !energy.array<>
// CHECK-NEXT:    } : !energy.array<N>
// CHECK-NEXT:    %[[E:.*]] = reduce sum parallel (%[[I2:.*]] : @N) {
// CHECK-NOT:       reduce lse
// CHECK:           %[[LI:.*]] = extract %[[L]][%[[I2]]] : !energy.array<N> -> !energy.array<>
// CHECK-NEXT:      yield %[[LI]] : !energy.array<>
// CHECK:         yield %[[E]] : !energy.array<>
// CHECK:       gradient @x {
// CHECK:         %[[MINUS:.*]] = constant -1.000000e+00
// CHECK:         %[[GBETA:.*]] = read @beta : !energy.array<>
// CHECK:         %[[R:.*]]:2 = softmax_contract bilinear rows (%[[GI:.*]] : @N) cols (%[[GMU:.*]] : @K) score {
// CHECK:           %[[GS:.*]] = mul %[[GBETA]], %{{.*}} : !energy.array<>, !energy.array<>
// CHECK-NEXT:      yield %[[GS]] : !energy.array<>
// CHECK-NEXT:    } row_values {
// CHECK-NEXT:      %[[V:.*]] = extract %{{.*}}[%[[GMU]]] : !energy.array<K, D> -> !energy.array<D>
// CHECK-NEXT:      yield %[[V]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N>, !energy.array<N, D>
// CHECK-NEXT:    foreach parallel (%[[LI:.*]] : @N) {
// CHECK-NOT:       reduce
// CHECK:           %[[LROW:.*]] = extract %[[R]]#0[%[[LI]]] : !energy.array<N> -> !energy.array<>
// CHECK-NEXT:      %[[SROW:.*]] = extract %[[R]]#1[%[[LI]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[F1:.*]] = mul %[[SROW]], %[[MINUS]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[F2:.*]] = mul %[[F1]], %[[GBETA]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[F3:.*]] = mul %[[F2]], %[[LROW]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      accumulate %[[F3]] into @x[%[[LI]]] : !energy.array<D>
energy.model @child_side {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  const @beta = 5.000000e-01
  term @e {
    %beta = read @beta : !energy.array<>
    %e = reduce sum (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %l = reduce lse (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %s = mul %beta, %d : !energy.array<>, !energy.array<>
        yield %s : !energy.array<>
      } : !energy.array<>
      yield %l : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
  gradient @x {
    %minus = constant -1.000000e+00
    %beta = read @beta : !energy.array<>
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %l = reduce lse (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %s = mul %beta, %d : !energy.array<>, !energy.array<>
        yield %s : !energy.array<>
      } : !energy.array<>
      %g = reduce sum (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %s = mul %beta, %d : !energy.array<>, !energy.array<>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %a = mul %w, %minus : !energy.array<>, !energy.array<>
        %b = mul %a, %beta : !energy.array<>, !energy.array<>
        %v = mul %b, %mm : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      %gl = mul %g, %l : !energy.array<D>, !energy.array<>
      accumulate %gl into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// A sum that is not linear in the weight (w + 1) is not part of the
// contraction: the lse alone is lifted. The sum, over the memories m (K)
// at every point x (N), pairs different things: its scores are one product
// of the rows, X Mᵀ, and the sum the product of the table of its
// coefficients (w + 1 over N × K) with M, added into x's gradient in
// place.
// CHECK-LABEL: energy.model @not_linear
// CHECK:       %[[L:.*]] = softmax_contract bilinear rows (%{{.*}} : @N) cols (%{{.*}} : @K) score {
// CHECK:       } : !energy.array<N>
// CHECK:       %[[S:.*]] = batch_matmul %{{.*}}, %{{.*}} transposed : !energy.array<N, D>, !energy.array<K, D> -> !energy.array<N, K>
// CHECK:       %[[C:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK:         %[[LI:.*]] = extract %[[L]][%[[I]]] : !energy.array<N> -> !energy.array<>
// CHECK:         tabulate (%[[K:.*]] : @K) {
// CHECK:           %[[SK:.*]] = extract %[[S]][%[[I]], %[[K]]]
// CHECK:           sub %[[SK]], %[[LI]]
// CHECK:           exp
// CHECK:           add
// CHECK:       } : !energy.array<N, K>
// CHECK:       %[[G:.*]] = batch_matmul %[[C]], %{{.*}} : !energy.array<N, K>, !energy.array<K, D> -> !energy.array<N, D>
// CHECK-NEXT:  accumulate %[[G]] into @x : !energy.array<N, D>
energy.model @not_linear {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  gradient @x {
    %one = constant 1.000000e+00
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %l = reduce lse (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        yield %d : !energy.array<>
      } : !energy.array<>
      %g = reduce sum (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %shift = sub %d, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %a = add %w, %one : !energy.array<>, !energy.array<>
        %v = mul %a, %mm : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      accumulate %g into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// Parent side and tables (self-attention's gradient, as energy-gather-
// gradients leaves it). The sum over c weighted by the softmax of the lse
// that @x.gather recomputes becomes the column sum of a contraction over
// rows (c) and cols (p); it has the child side's score, so the two merge into
// one contraction with row and column values, and the let, read by nothing
// now, is erased. The projections Wq x_c and Wk x_p become matrix products
// X Wqᵀ and X Wkᵀ ahead of the contraction, whose score is then a dot
// product of two tables: bilinear. −1 and the matrices Wqᵀ, Wkᵀ are taken
// out of the sums, and each side's adjoint, Wqᵀ r_c at every c, is one
// product of the whole output, R (−Wq), added into all of x.
// CHECK-LABEL: energy.model @parent_side
// CHECK-NOT:   let @x.gather
// CHECK:       gradient @x {
// CHECK:         %[[MINUS:.*]] = constant -1.000000e+00
// CHECK:         %[[WQ:.*]] = read @Wq : !energy.array<D, D>
// CHECK:         %[[WK:.*]] = read @Wk : !energy.array<D, D>
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK-NEXT:    %[[Q:.*]] = batch_matmul %[[X]], %[[WQ]] transposed : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    %[[K:.*]] = batch_matmul %[[X]], %[[WK]] transposed : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    %[[R:.*]]:3 = softmax_contract bilinear rows (%[[C:.*]] : @N) cols (%[[P:.*]] : @N) score {
// CHECK-NOT:       matmul
// CHECK:           %[[QC:.*]] = extract %[[Q]][%[[C]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NOT:       matmul
// CHECK:           %[[KP:.*]] = extract %[[K]][%[[P]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[S:.*]] = dot %[[QC]], %[[KP]] : !energy.array<D>
// CHECK-NEXT:      yield %[[S]] : !energy.array<>
// CHECK-NEXT:    } row_values {
// CHECK-NOT:       matmul
// CHECK:           %[[V:.*]] = extract %[[K]][%[[P]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      yield %[[V]] : !energy.array<D>
// CHECK-NEXT:    } col_values {
// CHECK-NOT:       matmul
// CHECK:           %[[G:.*]] = extract %[[Q]][%[[C]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      yield %[[G]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
// CHECK-NEXT:    %[[MQ:.*]] = mul %[[WQ]], %[[MINUS]] : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:    %[[GQ:.*]] = batch_matmul %[[R]]#1, %[[MQ]] : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[GQ]] into @x : !energy.array<N, D>
// CHECK-NEXT:    %[[MK:.*]] = mul %[[WK]], %[[MINUS]] : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:    %[[GK:.*]] = batch_matmul %[[R]]#2, %[[MK]] : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[GK]] into @x : !energy.array<N, D>
// CHECK-NEXT:  }
energy.model @parent_side {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @Wq : param [@D, @D]
  tensor @Wk : param [@D, @D]
  let @x.gather [%c : @N] : !energy.array<> {
    %wq = read @Wq : !energy.array<D, D>
    %wk = read @Wk : !energy.array<D, D>
    %xc = read @x[%c] : !energy.array<D>
    %q = matmul %wq, %xc : !energy.array<D, D>, !energy.array<D>
    %l = reduce lse (%p : @N) {
      %xp = read @x[%p] : !energy.array<D>
      %k = matmul %wk, %xp : !energy.array<D, D>, !energy.array<D>
      %s = dot %q, %k : !energy.array<D>
      yield %s : !energy.array<>
    } : !energy.array<>
    yield %l : !energy.array<>
  }
  gradient @x {
    %minus = constant -1.000000e+00
    %wq = read @Wq : !energy.array<D, D>
    %wk = read @Wk : !energy.array<D, D>
    %wkT = transpose %wk : !energy.array<D, D>
    %wqT = transpose %wq : !energy.array<D, D>
    foreach (%c : @N) {
      %xc = read @x[%c] : !energy.array<D>
      %q = matmul %wq, %xc : !energy.array<D, D>, !energy.array<D>
      %l = reduce lse (%p : @N) {
        %xp = read @x[%p] : !energy.array<D>
        %k = matmul %wk, %xp : !energy.array<D, D>, !energy.array<D>
        %s = dot %q, %k : !energy.array<D>
        yield %s : !energy.array<>
      } : !energy.array<>
      %g = reduce sum (%p : @N) {
        %xp = read @x[%p] : !energy.array<D>
        %k = matmul %wk, %xp : !energy.array<D, D>, !energy.array<D>
        %s = dot %q, %k : !energy.array<D>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %a = mul %w, %minus : !energy.array<>, !energy.array<>
        %v = mul %a, %k : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      %gq = matmul %wqT, %g : !energy.array<D, D>, !energy.array<D>
      accumulate %gq into @x[%c] : !energy.array<D>
    }
    foreach (%p : @N) {
      %xp = read @x[%p] : !energy.array<D>
      %k = matmul %wk, %xp : !energy.array<D, D>, !energy.array<D>
      %h = reduce sum (%c : @N) {
        %l = read @x.gather[%c] : !energy.array<>
        %xc = read @x[%c] : !energy.array<D>
        %q = matmul %wq, %xc : !energy.array<D, D>, !energy.array<D>
        %s = dot %q, %k : !energy.array<D>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %a = mul %w, %minus : !energy.array<>, !energy.array<>
        %v = mul %a, %q : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      %gk = matmul %wkT, %h : !energy.array<D, D>, !energy.array<D>
      accumulate %gk into @x[%p] : !energy.array<D>
    }
  }
}

// -----

// Tables over one side and the quadratic form. In a mixture's score, ½
// logdet of the component's precision depends on k only: one `tabulate`
// over K ahead of the contraction, read back with an extract. The quadratic
// form of x_i − mu_k depends on both sides, so the score is not a dot
// product of tables; it is bias[k] − ½ quad(x[i] − mu[k], prec[k]): the
// contraction is `quadratic` (a mixture kernel's). The rows of x, mu and
// prec read at one side's index become whole reads and extracts.
// CHECK-LABEL: energy.model @mixture
// CHECK:       term @fit {
// CHECK:         %[[HALF:.*]] = constant 5.000000e-01
// CHECK:         %[[PREC:.*]] = read @prec : !energy.array<K, D, D>
// CHECK-NEXT:    %[[T:.*]] = tabulate (%[[K:.*]] : @K) {
// CHECK-NEXT:      %[[PK:.*]] = extract %[[PREC]][%[[K]]] : !energy.array<K, D, D> -> !energy.array<D, D>
// CHECK-NEXT:      %[[LD:.*]] = logdet %[[PK]] : !energy.array<D, D>
// CHECK-NEXT:      %[[HL:.*]] = mul %[[LD]], %[[HALF]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      yield %[[HL]] : !energy.array<>
// CHECK-NEXT:    } : !energy.array<K>
// CHECK-NEXT:    %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK-NEXT:    %[[MU:.*]] = read @mu : !energy.array<K, D>
// CHECK-NEXT:    %[[L:.*]] = softmax_contract quadratic rows (%[[I:.*]] : @N) cols (%[[K2:.*]] : @K) score {
// CHECK-NEXT:      %[[P:.*]] = extract %[[PREC]][%[[K2]]] : !energy.array<K, D, D> -> !energy.array<D, D>
// CHECK:           %[[TK:.*]] = extract %[[T]][%[[K2]]] : !energy.array<K> -> !energy.array<>
// CHECK-NEXT:      %[[XI:.*]] = extract %[[X]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[MK:.*]] = extract %[[MU]][%[[K2]]] : !energy.array<K, D> -> !energy.array<D>
// CHECK-NEXT:      %[[DIFF:.*]] = sub %[[XI]], %[[MK]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      %[[Q:.*]] = quad %[[DIFF]], %[[P]] : !energy.array<D>, !energy.array<D, D>
// CHECK-NEXT:      %[[HQ:.*]] = mul %[[Q]], %[[HALF]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      %[[S:.*]] = sub %[[TK]], %[[HQ]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      yield %[[S]] : !energy.array<>
// CHECK-NEXT:    } : !energy.array<N>
// CHECK-NEXT:    reduce sum parallel (%[[I2:.*]] : @N) {
// CHECK-NEXT:      extract %[[L]][%[[I2]]] : !energy.array<N> -> !energy.array<>
energy.model @mixture {
  dim @N
  dim @K
  dim @D
  tensor @x : input [@N, @D]
  tensor @mu : state [@K, @D]
  tensor @prec : input [@K, @D, @D]
  term @fit {
    %half = constant 5.000000e-01
    %e = reduce sum (%i : @N) {
      %l = reduce lse (%k : @K) {
        %p = read @prec[%k] : !energy.array<D, D>
        %ld = logdet %p : !energy.array<D, D>
        %hl = mul %ld, %half : !energy.array<>, !energy.array<>
        %xi = read @x[%i] : !energy.array<D>
        %mk = read @mu[%k] : !energy.array<D>
        %r = sub %xi, %mk : !energy.array<D>, !energy.array<D>
        %q = quad %r, %p : !energy.array<D>, !energy.array<D, D>
        %hq = mul %q, %half : !energy.array<>, !energy.array<>
        %s = sub %hl, %hq : !energy.array<>, !energy.array<>
        yield %s : !energy.array<>
      } : !energy.array<>
      yield %l : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
}

// -----

// A score dot(x_i, m_mu) / c with c computed outside becomes
// dot(x_i, m_mu) · (1 / c), the reciprocal computed ahead of the
// contraction: the bilinear form with a scale.
// CHECK-LABEL: energy.model @scaled_score
// CHECK:       %[[C:.*]] = read @scale : !energy.array<>
// CHECK:       %[[ONE:.*]] = constant 1.000000e+00
// CHECK-NEXT:  %[[INV:.*]] = div %[[ONE]], %[[C]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:  softmax_contract bilinear rows (%{{.*}} : @N) cols (%{{.*}} : @K) score {
// CHECK:         %[[D:.*]] = dot %{{.*}}, %{{.*}} : !energy.array<D>
// CHECK-NEXT:    %[[S:.*]] = mul %[[D]], %[[INV]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:    yield %[[S]] : !energy.array<>
energy.model @scaled_score {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  const @scale = 8.000000e+00
  term @e {
    %c = read @scale : !energy.array<>
    %e = reduce sum (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %l = reduce lse (%mu : @K) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %s = div %d, %c : !energy.array<>, !energy.array<>
        yield %s : !energy.array<>
      } : !energy.array<>
      yield %l : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
}

// -----

// A causal predicate (mu <= i) and a temperature stay on the contraction:
// the predicate as a region over (row, column), the temperature as an
// operand; the sum divides by the same temperature, so it joins. The
// predicate is a linear comparison of the row and the column, so the form
// stays bilinear.
// CHECK-LABEL: energy.model @causal
// CHECK:       gradient @x {
// CHECK:         %[[TAU:.*]] = read @tau : !energy.array<>
// CHECK:         %[[R:.*]]:2 = softmax_contract bilinear rows (%[[I:.*]] : @N) cols (%[[MU:.*]] : @K) where {
// CHECK-NEXT:      %[[A:.*]] = arith.cmpi sle, %[[MU]], %[[I]] : index
// CHECK-NEXT:      yield %[[A]] : i1
// CHECK-NEXT:    } temp(%[[TAU]] : !energy.array<>) score {
// CHECK:         } row_values {
// CHECK:         } : !energy.array<N>, !energy.array<N, D>
// CHECK-NEXT:    foreach parallel (%[[I2:.*]] : @N) {
// CHECK-NOT:       reduce
// CHECK:           extract %[[R]]#1[%[[I2]]] : !energy.array<N, D> -> !energy.array<D>
energy.model @causal {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  const @tau = 2.000000e+00
  gradient @x {
    %minus = constant -1.000000e+00
    %tau = read @tau : !energy.array<>
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %l = reduce lse (%mu : @K) where {
        %a = arith.cmpi sle, %mu, %i : index
        yield %a : i1
      } temp(%tau : !energy.array<>) {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        yield %d : !energy.array<>
      } : !energy.array<>
      %g = reduce sum (%mu : @K) where {
        %a = arith.cmpi sle, %mu, %i : index
        yield %a : i1
      } {
        %mm = read @m[%mu] : !energy.array<D>
        %d = dot %xi, %mm : !energy.array<D>
        %shift = sub %d, %l : !energy.array<>, !energy.array<>
        %scaled = div %shift, %tau : !energy.array<>, !energy.array<>
        %w = exp %scaled : !energy.array<>
        %a = mul %w, %minus : !energy.array<>, !energy.array<>
        %v = mul %a, %mm : !energy.array<>, !energy.array<D>
        yield %v : !energy.array<D>
      } : !energy.array<D>
      accumulate %g into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// An lse whose loop has a predicate, or ranges over a dim expression
// (@T - 1), cannot be lifted over it: it is planned where it is, with no
// row index (`rows ()`), and stays generic.
// CHECK-LABEL: energy.model @in_place
// CHECK:       term @predicated {
// CHECK-NEXT:    reduce sum parallel (%[[T:.*]] : @T) where {
// CHECK:         } {
// CHECK-NEXT:      %[[XT:.*]] = read @x[%[[T]]] : !energy.array<D>
// CHECK-NEXT:      %[[L:.*]] = softmax_contract generic rows () cols (%[[K:.*]] : @K) score {
// CHECK-NEXT:        %[[MK:.*]] = read @m[%[[K]]] : !energy.array<D>
// CHECK-NEXT:        %[[D:.*]] = dot %[[XT]], %[[MK]] : !energy.array<D>
// CHECK-NEXT:        yield %[[D]] : !energy.array<>
// CHECK-NEXT:      } : !energy.array<>
// CHECK-NEXT:      yield %[[L]] : !energy.array<>
// CHECK:       term @shifted {
// CHECK-NEXT:    reduce sum parallel (%[[T:.*]] : @T - 1) {
// CHECK-NEXT:      %[[XT:.*]] = read @x[%[[T]] + 1] : !energy.array<D>
// CHECK-NEXT:      %[[L:.*]] = softmax_contract generic rows () cols (%{{.*}} : @K) score {
// CHECK:             dot %[[XT]], %{{.*}} : !energy.array<D>
// CHECK:           } : !energy.array<>
// CHECK-NEXT:      yield %[[L]] : !energy.array<>
energy.model @in_place {
  dim @T
  dim @K
  dim @D
  tensor @x : state [@T, @D]
  tensor @m : input [@K, @D]
  term @predicated {
    %e = reduce sum (%t : @T) where {
      %zero = arith.constant 0 : index
      %a = arith.cmpi sgt, %t, %zero : index
      yield %a : i1
    } {
      %xt = read @x[%t] : !energy.array<D>
      %l = reduce lse (%k : @K) {
        %mk = read @m[%k] : !energy.array<D>
        %d = dot %xt, %mk : !energy.array<D>
        yield %d : !energy.array<>
      } : !energy.array<>
      yield %l : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
  term @shifted {
    %e = reduce sum (%t : @T - 1) {
      %xt = read @x[%t + 1] : !energy.array<D>
      %l = reduce lse (%k : @K) {
        %mk = read @m[%k] : !energy.array<D>
        %d = dot %xt, %mk : !energy.array<D>
        yield %d : !energy.array<>
      } : !energy.array<>
      yield %l : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
}

// -----

// Products of whole arrays: a parameter's adjoint summed over positions,
// Σ_i u_i v_iᵀ, is Uᵀ V (one index: a batch of one, without a batch axis)
// or Σ_b U[b]ᵀ V[b] (two, a summed batch), its scalar factors applied once, to
// the operand of fewer elements (the product then adds in place); a matrix applied to
// every row of a tensor and added into that row is one product of the
// rows, V Mᵀ (or, for Mᵀ, V M), added into the whole tensor (the backends
// compute it into the tensor's storage); and a table of M v[b, i] is one
// batch of products. A loop that adds into other rows than its own, or
// whose rows are scaled by a value of the row (not a table ahead of it),
// adds its rows' product with the matrix (one product of all the rows,
// ahead of the loop) as a row of its own, and reads the product of the
// same rows and matrix that an earlier statement made (CSE ahead of the
// element-wise fusion); a sum with a predicate is left alone.
// CHECK-LABEL: energy.model @whole_products
// CHECK:       gradient @W {
// CHECK:         %[[MINUS:.*]] = constant -1.0
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK:         %[[Y:.*]] = read @y : !energy.array<N, D>
// CHECK-NEXT:    %[[XM:.*]] = mul %[[X]], %[[MINUS]] : !energy.array<N, D>, !energy.array<>
// CHECK-NEXT:    %[[P:.*]] = batch_matmul %[[XM]] transposed, %[[Y]] summed : !energy.array<N, D>, !energy.array<N, D> -> !energy.array<D, D>
// CHECK-NEXT:    accumulate %[[P]] into @W : !energy.array<D, D>
// CHECK:         %[[ZZ:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
// CHECK-NEXT:    accumulate %[[ZZ]] into @W : !energy.array<D, D>
// CHECK:         reduce sum parallel (%{{.*}} : @N) where {
// CHECK:           outer
// CHECK:       gradient @z {
// CHECK:         %[[W:.*]] = read @W : !energy.array<D, D>
// CHECK:         %[[Z:.*]] = read @z : !energy.array<B, N, D>
// CHECK-NEXT:    %[[WZ:.*]] = batch_matmul %[[Z]], %[[W]] transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[WZ]] into @z : !energy.array<B, N, D>
// CHECK:         %[[T:.*]] = batch_matmul %{{.*}}, %[[W]] : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK:         foreach parallel<2> (%{{.*}} : @B, %{{.*}} : @N) {
// CHECK:           extract %[[T]]
// CHECK:           accumulate %{{.*}} into @z[
// CHECK:         foreach parallel<2> (%[[B:.*]] : @B, %[[I:.*]] : @N) {
// CHECK:           extract %[[WZ]]
// CHECK:           accumulate %{{.*}} into @z[%[[B]], %[[I]]]
// CHECK:       gradient @x {
// CHECK:         %[[W:.*]] = read @W : !energy.array<D, D>
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK-NEXT:    %[[WX:.*]] = batch_matmul %[[X]], %[[W]] : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[WX]] into @x : !energy.array<N, D>
// CHECK-NOT:     foreach
energy.model @whole_products {
  dim @B
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @z : state [@B, @N, @D]
  tensor @y : input [@N, @D]
  tensor @W : param [@D, @D]
  gradient @W {
    %minus = constant -1.000000e+00
    %s = reduce sum (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %yi = read @y[%i] : !energy.array<D>
      %o = outer %xi, %yi : !energy.array<D>, !energy.array<D>
      %m = mul %o, %minus : !energy.array<D, D>, !energy.array<>
      yield %m : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %s into @W : !energy.array<D, D>
    %t = reduce sum (%b : @B, %i : @N) {
      %zi = read @z[%b, %i] : !energy.array<D>
      %o = outer %zi, %zi : !energy.array<D>, !energy.array<D>
      yield %o : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %t into @W : !energy.array<D, D>
    %u = reduce sum (%i : @N) where {
      %c0 = arith.constant 0 : index
      %a = arith.cmpi sgt, %i, %c0 : index
      yield %a : i1
    } {
      %xi = read @x[%i] : !energy.array<D>
      %o = outer %xi, %xi : !energy.array<D>, !energy.array<D>
      yield %o : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %u into @W : !energy.array<D, D>
  }
  gradient @z {
    %w = read @W : !energy.array<D, D>
    %wT = transpose %w : !energy.array<D, D>
    foreach (%b : @B, %i : @N) {
      %zi = read @z[%b, %i] : !energy.array<D>
      %p = matmul %w, %zi : !energy.array<D, D>, !energy.array<D>
      accumulate %p into @z[%b, %i] : !energy.array<D>
    }
    %t = tabulate (%b : @B, %i : @N) {
      %zi = read @z[%b, %i] : !energy.array<D>
      %p = matmul %wT, %zi : !energy.array<D, D>, !energy.array<D>
      yield %p : !energy.array<D>
    } : !energy.array<B, N, D>
    foreach (%b : @B, %i : @N) {
      %ti = extract %t[%b, %i] : !energy.array<B, N, D> -> !energy.array<D>
      accumulate %ti into @z[%i, %b] : !energy.array<D>
    }
    foreach (%b : @B, %i : @N) {
      %zi = read @z[%b, %i] : !energy.array<D>
      %p = matmul %w, %zi : !energy.array<D, D>, !energy.array<D>
      %c = dot %zi, %zi : !energy.array<D>
      %q = mul %p, %c : !energy.array<D>, !energy.array<>
      accumulate %q into @z[%b, %i] : !energy.array<D>
    }
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %wT = transpose %w : !energy.array<D, D>
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %p = matmul %wT, %xi : !energy.array<D, D>, !energy.array<D>
      accumulate %p into @x[%i] : !energy.array<D>
    }
  }
}
