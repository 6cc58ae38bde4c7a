// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-kernels))' | FileCheck %s

// A foreach whose accumulations into one tensor have its index at different
// axes is not parallel: position i adds into row i (W[i, j]) and into column
// i (W[j, i]), so positions i = 0 and i = 1 both add into W[1, 0] and
// W[0, 1]. (Marked parallel, the gradient of
// `energy e = sum(i: N, j: N) W[i, j] * W[j, i]` raced: at N = 1500 it
// differed between runs on 3 threads.)
// CHECK-LABEL: energy.model @symmetric
// CHECK:       gradient @W {
// CHECK-NEXT:    foreach (%{{.*}} : @N, %{{.*}} : @N) {
energy.model @symmetric {
  dim @N
  tensor @W : state [@N, @N]
  gradient @W {
    foreach (%i : @N, %j : @N) {
      %a = read @W[%i, %j] : !energy.array<>
      %b = read @W[%j, %i] : !energy.array<>
      accumulate %a into @W[%j, %i] : !energy.array<>
      accumulate %b into @W[%i, %j] : !energy.array<>
    }
  }
}
