// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-join-linear-loops))' | FileCheck %s

// Three loops that add a row's normalisation backward (the same linear map
// at each position: a scale, a centring and a division by the row's norm)
// of rows of three products into @x are one loop, at the last one's place,
// adding the map of the rows' sum: of whole products, added ahead of each
// loop that a loop joins (products that share a factor then combine).
// CHECK-LABEL: energy.model @norm_backward
// CHECK:       gradient @x {
// CHECK:         %[[P1:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[P2:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[S1:[0-9]+]] = add %[[P2]], %[[P1]]
// CHECK-NEXT:    %[[P3:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[S2:[0-9]+]] = add %[[P3]], %[[S1]]
// CHECK-NEXT:    foreach (%[[B:.*]] : @B, %[[I:.*]] : @N) {
// CHECK:           extract %[[S2]][%[[B]], %[[I]]]
// CHECK:           accumulate %{{.*}} into @x[%[[B]], %[[I]]]
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NOT:   foreach
energy.model @norm_backward {
  dim @B
  dim @N
  dim @D
  tensor @x : state [@B, @N, @D] = zeros
  tensor @gamma : param [@D]
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %g = read @gamma : !energy.array<D>
    %w = read @W : !energy.array<D, D>
    %x = read @x : !energy.array<B, N, D>
    %a = batch_matmul %x, %w : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    %b = batch_matmul %x, %w transposed : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    foreach (%i : @B, %j : @N) {
      %row = read @x[%i, %j] : !energy.array<D>
      %n = layernorm %row : !energy.array<D>
      %s = dot %row, %row : !energy.array<D>
      %u = extract %a[%i, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %0 = mul %u, %g : !energy.array<D>, !energy.array<D>
      %1 = dot %0, %n : !energy.array<D>
      %2 = mul %n, %1 : !energy.array<D>, !energy.array<>
      %3 = sub %0, %2 : !energy.array<D>, !energy.array<D>
      %4 = div %3, %s : !energy.array<D>, !energy.array<>
      accumulate %4 into @x[%i, %j] : !energy.array<D>
    }
    foreach (%i : @B, %j : @N) {
      %row = read @x[%i, %j] : !energy.array<D>
      %n = layernorm %row : !energy.array<D>
      %s = dot %row, %row : !energy.array<D>
      %u = extract %b[%i, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %0 = mul %u, %g : !energy.array<D>, !energy.array<D>
      %1 = dot %0, %n : !energy.array<D>
      %2 = mul %n, %1 : !energy.array<D>, !energy.array<>
      %3 = sub %0, %2 : !energy.array<D>, !energy.array<D>
      %4 = div %3, %s : !energy.array<D>, !energy.array<>
      accumulate %4 into @x[%i, %j] : !energy.array<D>
    }
    %c = batch_matmul %b, %w : !energy.array<B, N, D>, !energy.array<D, D> -> !energy.array<B, N, D>
    foreach (%i : @B, %j : @N) {
      %row = read @x[%i, %j] : !energy.array<D>
      %n = layernorm %row : !energy.array<D>
      %s = dot %row, %row : !energy.array<D>
      %u = extract %c[%i, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %0 = mul %g, %u : !energy.array<D>, !energy.array<D>
      %1 = dot %n, %0 : !energy.array<D>
      %2 = mul %n, %1 : !energy.array<D>, !energy.array<>
      %3 = sub %0, %2 : !energy.array<D>, !energy.array<D>
      %4 = div %3, %s : !energy.array<D>, !energy.array<>
      accumulate %4 into @x[%i, %j] : !energy.array<D>
    }
  }
}

// Not joined: a map that adds a term of its own (L(u) + c counts c once
// per loop), different maps (a product by W in one, by V in the other),
// and a row times a sum over its own elements (quadratic: the sum reads
// the row inside its region).
// CHECK-LABEL: energy.model @kept
// CHECK-COUNT-7: foreach
// CHECK-NOT:     foreach
energy.model @kept {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @y : state [@N, @D] = zeros
  tensor @W : param [@D, @D]
  tensor @V : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %y = read @y : !energy.array<N, D>
    %a = batch_matmul %y, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %b = batch_matmul %y, %w transposed : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = add %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = add %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = matmul %w, %u : !energy.array<D, D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %u = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %v = read @V : !energy.array<D, D>
      %0 = matmul %v, %u : !energy.array<D, D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %s = reduce sum (%d : @D) {
        %e = extract %u[%d] : !energy.array<D> -> !energy.array<>
        yield %e : !energy.array<>
      } : !energy.array<>
      %0 = mul %u, %s : !energy.array<D>, !energy.array<>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %u = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %s = reduce sum (%d : @D) {
        %e = extract %u[%d] : !energy.array<D> -> !energy.array<>
        yield %e : !energy.array<>
      } : !energy.array<>
      %0 = mul %u, %s : !energy.array<D>, !energy.array<>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
  }
}

// Joined across a read of the tensor they add into and another loop that
// adds into it: the loops add into the gradient's buffer, which no op
// reads, and adds commute.
// CHECK-LABEL: energy.model @across_reads
// CHECK:         %[[A:[0-9]+]] = batch_matmul
// CHECK:         foreach
// CHECK:         %[[E:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[S:[0-9]+]] = add %[[E]], %[[A]]
// CHECK-NEXT:    foreach (%[[I:.*]] : @N) {
// CHECK:           extract %[[S]][%[[I]]]
// CHECK:           accumulate %{{.*}} into @x[%[[I]]]
// CHECK-NEXT:    }
// CHECK-NOT:     foreach
energy.model @across_reads {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @y : state [@N, @D] = zeros
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %y = read @y : !energy.array<N, D>
    %a = batch_matmul %y, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = matmul %w, %u : !energy.array<D, D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    %z = read @x : !energy.array<N, D>
    %e = batch_matmul %z, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %e[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
  }
}

// A loop that adds a map of one row joins one that adds that map of its
// own row and another map of a second row (L₁(a) into L₁(b) + L₂(c)),
// which then joins one that adds both maps, in the other order (L₂(d) +
// L₁(e)): each row of the earlier loop is paired with the row its map
// applies to, and one loop adds L₁(a + b + e) + L₂(c + d).
// CHECK-LABEL: energy.model @row_sets
// CHECK:         %[[A:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[B:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[C:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[D:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[E:[0-9]+]] = batch_matmul
// CHECK-NEXT:    %[[AB:[0-9]+]] = add %[[B]], %[[A]]
// CHECK-DAG:     %[[ABE:[0-9]+]] = add %[[E]], %[[AB]]
// CHECK-DAG:     %[[CD:[0-9]+]] = add %[[D]], %[[C]]
// CHECK:         foreach (%[[I:.*]] : @N) {
// CHECK-DAG:       extract %[[ABE]][%[[I]]]
// CHECK-DAG:       extract %[[CD]][%[[I]]]
// CHECK:           accumulate %{{.*}} into @x[%[[I]]]
// CHECK-NEXT:    }
// CHECK-NOT:     foreach
energy.model @row_sets {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @y : state [@N, @D] = zeros
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %y = read @y : !energy.array<N, D>
    %a = batch_matmul %y, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %b = batch_matmul %y, %w transposed : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %c = batch_matmul %a, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %d = batch_matmul %b, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %e = batch_matmul %c, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %r = read @y[%i] : !energy.array<D>
      %u = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %v = extract %c[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      %1 = matmul %w, %v : !energy.array<D, D>, !energy.array<D>
      %2 = add %0, %1 : !energy.array<D>, !energy.array<D>
      accumulate %2 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %v = extract %d[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = matmul %w, %v : !energy.array<D, D>, !energy.array<D>
      %r = read @y[%i] : !energy.array<D>
      %u = extract %e[%i] : !energy.array<N, D> -> !energy.array<D>
      %0 = mul %u, %r : !energy.array<D>, !energy.array<D>
      %2 = add %1, %0 : !energy.array<D>, !energy.array<D>
      accumulate %2 into @x[%i] : !energy.array<D>
    }
  }
}
