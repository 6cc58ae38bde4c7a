// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-separate-scores))' | FileCheck %s

// An RBF kernel's score, -½‖q_c − k_p‖², is -½‖q_c‖² − ½‖k_p‖² + q_c·k_p:
// a dot product scaled by -2 · -½ plus a bias per row and one per column,
// each a table ahead of the contraction. The value q_c − k_p sums as
// k_p, and q_c times the sum of the weights (a value 1), put together
// after the contraction: the contraction is bilinear.
// CHECK-LABEL: energy.model @rbf
// CHECK:       %[[Q:.*]] = read @x
// CHECK:       %[[K:.*]] = read @y
// CHECK:       %[[HALF:.*]] = constant -5.000000e-01
// CHECK:       %[[TWO:.*]] = constant -2.000000e+00
// CHECK:       %[[SCALE:.*]] = mul %[[TWO]], %[[HALF]]
// CHECK:       %[[ONE:.*]] = constant 1.000000e+00
// CHECK:       %[[ROWBIAS:.*]] = tabulate
// CHECK:         extract %[[Q]]
// CHECK:         reduce_elements sqnorm
// CHECK:       %[[COLBIAS:.*]] = tabulate
// CHECK:         extract %[[K]]
// CHECK:         reduce_elements sqnorm
// CHECK:       %[[C:.*]]:3 = softmax_contract bilinear rows (%[[R:.*]] : @N) cols (%[[P:.*]] : @N) score {
// CHECK-NEXT:    %[[QR:.*]] = extract %[[Q]][%[[R]]]
// CHECK-NEXT:    %[[KP:.*]] = extract %[[K]][%[[P]]]
// CHECK-NEXT:    %[[RB:.*]] = extract %[[ROWBIAS]][%[[R]]]
// CHECK-NEXT:    %[[CB:.*]] = extract %[[COLBIAS]][%[[P]]]
// CHECK-NEXT:    %[[D:.*]] = dot %[[QR]], %[[KP]]
// CHECK-NEXT:    %[[S:.*]] = mul %[[D]], %[[SCALE]]
// CHECK-NEXT:    %[[SR:.*]] = add %[[S]], %[[RB]]
// CHECK-NEXT:    %[[SRC:.*]] = add %[[SR]], %[[CB]]
// CHECK-NEXT:    yield %[[SRC]]
// CHECK-NEXT:  } row_values {
// CHECK-NEXT:    %[[V:.*]] = extract %[[K]][%[[P]]]
// CHECK-NEXT:    yield %[[V]], %[[ONE]]
// CHECK:       %[[OUT:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK-NEXT:    %[[SUM:.*]] = extract %[[C]]#1[%[[I]]]
// CHECK-NEXT:    %[[NEG:.*]] = neg %[[SUM]]
// CHECK-NEXT:    %[[QI:.*]] = extract %[[Q]][%[[I]]]
// CHECK-NEXT:    %[[W:.*]] = extract %[[C]]#2[%[[I]]]
// CHECK-NEXT:    %[[QW:.*]] = mul %[[QI]], %[[W]]
// CHECK-NEXT:    %[[T:.*]] = add %[[NEG]], %[[QW]]
// CHECK-NEXT:    yield %[[T]]
// CHECK:       accumulate %[[OUT]] into @x
energy.model @rbf {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %s = constant -5.000000e-01
    %a:2 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = sub %1, %2 : !energy.array<D>, !energy.array<D>
      %4 = reduce_elements sqnorm %3 : !energy.array<D>
      %5 = mul %4, %s : !energy.array<>, !energy.array<>
      yield %5 : !energy.array<>
    } row_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = sub %1, %2 : !energy.array<D>, !energy.array<D>
      yield %3 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    accumulate %a#1 into @x : !energy.array<N, D>
  }
}

// -----

// A product of a row's number and a column's is not a dot product of
// one side's vector and the other's plus one-sided terms: left as it was.
// CHECK-LABEL: energy.model @outer
// CHECK:       softmax_contract generic
// CHECK:         %[[A:.*]] = extract
// CHECK-NEXT:    %[[B:.*]] = extract
// CHECK-NEXT:    %[[AB:.*]] = mul %[[A]], %[[B]]
// CHECK-NEXT:    yield %[[AB]]
// CHECK-NOT:   tabulate
energy.model @outer {
  dim @N
  tensor @x : state [@N]
  tensor @y : state [@N]
  gradient @x {
    %u = read @x : !energy.array<N>
    %v = read @y : !energy.array<N>
    %a:2 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %u[%c] : !energy.array<N> -> !energy.array<>
      %2 = extract %v[%p] : !energy.array<N> -> !energy.array<>
      %3 = mul %1, %2 : !energy.array<>, !energy.array<>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %v[%p] : !energy.array<N> -> !energy.array<>
      yield %1 : !energy.array<>
    } : !energy.array<N>, !energy.array<N>
    accumulate %a#1 into @x : !energy.array<N>
  }
}

// -----

// A sum of two products of one side's vector and the other's (rotary
// attention's halves, q1·k1 + q2·k2), the second subtracted and scaled: a
// sum of bilinear forms, each with its coefficient, which the kernel takes
// as one over the two pairs of tables' rows side by side.
// CHECK-LABEL: energy.model @two_products
// CHECK:       %[[S:.*]] = constant 5.000000e-01
// CHECK:       %[[NEG:.*]] = neg
// CHECK-NEXT:  %[[C1:.*]] = mul %{{.*}}, %[[S]]
// CHECK-NEXT:  %[[C2:.*]] = mul %[[NEG]], %[[S]]
// CHECK-NEXT:  softmax_contract bilinear rows (%[[R:.*]] : @N) cols (%[[P:.*]] : @N) score {
// CHECK:         %[[D1:.*]] = dot
// CHECK-NEXT:    %[[T1:.*]] = mul %[[D1]], %[[C1]]
// CHECK-NEXT:    %[[D2:.*]] = dot
// CHECK-NEXT:    %[[T2:.*]] = mul %[[D2]], %[[C2]]
// CHECK-NEXT:    %[[SUM:.*]] = add %[[T1]], %[[T2]]
// CHECK-NEXT:    yield %[[SUM]]
energy.model @two_products {
  dim @N
  dim @D
  dim @E
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @u : state [@N, @E]
  tensor @v : state [@N, @E]
  gradient @x {
    %a = read @x : !energy.array<N, D>
    %b = read @y : !energy.array<N, D>
    %c = read @u : !energy.array<N, E>
    %d = read @v : !energy.array<N, E>
    %s = constant 5.000000e-01
    %r:2 = softmax_contract generic rows (%i : @N) cols (%j : @N) score {
      %1 = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %b[%j] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %c[%i] : !energy.array<N, E> -> !energy.array<E>
      %5 = extract %d[%j] : !energy.array<N, E> -> !energy.array<E>
      %6 = dot %4, %5 : !energy.array<E>
      %7 = sub %3, %6 : !energy.array<>, !energy.array<>
      %8 = mul %7, %s : !energy.array<>, !energy.array<>
      yield %8 : !energy.array<>
    } row_values {
      %1 = extract %b[%j] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    accumulate %r#1 into @x : !energy.array<N, D>
  }
}
