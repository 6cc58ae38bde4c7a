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
