// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// A model marked energy.device_loops (energy-plan-engines on CUDA) calls no
// host function where code can do the work, so that the loops around the
// work can run on a GPU: a generated contraction's exp over its panel is a
// loop that drops weights below the smallest normal number; logdet is a
// Cholesky factorisation in f64 scratch (NaN when a pivot is not positive,
// the log determinant narrowed to f32), inverse a Gauss-Jordan elimination
// with partial pivoting in f64 (NaN everywhere when a pivot is below n · ε ·
// the largest magnitude); a parallel sum outside loops runs in more, smaller
// chunks.

// CHECK-LABEL: energy.model @retrieval_device
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_softmax_weights
// CHECK:         %[[TINY:[a-z0-9_]+]] = arith.constant 1.17549435E-38 : f32
// CHECK:         scf.for
// CHECK:           %[[W:[0-9]+]] = math.exp %{{[0-9]+}} : f32
// CHECK-NEXT:      %[[SMALL:[0-9]+]] = arith.cmpf olt, %[[W]], %[[TINY]] : f32
// CHECK:           arith.select %[[SMALL]], %{{.*}}, %[[W]] : f32
// CHECK-NOT:     call @energy_support_softmax_weights
// CHECK:         return
// F64-LABEL:   energy.model @retrieval_device
// F64:           arith.constant 2.2250738585072014E-308 : f64
// F64-NOT:       call @energy_support_softmax_weights
// F64:           return
energy.model @retrieval_device attributes {energy.device_loops} {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  term @e {
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    %3 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %6 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %7 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %8 = dot %6, %7 : !energy.array<D>
      yield %8 : !energy.array<>
    } {engine = "loops"} : !energy.array<N>
    %4 = reduce_elements sum %3 : !energy.array<N>
    yield %4 : !energy.array<>
  }
}

// -----

// CHECK-LABEL: energy.model @factorisations_device
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_logdet
// CHECK-NOT:     call @energy_support_inverse
// CHECK:         %[[FACTOR:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[INVERSE:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[WORK:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[RESULT:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[LOGDET:[0-9]+]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %false) -> (f64, i1) {
// CHECK:           %[[PIVOT:[0-9]+]] = arith.subf
// CHECK:           arith.cmpf ogt, %[[PIVOT]], %{{.*}} : f64
// CHECK:           %[[DIAGONAL:[0-9]+]] = math.sqrt %[[PIVOT]] : f64
// CHECK:           llvm.getelementptr %[[FACTOR]][
// CHECK:           math.log %[[DIAGONAL]] : f64
// CHECK:         }
// CHECK:         %[[NAN:[0-9]+]] = arith.select %[[LOGDET]]#1, %{{.*}}, %[[LOGDET]]#0 : f64
// CHECK-NEXT:    arith.truncf %[[NAN]] : f64 to f32
// CHECK:         %[[FAILED:[0-9]+]] = scf.for %{{.*}} iter_args(%{{.*}} = %false{{.*}}) -> (i1) {
// CHECK:           scf.for %{{.*}} -> (index) {
// CHECK:             math.absf
// CHECK:           scf.if
// CHECK:             llvm.getelementptr %[[WORK]][
// CHECK:             llvm.getelementptr %[[RESULT]][
// CHECK:         }
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             llvm.getelementptr %[[RESULT]][
// CHECK:             %[[ENTRY:[0-9]+]] = arith.select %[[FAILED]], %{{.*}}, %{{[0-9]+}} : f64
// CHECK-NEXT:        %[[NARROW:[0-9]+]] = arith.truncf %[[ENTRY]] : f64 to f32
// CHECK:             llvm.store %[[NARROW]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK-NOT:     call @energy_support_logdet
// CHECK-NOT:     call @energy_support_inverse
// CHECK:         return
// F64-LABEL:   energy.model @factorisations_device
// F64-NOT:       call @energy_support_logdet
// F64-NOT:       arith.truncf
// F64-NOT:       call @energy_support_inverse
// F64:           return
energy.model @factorisations_device attributes {energy.device_loops} {
  dim @D
  tensor @a : state [@D, @D]
  term @e {
    %a = read @a : !energy.array<D, D>
    %l = logdet %a : !energy.array<D, D>
    %i = inverse %a : !energy.array<D, D>
    %s = reduce_elements sum %i : !energy.array<D, D>
    %t = add %l, %s : !energy.array<>, !energy.array<>
    yield %t : !energy.array<>
  }
}

// -----

// A parallel sum outside every loop: a GPU runs a chunk per position of its
// first index (up to 2^16 chunks), not a CPU's 64 positions a chunk.
// CHECK-LABEL: energy.model @parallel_sum_device
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[EXTENT:[0-9]+]] = arith.maxsi %{{[0-9]+}}, %{{.*}} : index
// CHECK:         %[[BYSIZE:[0-9]+]] = arith.ceildivsi %[[EXTENT]], %c1{{[_0-9]*}} : index
// CHECK-NEXT:    %[[MAX:.*]] = arith.constant 65536 : index
// CHECK-NEXT:    %{{[0-9]+}} = arith.minsi %[[BYSIZE]], %[[MAX]] : index
// CHECK:         } {energy.parallel}
energy.model @parallel_sum_device attributes {energy.device_loops} {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  term @e {
    %0 = reduce sum parallel (%i : @N) {
      %1 = read @x[%i] : !energy.array<D>
      %2 = reduce_elements sqnorm %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
}
