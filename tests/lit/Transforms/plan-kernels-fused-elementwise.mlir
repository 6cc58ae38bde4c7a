// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s

// Elementwise arithmetic on whole arrays whose intermediate values feed
// only one expression is one table of the expression's rows. A value with
// two uses stays an array that the expressions read by row; one op alone,
// and arrays of rank one, stay as they are.
// CHECK-LABEL: energy.model @fused
// CHECK:       gradient @x {
// CHECK:         %[[S:.*]] = read @s : !energy.array<>
// CHECK-NEXT:    %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK-NEXT:    %[[A:.*]] = read @a : !energy.array<N, D>
// CHECK-NEXT:    %[[T:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK-NEXT:      %[[XI:.*]] = extract %[[X]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[AI:.*]] = extract %[[A]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[XA:.*]] = mul %[[XI]], %[[AI]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      %[[XAS:.*]] = mul %[[XA]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[E:.*]] = exp %[[XAS]] : !energy.array<D>
// CHECK-NEXT:      %[[AI2:.*]] = extract %[[A]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[D:.*]] = sub %[[E]], %[[AI2]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[D]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[T]] into @x : !energy.array<N, D>
// CHECK-NEXT:    %[[SH:.*]] = add %[[X]], %[[A]] : !energy.array<N, D>, !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[SH]] into @x : !energy.array<N, D>
// CHECK-NEXT:    %[[T2:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK-NEXT:      %[[SHI:.*]] = extract %[[SH]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[NEG:.*]] = neg %[[SHI]] : !energy.array<D>
// CHECK-NEXT:      %[[SHI2:.*]] = extract %[[SH]][%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[SQ:.*]] = mul %[[NEG]], %[[SHI2]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      yield %[[SQ]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[T2]] into @x : !energy.array<N, D>
// CHECK:       gradient @v {
// CHECK-NEXT:    %[[S:.*]] = read @s : !energy.array<>
// CHECK-NEXT:    %[[V:.*]] = read @v : !energy.array<D>
// CHECK-NEXT:    %[[V2:.*]] = mul %[[V]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:    %[[V3:.*]] = neg %[[V2]] : !energy.array<D>
// CHECK-NEXT:    accumulate %[[V3]] into @v : !energy.array<D>
energy.model @fused {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @v : state [@D]
  tensor @a : input [@N, @D]
  tensor @s : param []
  term @e {
    %x = read @x : !energy.array<N, D>
    %v = read @v : !energy.array<D>
    %e = reduce sum (%i : @N) {
      %r = extract %x[%i] : !energy.array<N, D> -> !energy.array<D>
      %rv = dot %r, %v : !energy.array<D>
      yield %rv : !energy.array<>
    } : !energy.array<>
    yield %e : !energy.array<>
  }
  gradient @x {
    %s = read @s : !energy.array<>
    %x = read @x : !energy.array<N, D>
    %a = read @a : !energy.array<N, D>
    %xa = mul %x, %a : !energy.array<N, D>, !energy.array<N, D>
    %xas = mul %xa, %s : !energy.array<N, D>, !energy.array<>
    %e = exp %xas : !energy.array<N, D>
    %d = sub %e, %a : !energy.array<N, D>, !energy.array<N, D>
    accumulate %d into @x : !energy.array<N, D>
    %shared = add %x, %a : !energy.array<N, D>, !energy.array<N, D>
    accumulate %shared into @x : !energy.array<N, D>
    %neg = neg %shared : !energy.array<N, D>
    %sq = mul %neg, %shared : !energy.array<N, D>, !energy.array<N, D>
    accumulate %sq into @x : !energy.array<N, D>
  }
  gradient @v {
    %s = read @s : !energy.array<>
    %v = read @v : !energy.array<D>
    %v2 = mul %v, %s : !energy.array<D>, !energy.array<>
    %v3 = neg %v2 : !energy.array<D>
    accumulate %v3 into @v : !energy.array<D>
  }
}
