// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-mark-parallel))' | FileCheck %s

// Parallel loops. A foreach whose accumulations all index by its first
// index is marked parallel as it is; one whose accumulations index by its
// second index has its indices interchanged (in the predicate too, which
// still reads k < i) and is marked; one that accumulates into a fixed slot
// is not marked. A sum directly in a gradient is marked parallel, a sum
// nested in it is not; a loop nested in another is not marked.
// CHECK-LABEL: energy.model @parallel
// CHECK:       gradient @x {
// CHECK-NEXT:    foreach parallel (%[[I:.*]] : @N, %[[K:.*]] : @K) {
// CHECK-NEXT:      %[[MK:.*]] = read @m[%[[K]]] : !energy.array<D>
// CHECK-NEXT:      accumulate %[[MK]] into @x[%[[I]]] : !energy.array<D>
// CHECK-NEXT:    }
// CHECK-NEXT:    foreach parallel (%[[I:.*]] : @N, %[[K:.*]] : @K) where {
// CHECK-NEXT:      %[[A:.*]] = arith.cmpi slt, %[[K]], %[[I]] : index
// CHECK-NEXT:      yield %[[A]] : i1
// CHECK-NEXT:    } {
// CHECK-NEXT:      %[[MK:.*]] = read @m[%[[K]]] : !energy.array<D>
// CHECK-NEXT:      accumulate %[[MK]] into @x[%[[I]]] : !energy.array<D>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = reduce sum parallel (%{{.*}} : @K) {
// CHECK-NEXT:      reduce sum (%{{.*}} : @N) {
// CHECK:         foreach parallel (%[[I:.*]] : @N) {
// CHECK-NEXT:      foreach (%{{.*}} : @K) {
// CHECK-NEXT:        accumulate %[[S]] into @x[%[[I]]] : !energy.array<D>
// CHECK:       gradient @y {
// CHECK-NEXT:    foreach (%[[I:.*]] : @N) {
// CHECK-NEXT:      %[[XI:.*]] = read @x[%[[I]]] : !energy.array<D>
// CHECK-NEXT:      accumulate %[[XI]] into @y : !energy.array<D>
energy.model @parallel {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@D]
  tensor @m : input [@K, @D]
  gradient @x {
    foreach (%i : @N, %k : @K) {
      %mk = read @m[%k] : !energy.array<D>
      accumulate %mk into @x[%i] : !energy.array<D>
    }
    foreach (%k : @K, %i : @N) where {
      %a = arith.cmpi slt, %k, %i : index
      yield %a : i1
    } {
      %mk = read @m[%k] : !energy.array<D>
      accumulate %mk into @x[%i] : !energy.array<D>
    }
    %s = reduce sum (%k : @K) {
      %t = reduce sum (%j : @N) {
        %xj = read @x[%j] : !energy.array<D>
        yield %xj : !energy.array<D>
      } : !energy.array<D>
      yield %t : !energy.array<D>
    } : !energy.array<D>
    foreach (%i : @N) {
      foreach (%j : @K) {
        accumulate %s into @x[%i] : !energy.array<D>
      }
    }
  }
  gradient @y {
    foreach (%i : @N) {
      %xi = read @x[%i] : !energy.array<D>
      accumulate %xi into @y : !energy.array<D>
    }
  }
}
