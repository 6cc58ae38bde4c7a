// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-linear-maps))' | FileCheck %s

// A mixture readout: each token j sums its slots' decoded vectors,
// Σ_i p_ji Wd mu[b, i]. With 8 slots and 256 tokens per sequence, Wd
// applies to each slot once, in a table over (b, i) ahead of the loop,
// rather than to each token's weighted sum of slots once per (b, j).
// CHECK-LABEL: energy.model @slots
// CHECK:       %[[WD:.*]] = read @Wd
// CHECK:       %[[T:.*]] = tabulate (%[[B:.*]] : @B, %[[I:.*]] : @S) {
// CHECK-NEXT:    %[[MU:.*]] = read @mu[%[[B]], %[[I]]]
// CHECK-NEXT:    %[[P:.*]] = matmul %[[WD]], %[[MU]]
// CHECK:         yield %[[P]]
// CHECK:       foreach (%[[LB:.*]] : @B, %[[LJ:.*]] : @N) {
// CHECK:         reduce sum (%[[LI:.*]] : @S) {
// CHECK-NOT:       matmul
// CHECK:           %[[ROW:.*]] = extract %[[T]][%[[LB]], %[[LI]]]
// CHECK:           %[[W:.*]] = mul %{{.*}}, %[[ROW]]
// CHECK:           yield %[[W]]
energy.model @slots {
  dim @B = 16
  dim @N = 256
  dim @S = 8
  dim @D = 64
  tensor @mu : input [@B, @S, @D]
  tensor @w : input [@B, @N, @S]
  tensor @Wd : param [@D, @D]
  tensor @x : state [@B, @N, @D]
  gradient @x {
    %Wd = read @Wd : !energy.array<D, D>
    foreach (%b : @B, %j : @N) {
      %r = reduce sum (%i : @S) {
        %p = read @w[%b, %j, %i] : !energy.array<>
        %m = read @mu[%b, %i] : !energy.array<D>
        %s = mul %p, %m : !energy.array<>, !energy.array<D>
        %d = matmul %Wd, %s : !energy.array<D, D>, !energy.array<D>
        yield %d : !energy.array<D>
      } : !energy.array<D>
      accumulate %r into @x[%b, %j] : !energy.array<D>
    }
  }
}

// -----

// As many columns as rows (self-attention, 64 tokens) and a projection that
// narrows D = 128 to Y = 32: each token's key projection in a table over
// (b, h, i) costs what the product after the sum would, and the sum then
// adds Y rather than D per pair.
// CHECK-LABEL: energy.model @narrowing
// CHECK:       tabulate (%{{.*}} : @B, %{{.*}} : @H, %{{.*}} : @N) {
// CHECK:         matmul
// CHECK:       foreach (%{{.*}} : @B, %{{.*}} : @H, %{{.*}} : @N) {
// CHECK:         reduce sum
// CHECK-NOT:       matmul
// CHECK:           yield {{.*}} : !energy.array<Y>
// CHECK:         } : !energy.array<Y>
// CHECK-NEXT:    accumulate
energy.model @narrowing {
  dim @B = 8
  dim @H = 4
  dim @N = 64
  dim @D = 128
  dim @Y = 32
  tensor @k : input [@B, @N, @D]
  tensor @w : input [@B, @H, @N, @N]
  tensor @Wk : param [@H, @Y, @D]
  tensor @q : state [@B, @H, @N, @Y]
  gradient @q {
    foreach (%b : @B, %h : @H, %c : @N) {
      %W = read @Wk[%h] : !energy.array<Y, D>
      %r = reduce sum (%a : @N) {
        %p = read @w[%b, %h, %c, %a] : !energy.array<>
        %v = read @k[%b, %a] : !energy.array<D>
        %s = mul %p, %v : !energy.array<>, !energy.array<D>
        %d = matmul %W, %s : !energy.array<Y, D>, !energy.array<D>
        yield %d : !energy.array<Y>
      } : !energy.array<Y>
      accumulate %r into @q[%b, %h, %c] : !energy.array<Y>
    }
  }
}

// -----

// Where the projection widens (Y = 32 to D = 128), the product applies
// once after the sum, which adds Y.
// CHECK-LABEL: energy.model @widening
// CHECK-NOT:   tabulate
// CHECK:       reduce sum
// CHECK:         yield {{.*}} : !energy.array<Y>
// CHECK:       } : !energy.array<Y>
// CHECK:       matmul {{.*}} : !energy.array<D, Y>, !energy.array<Y>
energy.model @widening {
  dim @B = 8
  dim @H = 4
  dim @N = 64
  dim @D = 128
  dim @Y = 32
  tensor @k : input [@B, @N, @Y]
  tensor @w : input [@B, @H, @N, @N]
  tensor @Wk : param [@H, @D, @Y]
  tensor @q : state [@B, @H, @N, @D]
  gradient @q {
    foreach (%b : @B, %h : @H, %c : @N) {
      %W = read @Wk[%h] : !energy.array<D, Y>
      %r = reduce sum (%a : @N) {
        %p = read @w[%b, %h, %c, %a] : !energy.array<>
        %v = read @k[%b, %a] : !energy.array<Y>
        %s = mul %p, %v : !energy.array<>, !energy.array<Y>
        %d = matmul %W, %s : !energy.array<D, Y>, !energy.array<Y>
        yield %d : !energy.array<D>
      } : !energy.array<D>
      accumulate %r into @q[%b, %h, %c] : !energy.array<D>
    }
  }
}

// -----

// A sum over (batch, head, position) of a head's projection of a row
// (what a layer norm's shift gradient adds through an attention): the
// projection varies with the head only, so the rows are summed per head
// first and each head's matrix applies once, not once per row; likewise
// for a sum over (batch, position) of a sum over heads.
// CHECK-LABEL: energy.model @per_head
// CHECK:       reduce sum (%[[H:.*]] : @H) {
// CHECK:         %[[W:.*]] = read @W[%[[H]]]
// CHECK:         %[[S:.*]] = reduce sum (%{{.*}} : @B, %{{.*}} : @N) {
// CHECK-NOT:       matmul
// CHECK:         } : !energy.array<Y>
// CHECK:         matmul %{{.*}}, %[[S]]
// CHECK:       reduce sum (%[[H2:.*]] : @H) {
// CHECK:         reduce sum (%{{.*}} : @B, %{{.*}} : @N) {
// CHECK-NOT:       matmul
// CHECK:         } : !energy.array<Y>
// CHECK:         matmul
energy.model @per_head {
  dim @B = 8
  dim @H = 4
  dim @N = 64
  dim @D = 128
  dim @Y = 32
  tensor @u : input [@B, @H, @N, @Y]
  tensor @W : param [@H, @Y, @D]
  tensor @delta : state [@D]
  gradient @delta {
    %s = reduce sum (%b : @B, %h : @H, %c : @N) {
      %w = read @W[%h] : !energy.array<Y, D>
      %t = transpose %w : !energy.array<Y, D>
      %v = read @u[%b, %h, %c] : !energy.array<Y>
      %p = matmul %t, %v : !energy.array<D, Y>, !energy.array<Y>
      yield %p : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @delta : !energy.array<D>
    %n = reduce sum (%b : @B, %c : @N) {
      %i = reduce sum (%h : @H) {
        %w = read @W[%h] : !energy.array<Y, D>
        %t = transpose %w : !energy.array<Y, D>
        %v = read @u[%b, %h, %c] : !energy.array<Y>
        %p = matmul %t, %v : !energy.array<D, Y>, !energy.array<Y>
        yield %p : !energy.array<D>
      } : !energy.array<D>
      yield %i : !energy.array<D>
    } : !energy.array<D>
    accumulate %n into @delta : !energy.array<D>
  }
}
