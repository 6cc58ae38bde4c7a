// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-order-lse-rows))' | FileCheck %s

// A sum over lse rows gets the batch axes its column side reads first (a
// sequence's before a head's), then the row's own: (h, c, b) is (b, h, c),
// the reads following their indices; (c, k) with a head's keys is (k, c).
// Without axes the column side reads, and with a predicate on the sum, the
// order stays.
// CHECK-LABEL: term @heads_last
// CHECK:         reduce sum (%[[B:.*]] : @B, %[[H:.*]] : @H, %[[C:.*]] : @N) {
// CHECK-NEXT:      reduce lse (%[[A:.*]] : @N) {
// CHECK-NEXT:        read @Wq[%[[H]]]
// CHECK-NEXT:        read @x[%[[B]], %[[C]]]
// CHECK:             read @Wk[%[[H]]]
// CHECK-NEXT:        read @x[%[[B]], %[[A]]]
// CHECK-LABEL: term @heads_only
// CHECK:         reduce sum (%[[K:.*]] : @H, %[[C2:.*]] : @N) {
// CHECK:             read @Wq[%[[K]]]
// CHECK-NEXT:        read @x[0, %[[C2]]]
// CHECK-LABEL: term @no_column_axes
// CHECK:         reduce sum (%[[C3:.*]] : @N, %[[B3:.*]] : @B) {
// A bias that pairs the row with the column by position alone (ALiBi's
// m[k] · (i − j)) is no value of the column side: (k, i, b) is (b, k, i).
// CHECK-LABEL: term @position_bias
// CHECK:         reduce sum (%[[B4:.*]] : @B, %[[K4:.*]] : @H, %[[I4:.*]] : @N) {
// CHECK:             read @m[%[[K4]]]
// CHECK-NEXT:        to_real %[[I4]]
// CHECK-LABEL: term @predicated
// CHECK:         reduce sum (%{{.*}} : @H, %{{.*}} : @N, %{{.*}} : @B) where
energy.model @order_lse_rows {
  dim @B
  dim @N
  dim @D
  dim @H
  dim @Y
  tensor @x : state [@B, @N, @D]
  tensor @h : input [@N, @D]
  tensor @Wq : param [@H, @Y, @D]
  tensor @Wk : param [@H, @Y, @D]
  tensor @m : param [@H]
  term @heads_last {
    %0 = reduce sum (%h2 : @H, %c : @N, %b : @B) {
      %2 = reduce lse (%a : @N) {
        %3 = read @Wq[%h2] : !energy.array<Y, D>
        %4 = read @x[%b, %c] : !energy.array<D>
        %5 = matmul %3, %4 : !energy.array<Y, D>, !energy.array<D>
        %6 = read @Wk[%h2] : !energy.array<Y, D>
        %7 = read @x[%b, %a] : !energy.array<D>
        %8 = matmul %6, %7 : !energy.array<Y, D>, !energy.array<D>
        %9 = dot %5, %8 : !energy.array<Y>
        yield %9 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @heads_only {
    %0 = reduce sum (%c : @N, %k : @H) {
      %2 = reduce lse (%i : @N) {
        %3 = read @Wq[%k] : !energy.array<Y, D>
        %4 = read @x[0, %c] : !energy.array<D>
        %5 = matmul %3, %4 : !energy.array<Y, D>, !energy.array<D>
        %6 = read @Wk[%k] : !energy.array<Y, D>
        %7 = read @h[%i] : !energy.array<D>
        %8 = matmul %6, %7 : !energy.array<Y, D>, !energy.array<D>
        %9 = dot %5, %8 : !energy.array<Y>
        yield %9 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @no_column_axes {
    %0 = reduce sum (%c : @N, %b : @B) {
      %2 = reduce lse (%a : @N) {
        %3 = read @x[%b, %c] : !energy.array<D>
        %4 = read @h[%a] : !energy.array<D>
        %5 = dot %3, %4 : !energy.array<D>
        yield %5 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @position_bias {
    %0 = reduce sum (%k : @H, %i : @N, %b : @B) {
      %2 = reduce lse (%j : @N) where {
        %3 = arith.cmpi sle, %j, %i : index
        yield %3 : i1
      } {
        %3 = read @Wq[%k] : !energy.array<Y, D>
        %4 = read @x[%b, %i] : !energy.array<D>
        %5 = matmul %3, %4 : !energy.array<Y, D>, !energy.array<D>
        %6 = read @Wk[%k] : !energy.array<Y, D>
        %7 = read @x[%b, %j] : !energy.array<D>
        %8 = matmul %6, %7 : !energy.array<Y, D>, !energy.array<D>
        %9 = dot %5, %8 : !energy.array<Y>
        %10 = read @m[%k] : !energy.array<>
        %11 = to_real %i : !energy.array<>
        %12 = to_real %j : !energy.array<>
        %13 = sub %11, %12 : !energy.array<>, !energy.array<>
        %14 = mul %10, %13 : !energy.array<>, !energy.array<>
        %15 = sub %9, %14 : !energy.array<>, !energy.array<>
        yield %15 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @predicated {
    %0 = reduce sum (%h2 : @H, %c : @N, %b : @B) where {
      %p = arith.cmpi ne, %c, %b : index
      yield %p : i1
    } {
      %2 = reduce lse (%a : @N) {
        %6 = read @Wk[%h2] : !energy.array<Y, D>
        %7 = read @x[%b, %a] : !energy.array<D>
        %8 = matmul %6, %7 : !energy.array<Y, D>, !energy.array<D>
        %9 = sum_last %8 : !energy.array<Y>
        yield %9 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  dynamics steps 1 {
    update @x gd(lr = 1.000000e-01)
  }
}
