// RUN: energy-opt %s --energy-factor-outer-sums | FileCheck %s

// In the gradient of an auxiliary term, a sum over p of outer products
// whose left side is a scalar times a vector from outside the sum becomes
// one outer product of that vector with a sum of vectors; a sum of two such
// products is split first, and an outer product of a sum distributed.

// CHECK-LABEL: gradient @w of @aux
// CHECK:      %[[U:.*]] = read @u
// CHECK:      %[[S:.*]] = reduce sum (%{{.*}} : @N) {
// CHECK:        %[[D:.*]] = dot
// CHECK:        %[[SV:.*]] = mul %[[D]], %{{.*}} : !energy.array<>, !energy.array<D>
// CHECK:        yield %[[SV]] : !energy.array<D>
// CHECK:      } : !energy.array<D>
// CHECK:      %[[O:.*]] = outer %[[U]], %[[S]]
// CHECK:      add
// CHECK:      accumulate
// CHECK-NOT:  reduce sum {{.*}} -> !energy.array<D, D>

// In the gradient of the energy itself nothing changes.
// CHECK-LABEL: gradient @w {
// CHECK:        outer
// CHECK:        yield %{{.*}} : !energy.array<D, D>
energy.model @m {
  dim @N
  dim @D
  tensor @x : input [@N, @D]
  tensor @u : param [@D]
  tensor @w : state [@D, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  term @aux auxiliary {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @w of @aux {
    %u = read @u : !energy.array<D>
    %s = reduce sum (%p : @N) {
      %v = read @x[%p] : !energy.array<D>
      %d = dot %v, %u : !energy.array<D>
      %su = mul %d, %u : !energy.array<>, !energy.array<D>
      %a = add %su, %u : !energy.array<D>, !energy.array<D>
      %o = outer %a, %v : !energy.array<D>, !energy.array<D>
      yield %o : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %s into @w : !energy.array<D, D>
  }
  gradient @w {
    %u = read @u : !energy.array<D>
    %s = reduce sum (%p : @N) {
      %v = read @x[%p] : !energy.array<D>
      %d = dot %v, %u : !energy.array<D>
      %su = mul %d, %u : !energy.array<>, !energy.array<D>
      %o = outer %su, %v : !energy.array<D>, !energy.array<D>
      yield %o : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %s into @w : !energy.array<D, D>
  }
}

// A linear map applied to what the sum adds, its other operands from
// outside the sum, comes out of it: a matrix (the adjoint of Wkᵀ Wq pulled
// back to Wq and Wk), a transpose, a negation, a divisor:
// Σ_p -(outer(s_p u, v_p) A)ᵀ / c = -((outer(u, Σ_p s_p v_p) A)ᵀ) / c, no
// D × D work per pair.
// CHECK-LABEL: energy.model @invariant_factor
// CHECK:       gradient @w of @aux {
// CHECK:         %[[A:.*]] = read @a : !energy.array<D, D>
// CHECK:         %[[U:.*]] = read @u : !energy.array<D>
// CHECK:         %[[S:.*]] = reduce sum (%{{.*}} : @N) {
// CHECK:           mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<D>
// CHECK:           yield %{{.*}} : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<D>
// CHECK-NEXT:    %[[O:.*]] = outer %[[U]], %[[S]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:    %[[P:.*]] = matmul %[[O]], %[[A]] : !energy.array<D, D>, !energy.array<D, D>
// CHECK-NEXT:    %[[T:.*]] = transpose %[[P]] : !energy.array<D, D>
// CHECK-NEXT:    %[[N:.*]] = neg %[[T]] : !energy.array<D, D>
// CHECK-NEXT:    %[[Q:.*]] = div %[[N]], %{{.*}} : !energy.array<D, D>, !energy.array<>
// CHECK-NEXT:    accumulate %[[Q]] into @w : !energy.array<D, D>
energy.model @invariant_factor {
  dim @N
  dim @D
  tensor @x : input [@N, @D]
  tensor @u : param [@D]
  tensor @a : param [@D, @D]
  tensor @w : state [@D, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  term @aux auxiliary {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @w of @aux {
    %a = read @a : !energy.array<D, D>
    %u = read @u : !energy.array<D>
    %c = constant 3.0
    %s = reduce sum (%p : @N) {
      %v = read @x[%p] : !energy.array<D>
      %d = dot %v, %u : !energy.array<D>
      %su = mul %d, %u : !energy.array<>, !energy.array<D>
      %o = outer %su, %v : !energy.array<D>, !energy.array<D>
      %m = matmul %o, %a : !energy.array<D, D>, !energy.array<D, D>
      %t = transpose %m : !energy.array<D, D>
      %n = neg %t : !energy.array<D, D>
      %q = div %n, %c : !energy.array<D, D>, !energy.array<>
      yield %q : !energy.array<D, D>
    } : !energy.array<D, D>
    accumulate %s into @w : !energy.array<D, D>
  }
}
