// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// The patterns of MatrixProducts.cpp: a matmul of matrices outside every
// loop is a call of the support GEMM; batch_matmul a call of the batched
// GEMM, with its ENERGY_PRODUCT_* flags (TRANSPOSE_A 1, TRANSPOSE_B 2,
// SUM_BATCH 4, ACCUMULATE 8); a product that the next op accumulates into
// a whole tensor (and nothing else reads) is computed into the gradient
// target with ACCUMULATE, never stored on its own; matrix-vector products
// and products inside loops are vector loops.

// matmul of matrices: energy_support_matmul_f32(rows, columns, inner, lhs,
// rhs, result) into scratch; matmul of a matrix and a vector: a dot product
// of each row, as a vector loop, stored at the row's position.
// CHECK-LABEL: energy.model @gemm
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[P:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[Q:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         call @energy_support_matmul_f32(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[P]]) : (i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:         scf.for %[[I:arg[0-9]+]] =
// CHECK:           scf.for %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:             arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK:           vector.reduction <add>
// CHECK:           %[[ROW:[0-9]+]] = scf.for %{{.*}} -> (f32) {
// CHECK:           %[[AT64:[0-9]+]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:      %[[AT:[0-9]+]] = llvm.getelementptr %[[Q]][%[[AT64]]]
// CHECK-NEXT:      llvm.store %[[ROW]], %[[AT]] : f32, !llvm.ptr
// CHECK:         return
// F64-LABEL:   energy.model @gemm
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           call @energy_support_matmul_f64(
// F64-NOT:       call @energy_support_matmul_f32(
// F64:           -> (vector<8xf64>)
// F64:           return
energy.model @gemm {
  dim @M
  dim @K
  dim @N
  tensor @a : state [@M, @K]
  tensor @b : input [@K, @N]
  tensor @v : input [@K]
  term @e {
    %a = read @a : !energy.array<M, K>
    %b = read @b : !energy.array<K, N>
    %v = read @v : !energy.array<K>
    %p = matmul %a, %b : !energy.array<M, K>, !energy.array<K, N>
    %q = matmul %a, %v : !energy.array<M, K>, !energy.array<K>
    %s = reduce_elements sum %p : !energy.array<M, N>
    %t = reduce_elements sum %q : !energy.array<M>
    %u = add %s, %t : !energy.array<>, !energy.array<>
    yield %u : !energy.array<>
  }
}

// -----

// In place: (A B) Bᵀ accumulated into @a's gradient. The inner product
// (followed by a transpose, not its accumulation) gets scratch and the
// plain GEMM; the outer one is the batched GEMM with ACCUMULATE (8)
// writing the gradient target (%arg5) itself: two scratch arrays (Bᵀ and
// A B), none for the outer product, and no loop adding it afterwards.
// CHECK-LABEL: energy.model @in_place
// CHECK-LABEL: func.func private @energy_gradient_0_a(
// CHECK-COUNT-2: call @energy_support_scratch_alloc(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         call @energy_support_matmul_f32(
// CHECK:         %[[ACC:c8_i64(_[0-9]+)?]] = arith.constant 8 : i64
// CHECK-NEXT:    call @energy_support_matmul_batch_f32(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %arg5, %[[ACC]])
// CHECK-NOT:     arith.addf
// CHECK-NOT:     llvm.store
// CHECK:         return
// F64-LABEL:   energy.model @in_place
// F64-LABEL:   func.func private @energy_gradient_0_a(
// F64:           call @energy_support_matmul_f64(
// F64:           %[[ACC:c8_i64(_[0-9]+)?]] = arith.constant 8 : i64
// F64-NEXT:      call @energy_support_matmul_batch_f64({{.*}}, %arg5, %[[ACC]])
// F64:           return
energy.model @in_place {
  dim @M
  dim @K
  dim @N
  tensor @a : state [@M, @K]
  tensor @b : input [@K, @N]
  term @e {
    %a = read @a : !energy.array<M, K>
    %s = reduce_elements sqnorm %a : !energy.array<M, K>
    yield %s : !energy.array<>
  }
  gradient @a {
    %b = read @b : !energy.array<K, N>
    %a = read @a : !energy.array<M, K>
    %p = matmul %a, %b : !energy.array<M, K>, !energy.array<K, N>
    %bt = transpose %b : !energy.array<K, N>
    %g = matmul %p, %bt : !energy.array<M, N>, !energy.array<N, K>
    accumulate %g into @a : !energy.array<M, K>
  }
}

// -----

// A batch_matmul accumulated in place keeps its own flags: TRANSPOSE_A |
// SUM_BATCH | ACCUMULATE = 13, into the target, with no scratch at all.
// CHECK-LABEL: energy.model @in_place_batch
// CHECK-LABEL: func.func private @energy_gradient_0_w(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         %[[FLAGS:[a-z0-9_]+]] = arith.constant 13 : i64
// CHECK-NEXT:    call @energy_support_matmul_batch_f32({{.*}}, %arg5, %[[FLAGS]])
// CHECK-NOT:     llvm.store
// CHECK:         return
// F64-LABEL:   energy.model @in_place_batch
// F64-LABEL:   func.func private @energy_gradient_0_w(
// F64:           %[[FLAGS:[a-z0-9_]+]] = arith.constant 13 : i64
// F64-NEXT:      call @energy_support_matmul_batch_f64({{.*}}, %arg5, %[[FLAGS]])
energy.model @in_place_batch {
  dim @B
  dim @M
  dim @K
  dim @N
  tensor @x : input [@B, @M, @K]
  tensor @y : input [@B, @M, @N]
  tensor @w : param [@K, @N]
  term @e {
    %w = read @w : !energy.array<K, N>
    %s = reduce_elements sqnorm %w : !energy.array<K, N>
    yield %s : !energy.array<>
  }
  gradient @w {
    %x = read @x : !energy.array<B, M, K>
    %y = read @y : !energy.array<B, M, N>
    %p = batch_matmul %x transposed, %y summed : !energy.array<B, M, K>, !energy.array<B, M, N> -> !energy.array<K, N>
    accumulate %p into @w : !energy.array<K, N>
  }
}

// -----

// A product that is read again is not computed in place: the GEMM writes
// scratch, and each accumulation adds that scratch into the target.
// CHECK-LABEL: energy.model @not_in_place
// CHECK-LABEL: func.func private @energy_gradient_0_a(
// CHECK:         %[[P:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         call @energy_support_matmul_f32({{.*}}, %[[P]])
// CHECK-NOT:     call @energy_support_matmul_batch_f32(
// CHECK:         llvm.getelementptr %arg5[
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[P]][
// CHECK:           arith.addf {{.*}} : vector<16xf32>
// CHECK:         llvm.getelementptr %arg5[
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[P]][
// CHECK:           arith.addf {{.*}} : vector<16xf32>
// CHECK:         return
energy.model @not_in_place {
  dim @M
  dim @K
  tensor @a : state [@M, @K]
  tensor @w : input [@K, @K]
  term @e {
    %a = read @a : !energy.array<M, K>
    %s = reduce_elements sqnorm %a : !energy.array<M, K>
    yield %s : !energy.array<>
  }
  gradient @a {
    %a = read @a : !energy.array<M, K>
    %w = read @w : !energy.array<K, K>
    %p = matmul %a, %w : !energy.array<M, K>, !energy.array<K, K>
    accumulate %p into @a : !energy.array<M, K>
    accumulate %p into @a : !energy.array<M, K>
  }
}

// -----

// batch_matmul flags: rhs transposed is TRANSPOSE_B (2); lhs transposed and
// summed over the batch is TRANSPOSE_A | SUM_BATCH (5). The second product
// reads the first's scratch.
// CHECK-LABEL: energy.model @batched
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[P:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[Q:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[TB:[a-z0-9_]+]] = arith.constant 2 : i64
// CHECK-NEXT:    call @energy_support_matmul_batch_f32({{.*}}, %[[P]], %[[TB]]) : (i64, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK:         %[[TS:[a-z0-9_]+]] = arith.constant 5 : i64
// CHECK-NEXT:    call @energy_support_matmul_batch_f32(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[P]], %{{[0-9]+}}, %[[Q]], %[[TS]])
// CHECK:         return
// F64-LABEL:   energy.model @batched
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           call @energy_support_matmul_batch_f64(
// F64:           call @energy_support_matmul_batch_f64(
// F64-NOT:       call @energy_support_matmul_batch_f32(
// F64:           return
energy.model @batched {
  dim @B
  dim @M
  dim @K
  dim @N
  tensor @x : state [@B, @M, @K]
  tensor @w : input [@N, @K]
  term @e {
    %x = read @x : !energy.array<B, M, K>
    %w = read @w : !energy.array<N, K>
    %p = batch_matmul %x, %w transposed : !energy.array<B, M, K>, !energy.array<N, K> -> !energy.array<B, M, N>
    %q = batch_matmul %x transposed, %p summed : !energy.array<B, M, K>, !energy.array<B, M, N> -> !energy.array<K, N>
    %s = reduce_elements sum %q : !energy.array<K, N>
    yield %s : !energy.array<>
  }
}

// -----

// Xᵀ v is Σ_k v[k] X[k, :]: the result zeroed, then rows of X scaled by
// v[k] and added, lanes at a time, reading X; the transpose, read only so,
// is never stored (one scratch array: the result).
// CHECK-LABEL: energy.model @transposed_matvec
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[XP:[0-9]+]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[XB:[0-9]+]] = llvm.load %[[XP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[OUT:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         %[[X:[0-9]+]] = llvm.getelementptr %[[XB]][
// CHECK:         %[[Z:[0-9]+]] = llvm.getelementptr %[[OUT]][
// CHECK-NEXT:    llvm.store %{{.*}}, %[[Z]] : f32, !llvm.ptr
// CHECK-NEXT:  }
// CHECK:         scf.for %[[K:arg[0-9]+]] =
// CHECK-NEXT:      %[[OFF:[0-9]+]] = arith.muli %[[K]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[OFF64:[0-9]+]] = arith.index_cast %[[OFF]] : index to i64
// CHECK-NEXT:      %[[XROW:[0-9]+]] = llvm.getelementptr %[[X]][%[[OFF64]]]
// CHECK-NEXT:      arith.index_cast %[[K]]
// CHECK-NEXT:      llvm.getelementptr
// CHECK-NEXT:      %[[VK:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:           scf.for
// CHECK:             llvm.getelementptr %[[OUT]][
// CHECK-NEXT:        %[[Y:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:        %[[A:[0-9]+]] = vector.broadcast %[[VK]] : f32 to vector<16xf32>
// CHECK-NEXT:        arith.index_cast
// CHECK-NEXT:        llvm.getelementptr %[[XROW]][
// CHECK-NEXT:        %[[XR:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:        %[[AX:[0-9]+]] = arith.mulf %[[A]], %[[XR]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:        arith.addf %[[Y]], %[[AX]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         return
energy.model @transposed_matvec {
  dim @M
  dim @K
  tensor @x : state [@M, @K]
  tensor @v : input [@M]
  term @e {
    %x = read @x : !energy.array<M, K>
    %v = read @v : !energy.array<M>
    %t = transpose %x : !energy.array<M, K>
    %q = matmul %t, %v : !energy.array<K, M>, !energy.array<M>
    %s = reduce_elements sum %q : !energy.array<K>
    yield %s : !energy.array<>
  }
}

// -----

// Per position of a loop, a product of matrices is loops (i, k, j: rows of
// rhs scaled and added into rows of the result), not a support call.
// CHECK-LABEL: energy.model @in_loop
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_matmul
// CHECK:         scf.for %{{.*}} iter_args(%{{.*}}) -> (index, f32) {
// CHECK:           scf.for
// CHECK:             llvm.store %{{.*}}, %{{[0-9]+}} : f32, !llvm.ptr
// CHECK:           scf.for %[[I:arg[0-9]+]] =
// CHECK-NEXT:        arith.muli %[[I]]
// CHECK:             scf.for
// CHECK:               %[[AIK:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:               scf.for
// CHECK:                 %[[S:[0-9]+]] = vector.broadcast %[[AIK]] : f32 to vector<16xf32>
// CHECK:                 arith.mulf %[[S]], %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NOT:     call @energy_support_matmul
// CHECK:         return
energy.model @in_loop {
  dim @B
  dim @M
  dim @K
  tensor @x : state [@B, @M, @K]
  tensor @w : input [@K, @K]
  term @e {
    %w = read @w : !energy.array<K, K>
    %s = reduce sum (%b : @B) {
      %xb = read @x[%b] : !energy.array<M, K>
      %p = matmul %xb, %w : !energy.array<M, K>, !energy.array<K, K>
      %t = reduce_elements sum %p : !energy.array<M, K>
      yield %t : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}

// -----

// A batch_matmul is one support call per statement; inside a loop it is an
// error.
energy.model @batch_in_loop {
  dim @B
  dim @M
  dim @K
  tensor @x : state [@B, @M, @K]
  tensor @w : input [@K, @K]
  term @e {
    %w = read @w : !energy.array<K, K>
    %s = reduce sum (%b : @B) {
      %xb = read @x[%b] : !energy.array<M, K>
      // expected-error @below {{'energy.batch_matmul' op is lowered to a support call once per statement, not in a loop}}
      %p = batch_matmul %xb, %w : !energy.array<M, K>, !energy.array<K, K> -> !energy.array<M, K>
      %t = reduce_elements sum %p : !energy.array<M, K>
      yield %t : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}
