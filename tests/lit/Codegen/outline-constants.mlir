// RUN: energy-opt %s --pass-pipeline='builtin.module(energy-emit-kernels,builtin.module(energy-outline-parallel-loops))' | FileCheck %s

// A parallel loop's chunk function defines again the constants its body
// uses (here the unit size of a scalar table's elements) instead of reading
// them from the context like the values only known at run time (dims,
// pointers): five slots, and the element offset multiplied by a constant
// the compiler sees.
// CHECK-LABEL: func.func private @energy_kernel_step_chunk0(
// CHECK-NEXT:    %[[ONE:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK:         llvm.getelementptr %arg0[4] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NOT:     llvm.getelementptr %arg0[5]
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             math.exp
// CHECK:             arith.muli %{{[0-9]+}}, %[[ONE]] : index
// CHECK:         return
energy.model @scalar_table {
  dim @B
  dim @D
  tensor @x : state [@B, @D]
  tensor @y : state [@B, @D]
  term @e {
    %0 = read @x : !energy.array<B, D>
    %1 = reduce_elements sqnorm %0 : !energy.array<B, D>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @x : !energy.array<B, D>
    %1 = tabulate (%b : @B, %d : @D) {
      %2 = extract %0[%b, %d] : !energy.array<B, D> -> !energy.array<>
      %3 = exp %2 : !energy.array<>
      yield %3 : !energy.array<>
    } : !energy.array<B, D>
    store %1 into @y : !energy.array<B, D>
  }
}
