// RUN: energy-opt %s --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s

// The buffers' addresses are loaded once, at the kernel's entry: a loop that
// stores into one buffer and reads others does not load them again at each
// position (LLVM cannot tell that the store leaves the buffer array as it
// was, and would not vectorise the loop).
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK:         llvm.getelementptr %arg0[1]
// CHECK:         llvm.getelementptr %arg0[0]
// CHECK:         scf.for
// CHECK-NOT:     llvm.getelementptr %arg0[
// CHECK:         return
energy.model @rows {
  dim @B
  dim @D
  tensor @x : state [@B, @D]
  tensor @y : input [@B, @D]
  gradient @x {
    foreach (%b : @B) {
      %1 = read @y[%b] : !energy.array<D>
      %2 = read @x[%b] : !energy.array<D>
      %3 = mul %1, %2 : !energy.array<D>, !energy.array<D>
      accumulate %3 into @x[%b] : !energy.array<D>
    }
  }
}
