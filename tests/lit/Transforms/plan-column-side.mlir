// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-softmax-contracts))' | FileCheck %s

// A sum over the rows weighted by the softmax of an earlier contraction's
// normaliser is that contraction's column side, although the sum computes
// its score otherwise: it recomputes a head's query W[h] x[b, i] where the
// contraction reads it from a table of every head's products, and divides
// by s where the contraction multiplies by 1 / s. The sum becomes column
// values of the same contraction (one pass over the pairs for both).
// CHECK-LABEL: energy.model @recomputed_projection
// CHECK:       %[[A:.*]]:3 = softmax_contract generic rows (%[[B:.*]] : @B, %[[H:.*]] : @H, %[[J:.*]] : @N) cols (%[[I:.*]] : @S) score {
// CHECK:       } row_values {
// CHECK:       } col_values {
// CHECK-NEXT:    %[[K:.*]] = extract %{{.*}}[%[[B]], %[[H]], %[[J]]] : !energy.array<B, H, N, Y> -> !energy.array<Y>
// CHECK-NEXT:    yield %[[K]] : !energy.array<Y>
// CHECK-NEXT:  } : !energy.array<B, H, N>, !energy.array<B, H, N, Y>, !energy.array<B, H, S, Y>
// CHECK:       foreach (%[[FB:.*]] : @B, %[[FI:.*]] : @S) {
// CHECK:         reduce sum (%[[FH:.*]] : @H) {
// CHECK-NOT:       reduce
// CHECK-NOT:       exp
// CHECK:           extract %[[A]]#2[%[[FB]], %[[FH]], %[[FI]]]
energy.model @recomputed_projection {
  dim @B
  dim @H
  dim @N
  dim @S
  dim @Y
  dim @D
  tensor @k : input [@B, @H, @N, @Y]
  tensor @x : input [@B, @S, @D]
  tensor @W : param [@H, @Y, @D]
  tensor @s : param []
  tensor @g : state [@B, @S, @Y]
  gradient @g {
    %one = constant 1.000000e+00
    %s = read @s : !energy.array<>
    %scale = div %one, %s : !energy.array<>, !energy.array<>
    %w = read @W : !energy.array<H, Y, D>
    %k = read @k : !energy.array<B, H, N, Y>
    %xt = tabulate (%b : @B, %i : @S) {
      %r = read @x[%b, %i] : !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<B, S, D>
    %q = batch_matmul %xt, %w transposed {lhs_rows = 2 : i64} : !energy.array<B, S, D>, !energy.array<H, Y, D> -> !energy.array<H, B, S, Y>
    %a:2 = softmax_contract generic rows (%b : @B, %h : @H, %j : @N) cols (%i : @S) score {
      %1 = extract %k[%b, %h, %j] : !energy.array<B, H, N, Y> -> !energy.array<Y>
      %2 = extract %q[%h, %b, %i] : !energy.array<H, B, S, Y> -> !energy.array<Y>
      %3 = dot %1, %2 : !energy.array<Y>
      %4 = mul %3, %scale : !energy.array<>, !energy.array<>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %q[%h, %b, %i] : !energy.array<H, B, S, Y> -> !energy.array<Y>
      yield %1 : !energy.array<Y>
    } : !energy.array<B, H, N>, !energy.array<B, H, N, Y>
    foreach (%b : @B, %i : @S) {
      %xi = read @x[%b, %i] : !energy.array<D>
      %sum = reduce sum (%h : @H) {
        %wh = read @W[%h] : !energy.array<Y, D>
        %qi = matmul %wh, %xi : !energy.array<Y, D>, !energy.array<D>
        %inner = reduce sum (%j : @N) {
          %l = extract %a#0[%b, %h, %j] : !energy.array<B, H, N> -> !energy.array<>
          %kj = extract %k[%b, %h, %j] : !energy.array<B, H, N, Y> -> !energy.array<Y>
          %d = dot %kj, %qi : !energy.array<Y>
          %sd = div %d, %s : !energy.array<>, !energy.array<>
          %z = sub %sd, %l : !energy.array<>, !energy.array<>
          %e = exp %z : !energy.array<>
          %v = mul %e, %kj : !energy.array<>, !energy.array<Y>
          yield %v : !energy.array<Y>
        } : !energy.array<Y>
        yield %inner : !energy.array<Y>
      } : !energy.array<Y>
      accumulate %sum into @g[%b, %i] : !energy.array<Y>
    }
    foreach (%b : @B, %h : @H, %j : @N) {
      %r = extract %a#1[%b, %h, %j] : !energy.array<B, H, N, Y> -> !energy.array<Y>
      accumulate %r into @g[%b, %j] : !energy.array<Y>
    }
  }
}
