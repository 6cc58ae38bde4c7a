// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// The element-wise patterns of FusedLanes.cpp: element-wise ops on vectors
// of 64 bytes (16 f32 or 8 f64 lanes) and a scalar remainder; a value whose
// one user is element-wise, a dot, a sum of elements or an accumulation is
// computed lane by lane in that user's loop, with no array of its own;
// element-wise ops without a vector form run one element at a time.
// (FusedLanes.cpp reports no errors of its own.)

// sub -> neg -> exp -> sum: one loop over vectors of lanes that loads both
// operands and sums exp(-(x - y)) in a vector accumulator; nothing stored,
// no scratch. The gradient's 2 * (x - y) is computed in the accumulation's
// loop: the target's lanes are loaded, added to and stored back.
// CHECK-LABEL: energy.model @fused_sum
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         %[[TARGET:[0-9]+]] = llvm.getelementptr %arg5[%{{[0-9]+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[OLD:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[TWO:[0-9]+]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK:           %[[X:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK:           %[[Y:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[D:[0-9]+]] = arith.subf %[[X]], %[[Y]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      %[[G:[0-9]+]] = arith.mulf %[[TWO]], %[[D]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      %[[NEW:[0-9]+]] = arith.addf %[[OLD]], %[[G]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      %[[AT:[0-9]+]] = llvm.getelementptr %[[TARGET]][
// CHECK-NEXT:      llvm.store %[[NEW]], %[[AT]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK-NEXT:    } {energy.elementwise}
// CHECK:         scf.for
// CHECK:           arith.subf {{.*}} : f32
// CHECK:           arith.mulf {{.*}} : f32
// CHECK:           arith.addf {{.*}} : f32
// CHECK:         } {energy.elementwise_tail}
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         return
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         %[[SUM:[0-9]+]] = scf.for %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           %[[X:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK:           %[[Y:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[D:[0-9]+]] = arith.subf %[[X]], %[[Y]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      %[[N:[0-9]+]] = arith.negf %[[D]] : vector<16xf32>
// CHECK-NEXT:      %[[E:[0-9]+]] = math.exp %[[N]] : vector<16xf32>
// CHECK-NEXT:      %[[NEXT:[0-9]+]] = arith.addf %[[ACC]], %[[E]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      scf.yield %[[NEXT]] : vector<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[H:[0-9]+]] = vector.reduction <add>, %[[SUM]] fastmath<reassoc,contract> : vector<16xf32> into f32
// CHECK:         scf.for %{{.*}} iter_args(%{{.*}} = %[[H]]) -> (f32) {
// CHECK:           math.exp %{{[0-9]+}} : f32
// CHECK-NOT:     llvm.store {{.*}} vector<16xf32>
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         return
// F64-LABEL:   energy.model @fused_sum
// F64-LABEL:   func.func @energy_kernel_energy(
// F64-NOT:       call @energy_support_scratch_alloc
// F64:           scf.for %{{.*}} iter_args(%{{.*}}) -> (vector<8xf64>) {
// F64:             arith.subf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<8xf64>
// F64-NEXT:        arith.negf %{{[0-9]+}} : vector<8xf64>
// F64-NEXT:        math.exp %{{[0-9]+}} : vector<8xf64>
// F64:           vector.reduction <add>, %{{[0-9]+}} fastmath<reassoc,contract> : vector<8xf64> into f64
// F64-NOT:       call @energy_support_scratch_alloc
// F64:           return
energy.model @fused_sum {
  dim @N
  tensor @x : state [@N]
  tensor @y : input [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = read @y : !energy.array<N>
    %2 = sub %0, %1 : !energy.array<N>, !energy.array<N>
    %3 = neg %2 : !energy.array<N>
    %4 = exp %3 : !energy.array<N>
    %5 = reduce_elements sum %4 : !energy.array<N>
    yield %5 : !energy.array<>
  }
  gradient @x {
    %c = constant 2.000000e+00
    %0 = read @x : !energy.array<N>
    %1 = read @y : !energy.array<N>
    %2 = sub %0, %1 : !energy.array<N>, !energy.array<N>
    %3 = mul %c, %2 : !energy.array<>, !energy.array<N>
    accumulate %3 into @x : !energy.array<N>
  }
}

// -----

// An element-wise operand of a dot of two arrays of one shape is computed
// in the dot's loop: tanh(x) · w with no array for tanh(x).
// CHECK-LABEL: energy.model @fused_dot
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         scf.for %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           %[[X:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[T:[0-9]+]] = math.tanh %[[X]] : vector<16xf32>
// CHECK:           %[[W:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[P:[0-9]+]] = arith.mulf %[[T]], %[[W]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.addf %[[ACC]], %[[P]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NOT:     llvm.store {{.*}} vector<16xf32>
// CHECK-NOT:     call @energy_support_scratch_alloc
// CHECK:         return
energy.model @fused_dot {
  dim @N
  tensor @x : state [@N]
  tensor @w : input [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = read @w : !energy.array<N>
    %2 = tanh %0 : !energy.array<N>
    %3 = dot %2, %1 : !energy.array<N>
    yield %3 : !energy.array<>
  }
}

// -----

// A value one user reads twice (exp(x) · exp(x)) is fused, computed once a
// lane, with no scratch; one that two users read (exp(x) in exp(x) · x and
// in the sum after it) gets scratch of its own, written by a vector loop,
// and its users load it.
// CHECK-LABEL: energy.model @two_users
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         scf.for %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           %[[X:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[E:[0-9]+]] = math.exp %[[X]] : vector<16xf32>
// CHECK-NEXT:      %[[SQ:[0-9]+]] = arith.mulf %[[E]], %[[E]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.addf %[[ACC]], %[[SQ]]
// CHECK:         return
// CHECK-LABEL: energy.model @two_readers
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[E:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for
// CHECK:           %[[V:[0-9]+]] = math.exp %{{[0-9]+}} : vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      %[[AT:[0-9]+]] = llvm.getelementptr %[[E]][
// CHECK-NEXT:      llvm.store %[[V]], %[[AT]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         } {energy.elementwise}
// CHECK:         scf.for %{{.*}} iter_args(%{{.*}}) -> (vector<16xf32>) {
// CHECK:           llvm.getelementptr %[[E]][
// CHECK:           arith.mulf
// CHECK:         return
energy.model @two_users {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = exp %0 : !energy.array<N>
    %2 = mul %1, %1 : !energy.array<N>, !energy.array<N>
    %3 = reduce_elements sum %2 : !energy.array<N>
    yield %3 : !energy.array<>
  }
}

// -----

energy.model @two_readers {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = exp %0 : !energy.array<N>
    %2 = mul %1, %0 : !energy.array<N>, !energy.array<N>
    %3 = reduce_elements sum %2 : !energy.array<N>
    %4 = reduce_elements sum %1 : !energy.array<N>
    %5 = add %3, %4 : !energy.array<>, !energy.array<>
    yield %5 : !energy.array<>
  }
}

// -----

// A store between a value and its user ends fusion: neg(x) is stored in
// scratch before the store into @y, and the sum reads it back.
// CHECK-LABEL: energy.model @store_between
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[NEG:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[YP:[0-9]+]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[Y:[0-9]+]] = llvm.load %[[YP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         scf.for
// CHECK:           %[[V:[0-9]+]] = arith.negf %{{[0-9]+}} : vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      %[[AT:[0-9]+]] = llvm.getelementptr %[[NEG]][
// CHECK-NEXT:      llvm.store %[[V]], %[[AT]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[Y]][
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[NEG]][
// CHECK:           arith.addf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         return
energy.model @store_between {
  dim @N
  tensor @x : state [@N]
  tensor @y : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @x : !energy.array<N>
    %1 = neg %0 : !energy.array<N>
    store %0 into @y : !energy.array<N>
    %2 = add %1, %0 : !energy.array<N>, !energy.array<N>
    store %2 into @x : !energy.array<N>
  }
}

// -----

// silu_int in lanes: its closed form, with Li₂'s series by Horner's rule
// (20 terms in f32, 48 in f64), summed in the same vector loop; no call.
// CHECK-LABEL: energy.model @silu_int_lanes
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @
// CHECK:         scf.for %{{.*}} iter_args(%{{.*}} = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           math.log1p %{{[0-9]+}} : vector<16xf32>
// CHECK-COUNT-19:  arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK:           arith.select %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : vector<16xi1>, vector<16xf32>
// CHECK:         return
// F64-LABEL:   energy.model @silu_int_lanes
// F64-LABEL:   func.func @energy_kernel_energy(
// F64-NOT:       call @
// F64:           math.log1p %{{[0-9]+}} : vector<8xf64>
// F64-COUNT-47:  arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<8xf64>
// F64:           return
energy.model @silu_int_lanes {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = silu_int %0 : !energy.array<N>
    %2 = reduce_elements sum %1 : !energy.array<N>
    yield %2 : !energy.array<>
  }
}
