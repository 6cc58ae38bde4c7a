// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-combine-products))' | FileCheck %s --check-prefix=HEAD

// Products that a gradient adds into one tensor and that share a factor up
// to scalars are one product of that factor and the sum of the others; what
// only the replaced sums read is erased.

// Rows of three arrays times W, -W/s and (W/s)ᵀᵀ, added into x: one table
// of a - b/s + c/s (each row scaled as its product was) times W, added
// right after the product; rows times V stay as they are, added in place
// by their product after the others (energy-plan-accumulate-products runs
// again after the last CSE). W's adjoint adds
// V Σ_b a[b]ᵀ b[b] - V Σ_b a[b]ᵀ c[b]: V (Σ_b a[b]ᵀ (b - c)[b]), one
// summed product of a and a table. V's adjoint adds (Σ_b a[b]ᵀ b[b])ᵀ W
// and (Σ_b a[b]ᵀ c[b])ᵀ W: (Σ_b a[b]ᵀ (b + c)[b])ᵀ W, computed as
// (Σ_b (b + c)[b]ᵀ a[b]) W, with no transpose.
// CHECK-LABEL: energy.model @shared_factors
// CHECK:       gradient @x and [@W, @V] of @e {
// CHECK:         %[[W:.*]] = read @W : !energy.array<D, D>
// CHECK-NEXT:    %[[V:.*]] = read @V : !energy.array<D, D>
// CHECK-NEXT:    %[[S:.*]] = read @s : !energy.array<>
// CHECK-NEXT:    %[[A:.*]] = read @a : !energy.array<B, N, D>
// CHECK-NEXT:    %[[B:.*]] = read @b : !energy.array<B, N, D>
// CHECK-NEXT:    %[[C:.*]] = read @c : !energy.array<B, N, D>
// CHECK-NEXT:    %[[MINUS:.*]] = constant -1.000000e+00
// CHECK-NEXT:    %[[MS:.*]] = div %[[MINUS]], %[[S]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:    %[[ONE:.*]] = constant 1.000000e+00
// CHECK-NEXT:    %[[PS:.*]] = div %[[ONE]], %[[S]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:    %[[R:.*]] = tabulate (%[[I:.*]] : @B, %[[J:.*]] : @N) {
// CHECK-NEXT:      %[[AI:.*]] = extract %[[A]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[BI:.*]] = extract %[[B]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[BS:.*]] = mul %[[BI]], %[[MS]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[AB:.*]] = add %[[AI]], %[[BS]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      %[[CI:.*]] = extract %[[C]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[CS:.*]] = mul %[[CI]], %[[PS]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[ABC:.*]] = add %[[AB]], %[[CS]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[ABC]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<B, N, D>
// CHECK-NEXT:    %[[RW:.*]] = batch_matmul %[[R]], %[[W]] : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[RW]] into @x : !energy.array<B, N, D>
// CHECK-NEXT:    %[[BMC:.*]] = tabulate (%[[I:.*]] : @B, %[[J:.*]] : @N) {
// CHECK-NEXT:      %[[BI:.*]] = extract %[[B]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[CI:.*]] = extract %[[C]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[CM:.*]] = mul %[[CI]], %[[MINUS]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[D:.*]] = add %[[BI]], %[[CM]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[D]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<B, N, D>
// CHECK-NEXT:    %[[ABMC:.*]] = batch_matmul %[[A]] transposed, %[[BMC]] summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
// CHECK-NEXT:    %[[VW:.*]] = matmul %[[V]], %[[ABMC]] : !energy.array<D, D>, !energy.array<D, D>
// CHECK-NEXT:    accumulate %[[VW]] into @W : !energy.array<D, D>
// CHECK-NEXT:    %[[BPC:.*]] = tabulate (%[[I:.*]] : @B, %[[J:.*]] : @N) {
// CHECK-NEXT:      %[[BI:.*]] = extract %[[B]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[CI:.*]] = extract %[[C]][%[[I]], %[[J]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[BC:.*]] = add %[[BI]], %[[CI]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[BC]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<B, N, D>
// CHECK-NEXT:    %[[T:.*]] = batch_matmul %[[BPC]] transposed, %[[A]] summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
// CHECK-NEXT:    %[[TW:.*]] = matmul %[[T]], %[[W]] : !energy.array<D, D>, !energy.array<D, D>
// CHECK-NEXT:    accumulate %[[TW]] into @V : !energy.array<D, D>
// CHECK-NEXT:    %[[AV:.*]] = batch_matmul %[[A]], %[[V]] : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[AV]] into @x : !energy.array<B, N, D>
// CHECK-NEXT:  }

energy.model @shared_factors {
  dim @B
  dim @N
  dim @D
  tensor @x : state [@B, @N, @D]
  tensor @a : input [@B, @N, @D]
  tensor @b : input [@B, @N, @D]
  tensor @c : input [@B, @N, @D]
  tensor @W : param [@D, @D]
  tensor @V : param [@D, @D]
  tensor @s : param []
  term @e {
    %x = read @x : !energy.array<B, N, D>
    %w = read @W : !energy.array<D, D>
    %xw = batch_matmul %x, %w : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    %e = reduce sum (%i : @B, %j : @N) {
      %r = extract %xw[%i, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %q = reduce_elements sum %r : !energy.array<D>
      yield %q : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
  gradient @x and [@W, @V] of @e {
    %minus = constant -1.000000e+00
    %w = read @W : !energy.array<D, D>
    %v = read @V : !energy.array<D, D>
    %s = read @s : !energy.array<>
    %a = read @a : !energy.array<B, N, D>
    %b = read @b : !energy.array<B, N, D>
    %c = read @c : !energy.array<B, N, D>
    %aw = batch_matmul %a, %w : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    accumulate %aw into @x : !energy.array<B, N, D>
    %wm = mul %w, %minus : !energy.array<D, D>, !energy.array<>
    %wms = div %wm, %s : !energy.array<D, D>, !energy.array<>
    %bw = batch_matmul %b, %wms : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    %av = batch_matmul %a, %v : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    %sum = add %bw, %av : !energy.array<B, N, D>, !energy.array<B, N, D>
    accumulate %sum into @x : !energy.array<B, N, D>
    %ws = div %w, %s : !energy.array<D, D>, !energy.array<>
    %wst = transpose %ws : !energy.array<D, D>
    %wstt = transpose %wst : !energy.array<D, D>
    %cw = batch_matmul %c, %wstt : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    %cwn = neg %cw : !energy.array<B, N, D>
    %cwm = mul %cwn, %minus : !energy.array<B, N, D>, !energy.array<>
    accumulate %cwm into @x : !energy.array<B, N, D>
    %ab = batch_matmul %a transposed, %b summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
    %ac = batch_matmul %a transposed, %c summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
    %vab = matmul %v, %ab : !energy.array<D, D>, !energy.array<D, D>
    %vac = matmul %v, %ac : !energy.array<D, D>, !energy.array<D, D>
    %gw = sub %vab, %vac : !energy.array<D, D>, !energy.array<D, D>
    accumulate %gw into @W : !energy.array<D, D>
    %abt = transpose %ab : !energy.array<D, D>
    %act = transpose %ac : !energy.array<D, D>
    %abtw = matmul %abt, %w : !energy.array<D, D>, !energy.array<D, D>
    %actw = matmul %act, %w : !energy.array<D, D>, !energy.array<D, D>
    accumulate %abtw into @V : !energy.array<D, D>
    accumulate %actw into @V : !energy.array<D, D>
  }
}

// -----

// A table of rows of x scaled by a number per row, times W, when x W was
// computed before, is the table of the rows of x W scaled the same way: no
// second product of the rows. Times V (not computed before) it stays a
// product.
// CHECK-LABEL: energy.model @scaled_rows
// CHECK:       gradient @x {
// CHECK:         %[[W:.*]] = read @W : !energy.array<D, D>
// CHECK-NEXT:    %[[V:.*]] = read @V : !energy.array<D, D>
// CHECK-NEXT:    %[[X:.*]] = read @x : !energy.array<B, N, D>
// CHECK-NEXT:    %[[XW:.*]] = batch_matmul %[[X]], %[[W]] transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[XW]] into @x : !energy.array<B, N, D>
// CHECK-NEXT:    %[[T:.*]] = tabulate (%[[B:.*]] : @B, %[[I:.*]] : @N) {
// CHECK-NEXT:      %[[S:.*]] = read @s[%[[B]], %[[I]]] : !energy.array<>
// CHECK-NEXT:      %[[R:.*]] = read @x[%[[B]], %[[I]]] : !energy.array<D>
// CHECK-NEXT:      %[[SR:.*]] = mul %[[S]], %[[R]] : !energy.array<>, !energy.array<D>
// CHECK-NEXT:      yield %[[SR]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<B, N, D>
// CHECK-NEXT:    %[[TS:.*]] = tabulate (%[[B:.*]] : @B, %[[I:.*]] : @N) {
// CHECK-NEXT:      %[[S:.*]] = read @s[%[[B]], %[[I]]] : !energy.array<>
// CHECK-NEXT:      %[[R:.*]] = extract %[[XW]][%[[B]], %[[I]]] : !energy.array<B, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[SR:.*]] = mul %[[S]], %[[R]] : !energy.array<>, !energy.array<D>
// CHECK-NEXT:      yield %[[SR]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[TS]] into @x : !energy.array<B, N, D>
// CHECK-NEXT:    %[[TV:.*]] = batch_matmul %[[T]], %[[V]] transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
// CHECK-NEXT:    accumulate %[[TV]] into @x : !energy.array<B, N, D>
energy.model @scaled_rows {
  dim @B
  dim @N
  dim @D
  tensor @x : state [@B, @N, @D]
  tensor @s : input [@B, @N]
  tensor @W : param [@D, @D]
  tensor @V : param [@D, @D]
  term @e {
    %x = read @x : !energy.array<B, N, D>
    %e = reduce sum (%b : @B, %i : @N) {
      %r = extract %x[%b, %i] : !energy.array<B, N, D> -> !energy.array<D>
      %q = reduce_elements sum %r : !energy.array<D>
      yield %q : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %v = read @V : !energy.array<D, D>
    %x = read @x : !energy.array<B, N, D>
    %xw = batch_matmul %x, %w transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    accumulate %xw into @x : !energy.array<B, N, D>
    %t = tabulate (%b : @B, %i : @N) {
      %s = read @s[%b, %i] : !energy.array<>
      %r = read @x[%b, %i] : !energy.array<D>
      %sr = mul %s, %r : !energy.array<>, !energy.array<D>
      yield %sr : !energy.array<D>
    } : !energy.array<B, N, D>
    %tw = batch_matmul %t, %w transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    accumulate %tw into @x : !energy.array<B, N, D>
    %tv = batch_matmul %t, %v transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    accumulate %tv into @x : !energy.array<B, N, D>
  }
}

// -----

// A head's parameter gradient added per head by loops over the heads, each
// reading its head of per-head products: kᵀ a - kᵀ b / s + kᵀ b into W
// (two loops) is one product kᵀ (a - b/s + b), added into the whole of W
// and the loops gone; V's kᵀ a + kᵀ b is kᵀ (a + b). The largest group goes
// first: kᵀ b and kᵀ b share their rhs too, but kᵀ a shares only k.
// HEAD-LABEL: energy.model @head_parameter
// HEAD:       gradient @W and [@V] of @e {
// HEAD:         %[[K:.*]] = read @k : !energy.array<H, B, N, Y>
// HEAD-NEXT:    %[[A:.*]] = read @a : !energy.array<H, B, N, D>
// HEAD-NEXT:    %[[B:.*]] = read @b : !energy.array<H, B, N, D>
// HEAD:         %[[MS:.*]] = div %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<>
// HEAD-NEXT:    %[[R:.*]] = tabulate (%[[H:.*]] : @H, %[[I:.*]] : @B, %[[J:.*]] : @N) {
// HEAD-NEXT:      %[[AI:.*]] = extract %[[A]][%[[H]], %[[I]], %[[J]]]
// HEAD-NEXT:      %[[BI:.*]] = extract %[[B]][%[[H]], %[[I]], %[[J]]]
// HEAD-NEXT:      %[[BS:.*]] = mul %[[BI]], %[[MS]] : !energy.array<D>, !energy.array<>
// HEAD-NEXT:      %[[AB:.*]] = add %[[AI]], %[[BS]]
// HEAD-NEXT:      %[[BI2:.*]] = extract %[[B]][%[[H]], %[[I]], %[[J]]]
// HEAD-NEXT:      %[[ABB:.*]] = add %[[AB]], %[[BI2]]
// HEAD-NEXT:      yield %[[ABB]] : !energy.array<D>
// HEAD-NEXT:    } : !energy.array<H, B, N, D>
// HEAD-NEXT:    %[[P:.*]] = batch_matmul %[[K]] transposed, %[[R]] {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<H, B, N, D> -> !energy.array<H, Y, D>
// HEAD-NEXT:    accumulate %[[P]] into @W : !energy.array<H, Y, D>
// HEAD:         %[[Q:.*]] = batch_matmul %[[K]] transposed, %{{.*}} {lhs_rows = 2 : i64}
// HEAD-NEXT:    accumulate %[[Q]] into @V : !energy.array<H, Y, D>
// HEAD-NOT:     foreach
// HEAD-NOT:     accumulate
// HEAD:       }
energy.model @head_parameter {
  dim @H
  dim @B
  dim @N
  dim @Y
  dim @D
  tensor @W : param [@H, @Y, @D]
  tensor @V : param [@H, @Y, @D]
  tensor @k : input [@H, @B, @N, @Y]
  tensor @a : input [@H, @B, @N, @D]
  tensor @b : input [@H, @B, @N, @D]
  tensor @s : param []
  term @e {
    %s = read @s : !energy.array<>
    yield %s : !energy.array<>
  }
  gradient @W and [@V] of @e {
    %k = read @k : !energy.array<H, B, N, Y>
    %a = read @a : !energy.array<H, B, N, D>
    %b = read @b : !energy.array<H, B, N, D>
    %s = read @s : !energy.array<>
    %ka = batch_matmul %k transposed, %a {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<H, B, N, D> -> !energy.array<H, Y, D>
    %kb = batch_matmul %k transposed, %b {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<H, B, N, D> -> !energy.array<H, Y, D>
    foreach (%h : @H) {
      %ka_h = extract %ka[%h] : !energy.array<H, Y, D> -> !energy.array<Y, D>
      %kb_h = extract %kb[%h] : !energy.array<H, Y, D> -> !energy.array<Y, D>
      %kbs = div %kb_h, %s : !energy.array<Y, D>, !energy.array<>
      %g = sub %ka_h, %kbs : !energy.array<Y, D>, !energy.array<Y, D>
      accumulate %g into @W[%h] : !energy.array<Y, D>
    }
    %kb2 = batch_matmul %k transposed, %b {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<H, B, N, D> -> !energy.array<H, Y, D>
    foreach (%h : @H) {
      %kb_h = extract %kb2[%h] : !energy.array<H, Y, D> -> !energy.array<Y, D>
      accumulate %kb_h into @W[%h] : !energy.array<Y, D>
    }
    foreach (%h : @H) {
      %ka_h = extract %ka[%h] : !energy.array<H, Y, D> -> !energy.array<Y, D>
      %kb_h = extract %kb[%h] : !energy.array<H, Y, D> -> !energy.array<Y, D>
      %g = add %ka_h, %kb_h : !energy.array<Y, D>, !energy.array<Y, D>
      accumulate %g into @V[%h] : !energy.array<Y, D>
    }
  }
}
