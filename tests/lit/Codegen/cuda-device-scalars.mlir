// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels,builtin.module(energy-outline-parallel-loops{gpu=true}))' | FileCheck %s

// Scalars GPU kernels load themselves instead of the host (which would wait
// for the GPU to read them). s, a param no program stores into, is loaded
// by the element-wise kernel that scales x, from its tensor. t, a state the
// step stores into after that kernel, is copied into a slot of GPU memory
// by a kernel of one thread (gpu1), which the element-wise kernel (gpu2) and
// the kernel of one thread that stores t + 1 (gpu3) load. The host loads no
// element; the slots' block is freed before the return. The attribute that
// marks s's load is gone from the module.
// CHECK-LABEL: energy.model @unchanged_param
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[SLOTS:[0-9]+]] = call @energy_support_cuda_alloc(
// CHECK-NOT:     llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:         call @energy_support_cuda_free(%[[SLOTS]])
// CHECK-NEXT:    return
// CHECK:       gpu.func @energy_kernel_step_gpu1(
// CHECK:         scf.if
// CHECK-NEXT:      %[[T:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:      llvm.store %[[T]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK:       gpu.func @energy_kernel_step_gpu2(
// CHECK:         %[[S:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[T1:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:         scf.if
// CHECK:           %[[SX:[0-9]+]] = arith.mulf %{{[0-9]+}}, %[[S]]
// CHECK-NEXT:      arith.mulf %[[SX]], %[[T1]]
// CHECK:       gpu.func @energy_kernel_step_gpu3(
// CHECK:         %[[T2:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[NEXT:[0-9]+]] = arith.addf %[[T2]], %{{.*}}
// CHECK:         scf.if
// CHECK:           llvm.store %[[NEXT]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK-NOT:   energy.unchanged
energy.model @unchanged_param attributes {energy.device_loops} {
  dim @N
  tensor @x : state [@N]
  tensor @s : param []
  tensor @t : state []
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @x : !energy.array<N>
    %1 = read @s : !energy.array<>
    %2 = read @t : !energy.array<>
    %3 = mul %0, %1 : !energy.array<N>, !energy.array<>
    %4 = mul %3, %2 : !energy.array<N>, !energy.array<>
    store %4 into @x : !energy.array<N>
    %5 = constant 1.0
    %6 = add %2, %5 : !energy.array<>, !energy.array<>
    store %6 into @t : !energy.array<>
  }
}

// -----

// With nothing between the host's load of t and the kernel of one thread
// that computes t + 1, that kernel loads t and adds 1 itself (gpu1): it
// runs after the work queued before it, as the host's load would have
// waited for. It leaves t + 1 in a slot, which the kernel storing it into t
// (gpu2) loads, and so does the element-wise kernel (gpu3), which subtracts
// 1 itself: the read of t after the store is the value stored.
// CHECK-LABEL: energy.model @one_thread
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK-NOT:     llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:         return
// CHECK:       gpu.func @energy_kernel_step_gpu1(
// CHECK:         scf.if
// CHECK-NEXT:      %[[T:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:      %[[NEXT:[0-9]+]] = arith.addf %[[T]], %{{.*}}
// CHECK-NEXT:      llvm.store %[[NEXT]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK:       gpu.func @energy_kernel_step_gpu2(
// CHECK:         %[[STORED:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:         scf.if
// CHECK:           llvm.store %[[STORED]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK:       gpu.func @energy_kernel_step_gpu3(
// CHECK:         %[[T1:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[SCALE:[0-9]+]] = arith.subf %[[T1]], %{{.*}}
// CHECK:         scf.if
// CHECK:           arith.mulf %{{[0-9]+}}, %[[SCALE]]
energy.model @one_thread attributes {energy.device_loops} {
  dim @N
  tensor @x : state [@N]
  tensor @t : state []
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @t : !energy.array<>
    %1 = constant 1.0
    %2 = add %0, %1 : !energy.array<>, !energy.array<>
    store %2 into @t : !energy.array<>
    %3 = read @x : !energy.array<N>
    %4 = read @t : !energy.array<>
    %5 = sub %4, %1 : !energy.array<>, !energy.array<>
    %6 = mul %3, %5 : !energy.array<N>, !energy.array<>
    store %6 into @x : !energy.array<N>
  }
}

// -----

// A loop along time whose steps add into each other's rows is no parallel
// loop, but it touches only GPU memory (the tensor read, the gradient
// added into): a kernel of one thread runs it, and the host code around it
// only launches kernels.
// CHECK-LABEL: energy.model @along_time
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK-NOT:     scf.for
// CHECK:         %[[ONE:[0-9]+]] = arith.index_cast %c1{{[_0-9]*}} : index to i64
// CHECK-NOT:     scf.for
// CHECK:         call @energy_support_cuda_launch(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[a-z0-9_]+}}, %[[ONE]])
// CHECK-NOT:     scf.for
// CHECK:         return
// CHECK:       gpu.func @energy_gradient_0_x_gpu{{[0-9]+}}(
// CHECK:         scf.if
// CHECK-NEXT:      scf.for
// CHECK:             llvm.load
// CHECK:             llvm.store
energy.model @along_time attributes {energy.device_loops} {
  dim @T
  dim @D
  tensor @x : state [@T, @D]
  term @e {
    %0 = read @x : !energy.array<T, D>
    %1 = reduce_elements sum %0 : !energy.array<T, D>
    yield %1 : !energy.array<>
  }
  gradient @x {
    foreach (%t : @T - 1) {
      %0 = read @x[%t + 1] : !energy.array<D>
      accumulate %0 into @x[%t] : !energy.array<D>
      %1 = read @x[%t] : !energy.array<D>
      accumulate %1 into @x[%t + 1] : !energy.array<D>
    }
  }
}
