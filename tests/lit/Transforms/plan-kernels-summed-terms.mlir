// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s

// A summand that adds two terms, each linear in the softmax weight: derived
// IR adds the adjoints of two uses of one value (the update pipeline's CSE
// makes a mixture's two reads of prec[k], in its logdet and in its
// quadratic form, one value). Each term is one sum of the contraction, with
// its own factors taken out; the loop adds the two. The pass runs alone, so
// values it leaves unused stay; the checks skip them.

// Parent side: a mixture's precision gradient, −r (½ (x − μ)(x − μ)ᵀ) plus
// −r (−½ P⁻ᵀ) summed over the points, reduced from `energyc --emit=update`
// of examples/gmm.energy. Both terms become column sums of one contraction
// (the scatter and the counts), so the let that recomputed the lse per
// point, with a log-determinant per point and component, is erased; the
// contraction is a mixture's (`quadratic`: its score is a quadratic form
// about mu[k], its column values moments).
// CHECK-LABEL: energy.model @precision_gradient
// CHECK-NOT:   let @prec.gather
// CHECK:       gradient @prec {
// CHECK:         %[[HALF:.*]] = constant 5.000000e-01
// CHECK-NEXT:    %[[MINUS:.*]] = constant -1.000000e+00
// CHECK:         %[[R:.*]]:3 = softmax_contract quadratic rows (%[[I:.*]] : @N) cols (%[[K:.*]] : @K) score {
// CHECK:         } col_values {
// CHECK:           %[[D:.*]] = sub
// CHECK-NEXT:      %[[O:.*]] = outer %[[D]], %[[D]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[O]], %{{.*}} : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:    } : !energy.array<N>, !energy.array<K, D, D>, !energy.array<K>
// CHECK-NEXT:    foreach parallel (%[[K2:.*]] : @K) {
// CHECK-NOT:       reduce
// CHECK:           %[[P:.*]] = read @prec[%[[K2]]] : !energy.array<D, D>
// CHECK:           %[[INV:.*]] = inverse %[[P]] : !energy.array<D, D>
// CHECK-NEXT:      %[[INVT:.*]] = transpose %[[INV]] : !energy.array<D, D>
// CHECK-NEXT:      %[[SCATTER:.*]] = extract %[[R]]#1[%[[K2]]] : !energy.array<K, D, D> -> !energy.array<D, D>
// CHECK-NEXT:      %[[COUNT:.*]] = extract %[[R]]#2[%[[K2]]] : !energy.array<K> -> !energy.array<>
// CHECK-NEXT:      %[[S1:.*]] = mul %[[SCATTER]], %[[MINUS]] : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:      %[[S2:.*]] = neg %[[S1]] : !energy.array<D, D>
// CHECK-NEXT:      %[[S3:.*]] = mul %[[S2]], %[[HALF]] : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:      %[[C1:.*]] = mul %[[COUNT]], %[[MINUS]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      %[[C2:.*]] = mul %[[C1]], %[[HALF]] : !energy.array<>, !energy.array<>
// CHECK-NEXT:      %[[C3:.*]] = mul %[[C2]], %[[INVT]] : !energy.array<>, !energy.array<D, D>
// CHECK-NEXT:      %[[G:.*]] = add %[[S3]], %[[C3]] : !energy.array<D, D>, !energy.array<D, D>
// CHECK-NEXT:      accumulate %[[G]] into @prec[%[[K2]]] : !energy.array<D, D>
energy.model @precision_gradient {
  dim @N
  dim @K
  dim @D
  tensor @x : input [@N, @D]
  tensor @mu : input [@K, @D]
  tensor @prec : state [@K, @D, @D]
  let @prec.gather [%i : @N] : !energy.array<> {
    %half = constant 5.000000e-01
    %xi = read @x[%i] : !energy.array<D>
    %l = reduce lse (%k : @K) {
      %p = read @prec[%k] : !energy.array<D, D>
      %ld = logdet %p : !energy.array<D, D>
      %hl = mul %ld, %half : !energy.array<>, !energy.array<>
      %mk = read @mu[%k] : !energy.array<D>
      %r = sub %xi, %mk : !energy.array<D>, !energy.array<D>
      %q = quad %r, %p : !energy.array<D>, !energy.array<D, D>
      %hq = mul %q, %half : !energy.array<>, !energy.array<>
      %s = sub %hl, %hq : !energy.array<>, !energy.array<>
      yield %s : !energy.array<>
    } : !energy.array<>
    yield %l : !energy.array<>
  }
  gradient @prec {
    %half = constant 5.000000e-01
    %minus = constant -1.000000e+00
    foreach (%k : @K) {
      %p = read @prec[%k] : !energy.array<D, D>
      %ld = logdet %p : !energy.array<D, D>
      %hl = mul %ld, %half : !energy.array<>, !energy.array<>
      %mk = read @mu[%k] : !energy.array<D>
      %inv = inverse %p : !energy.array<D, D>
      %invT = transpose %inv : !energy.array<D, D>
      %g = reduce sum (%i : @N) {
        %l = read @prec.gather[%i] : !energy.array<>
        %xi = read @x[%i] : !energy.array<D>
        %r = sub %xi, %mk : !energy.array<D>, !energy.array<D>
        %q = quad %r, %p : !energy.array<D>, !energy.array<D, D>
        %hq = mul %q, %half : !energy.array<>, !energy.array<>
        %s = sub %hl, %hq : !energy.array<>, !energy.array<>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %a = mul %w, %minus : !energy.array<>, !energy.array<>
        %na = neg %a : !energy.array<>
        %b = mul %na, %half : !energy.array<>, !energy.array<>
        %o = outer %r, %r : !energy.array<D>, !energy.array<D>
        %scatter = mul %b, %o : !energy.array<>, !energy.array<D, D>
        %c = mul %a, %half : !energy.array<>, !energy.array<>
        %count = mul %c, %invT : !energy.array<>, !energy.array<D, D>
        %both = add %scatter, %count : !energy.array<D, D>, !energy.array<D, D>
        yield %both : !energy.array<D, D>
      } : !energy.array<D, D>
      accumulate %g into @prec[%k] : !energy.array<D, D>
    }
  }
}

// -----

// Child side: the score dot(x_i, h_j) + dot(A x_i, v_j) has two paths to
// x_i, so its gradient sums r_ij h_j + Aᵀ (r_ij v_j) over j. Both terms are
// row sums of the contraction lifted out of the loop; −1 and Aᵀ (from
// outside the sum, applied last) are taken out: −1 applied to the rows the
// loop reads, −Aᵀ to all of them at once (one product of the rows). The
// score, a sum of two bilinear forms, is bilinear: the kernel takes the
// rows of the two pairs of tables side by side.
// CHECK-LABEL: energy.model @two_paths
// CHECK:       gradient @x {
// CHECK:         %[[MINUS:.*]] = constant -1.000000e+00
// CHECK:         %[[R:.*]]:3 = softmax_contract bilinear rows (%[[I:.*]] : @N) cols (%[[J:.*]] : @N) score {
// CHECK:         } row_values {
// CHECK-NEXT:      %[[H:.*]] = extract %{{.*}}[%[[J]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[V:.*]] = extract %{{.*}}[%[[J]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      yield %[[H]], %[[V]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
// CHECK:         %[[THROUGH:.*]] = batch_matmul %[[R]]#2, %{{.*}} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    foreach parallel (%[[I2:.*]] : @N) {
// CHECK-NOT:       reduce
// CHECK:           %[[RH:.*]] = extract %[[R]]#1[%[[I2]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK:           %[[DIRECT:.*]] = mul %[[RH]], %[[MINUS]] : !energy.array<D>, !energy.array<>
// CHECK:           %[[T:.*]] = extract %[[THROUGH]][%[[I2]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[G:.*]] = add %[[DIRECT]], %[[T]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      accumulate %[[G]] into @x[%[[I2]]] : !energy.array<D>
energy.model @two_paths {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @h : input [@N, @D]
  tensor @v : input [@N, @D]
  tensor @A : param [@D, @D]
  gradient @x {
    %minus = constant -1.000000e+00
    %a = read @A : !energy.array<D, D>
    %aT = transpose %a : !energy.array<D, D>
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      %axi = matmul %a, %xi : !energy.array<D, D>, !energy.array<D>
      %l = reduce lse (%j : @N) {
        %hj = read @h[%j] : !energy.array<D>
        %vj = read @v[%j] : !energy.array<D>
        %s1 = dot %xi, %hj : !energy.array<D>
        %s2 = dot %axi, %vj : !energy.array<D>
        %s = add %s1, %s2 : !energy.array<>, !energy.array<>
        yield %s : !energy.array<>
      } : !energy.array<>
      %g = reduce sum (%j : @N) {
        %hj = read @h[%j] : !energy.array<D>
        %vj = read @v[%j] : !energy.array<D>
        %s1 = dot %xi, %hj : !energy.array<D>
        %s2 = dot %axi, %vj : !energy.array<D>
        %s = add %s1, %s2 : !energy.array<>, !energy.array<>
        %shift = sub %s, %l : !energy.array<>, !energy.array<>
        %w = exp %shift : !energy.array<>
        %r = mul %w, %minus : !energy.array<>, !energy.array<>
        %direct = mul %r, %hj : !energy.array<>, !energy.array<D>
        %rv = mul %r, %vj : !energy.array<>, !energy.array<D>
        %through = matmul %aT, %rv : !energy.array<D, D>, !energy.array<D>
        %both = add %direct, %through : !energy.array<D>, !energy.array<D>
        yield %both : !energy.array<D>
      } : !energy.array<D>
      accumulate %g into @x[%i] : !energy.array<D>
    }
  }
}
