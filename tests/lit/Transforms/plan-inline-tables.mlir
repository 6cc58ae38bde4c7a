// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-inline-tables))' | FileCheck %s

// Tables computed inside the loops that read them at their positions.
// @t, read once by a foreach (twice at the same position, computed once),
// and @u, a few elementwise ops read by a table and a sum, are computed
// where they are read; @n, read inside a sum nested in a sum over heads,
// is computed in the inner one.
// CHECK-LABEL: energy.model @inlined
// CHECK:       gradient @x {
// CHECK-NEXT:    %[[S:.*]] = read @s : !energy.array<>
// CHECK-NEXT:    foreach (%[[I:.*]] : @N) {
// CHECK-NEXT:      %[[A:.*]] = read @a[%[[I]]] : !energy.array<D>
// CHECK-NEXT:      %[[L:.*]] = layernorm %[[A]] : !energy.array<D>
// CHECK-NEXT:      %[[T:.*]] = mul %[[L]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      %[[TT:.*]] = add %[[T]], %[[T]] : !energy.array<D>, !energy.array<D>
// CHECK-NEXT:      accumulate %[[TT]] into @x[%[[I]]] : !energy.array<D>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[V:.*]] = tabulate (%[[J:.*]] : @N) {
// CHECK-NEXT:      %[[AJ:.*]] = read @a[%[[J]]] : !energy.array<D>
// CHECK-NEXT:      %[[U:.*]] = neg %[[AJ]] : !energy.array<D>
// CHECK-NEXT:      %[[V1:.*]] = mul %[[U]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:      yield %[[V1]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<N, D>
// CHECK-NEXT:    %[[W:.*]] = reduce sum (%[[K:.*]] : @N) {
// CHECK-NEXT:      %[[AK:.*]] = read @a[%[[K]]] : !energy.array<D>
// CHECK-NEXT:      %[[UK:.*]] = neg %[[AK]] : !energy.array<D>
// CHECK-NEXT:      yield %[[UK]] : !energy.array<D>
// CHECK-NEXT:    } : !energy.array<D>
// CHECK-NEXT:    accumulate %[[V]] into @x : !energy.array<N, D>
// CHECK-NEXT:    reduce sum (%[[H:.*]] : @H) {
// CHECK-NEXT:      reduce sum (%[[B:.*]] : @N) {
// CHECK-NEXT:        %[[G:.*]] = read @g[%[[H]], %[[B]]] : !energy.array<D>
// CHECK-NEXT:        %[[NG:.*]] = neg %[[G]] : !energy.array<D>
// CHECK-NEXT:        yield %[[NG]] : !energy.array<D>
energy.model @inlined {
  dim @N
  dim @D
  dim @H
  tensor @x : state [@N, @D]
  tensor @a : input [@N, @D]
  tensor @g : input [@H, @N, @D]
  tensor @s : param []
  gradient @x {
    %s = read @s : !energy.array<>
    %t = tabulate (%i : @N) {
      %a = read @a[%i] : !energy.array<D>
      %l = layernorm %a : !energy.array<D>
      %m = mul %l, %s : !energy.array<D>, !energy.array<>
      yield %m : !energy.array<D>
    } : !energy.array<N, D>
    foreach (%i : @N) {
      %t1 = extract %t[%i] : !energy.array<N, D> -> !energy.array<D>
      %t2 = extract %t[%i] : !energy.array<N, D> -> !energy.array<D>
      %tt = add %t1, %t2 : !energy.array<D>, !energy.array<D>
      accumulate %tt into @x[%i] : !energy.array<D>
    }
    %u = tabulate (%i : @N) {
      %a = read @a[%i] : !energy.array<D>
      %n = neg %a : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    %v = tabulate (%j : @N) {
      %uj = extract %u[%j] : !energy.array<N, D> -> !energy.array<D>
      %m = mul %uj, %s : !energy.array<D>, !energy.array<>
      yield %m : !energy.array<D>
    } : !energy.array<N, D>
    %w = reduce sum (%k : @N) {
      %uk = extract %u[%k] : !energy.array<N, D> -> !energy.array<D>
      yield %uk : !energy.array<D>
    } : !energy.array<D>
    accumulate %v into @x : !energy.array<N, D>
    %n = tabulate (%h : @H, %b : @N) {
      %g = read @g[%h, %b] : !energy.array<D>
      %ng = neg %g : !energy.array<D>
      yield %ng : !energy.array<D>
    } : !energy.array<H, N, D>
    %r = reduce sum (%h : @H) {
      %inner = reduce sum (%b : @N) {
        %e = extract %n[%h, %b] : !energy.array<H, N, D> -> !energy.array<D>
        yield %e : !energy.array<D>
      } : !energy.array<D>
      yield %inner : !energy.array<D>
    } : !energy.array<D>
    %wr = add %w, %r : !energy.array<D>, !energy.array<D>
    foreach (%i : @N) {
      accumulate %wr into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// Tables that stay. @l, a row normalisation read by two loops (work done
// again in each); @p, read by a product; @q, read at every position of a
// loop over two indices (each element read N times); @r, reading @x, which
// the loop that reads it accumulates into.
// CHECK-LABEL: energy.model @kept
// CHECK:       %[[L:.*]] = tabulate
// CHECK:         layernorm
// CHECK:       extract %[[L]]
// CHECK:       extract %[[L]]
// CHECK:       %[[P:.*]] = tabulate
// CHECK:       batch_matmul %[[P]]
// CHECK:       %[[Q:.*]] = tabulate
// CHECK:       foreach
// CHECK-NEXT:    extract %[[Q]]
// CHECK:       %[[R:.*]] = tabulate
// CHECK-NEXT:    read @x
// CHECK:       foreach
// CHECK-NEXT:    extract %[[R]]
energy.model @kept {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @a : input [@N, @D]
  tensor @m : param [@D, @D]
  gradient @x {
    %l = tabulate (%i : @N) {
      %a = read @a[%i] : !energy.array<D>
      %n = layernorm %a : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    %l1 = tabulate (%i : @N) {
      %e = extract %l[%i] : !energy.array<N, D> -> !energy.array<D>
      %n = neg %e : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    %l2 = tabulate (%i : @N) {
      %e = extract %l[%i] : !energy.array<N, D> -> !energy.array<D>
      %n = exp %e : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    %l12 = add %l1, %l2 : !energy.array<N, D>, !energy.array<N, D>
    accumulate %l12 into @x : !energy.array<N, D>
    %p = tabulate (%i : @N) {
      %a = read @a[%i] : !energy.array<D>
      %n = neg %a : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    %m = read @m : !energy.array<D, D>
    %pm = batch_matmul %p, %m : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    accumulate %pm into @x : !energy.array<N, D>
    %q = tabulate (%i : @N) {
      %a = read @a[%i] : !energy.array<D>
      %n = neg %a : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    foreach (%i : @N, %j : @N) {
      %e = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %e into @x[%j] : !energy.array<D>
    }
    %r = tabulate (%i : @N) {
      %x = read @x[%i] : !energy.array<D>
      %n = neg %x : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<N, D>
    foreach (%i : @N) {
      %e = extract %r[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %e into @x[%i] : !energy.array<D>
    }
  }
}
