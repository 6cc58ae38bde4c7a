// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s

// Where arrays are computed (Destinations.cpp): in the tensor a program
// stores them into, in the row of the kept value that keeps them, and a
// comprehension's element in its row; not where that would overwrite what
// the computation still reads.

// A table stored into a whole tensor right after it is computed in the
// tensor's buffer (@y, the second buffer), its element (an element-wise
// op) lanes at a time in its row: no scratch, no copy.
// CHECK-LABEL: energy.model @stored_table
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         %[[YP:[0-9]+]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[Y:[0-9]+]] = llvm.load %[[YP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         scf.for
// CHECK:           %[[ROW:[0-9]+]] = llvm.getelementptr %[[Y]][
// CHECK:           scf.for
// CHECK:             %[[NEG:[0-9]+]] = arith.negf %{{[0-9]+}} : vector<16xf32>
// CHECK-NEXT:        arith.index_cast
// CHECK-NEXT:        %[[AT:[0-9]+]] = llvm.getelementptr %[[ROW]][
// CHECK-NEXT:        llvm.store %[[NEG]], %[[AT]]
// CHECK:         } {energy.parallel}
// CHECK-NEXT:    llvm.load %1
// CHECK-NEXT:    return
energy.model @stored_table {
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
    %1 = tabulate (%b : @B) {
      %2 = extract %0[%b] : !energy.array<B, D> -> !energy.array<D>
      %3 = neg %2 : !energy.array<D>
      yield %3 : !energy.array<D>
    } : !energy.array<B, D>
    store %1 into @y : !energy.array<B, D>
  }
}

// -----

// A table that reads the tensor it is stored into is computed in scratch
// and copied after.
// CHECK-LABEL: energy.model @table_reads_target
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[YP:[0-9]+]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[Y:[0-9]+]] = llvm.load %[[YP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[TABLE:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[TABLE]][
// CHECK:         } {energy.parallel}
// CHECK:         scf.for
// CHECK:           %[[V:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      %[[AT:[0-9]+]] = llvm.getelementptr %[[Y]][
// CHECK-NEXT:      llvm.store %[[V]], %[[AT]]
// CHECK:         call @energy_support_scratch_free(%[[TABLE]])
energy.model @table_reads_target {
  dim @B
  dim @D
  tensor @y : state [@B, @D]
  term @e {
    %0 = read @y : !energy.array<B, D>
    %1 = reduce_elements sqnorm %0 : !energy.array<B, D>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @y : !energy.array<B, D>
    %1 = tabulate (%b : @B) {
      %2 = extract %0[%b] : !energy.array<B, D> -> !energy.array<D>
      %3 = neg %2 : !energy.array<D>
      yield %3 : !energy.array<D>
    } : !energy.array<B, D>
    store %1 into @y : !energy.array<B, D>
  }
}

// -----

// A kept value's table is computed in the cache's row where the flag
// asks to keep it (else in scratch); keeping it then only sets the flag.
// CHECK-LABEL: energy.model @kept_table
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[CP:[0-9]+]] = llvm.getelementptr %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[CACHE:[0-9]+]] = llvm.load %[[CP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[SCRATCH:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[ROW:[0-9]+]] = llvm.getelementptr %[[CACHE]][%{{[0-9]+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         %[[KEPT:[0-9]+]] = arith.andi %true, %{{[0-9]+}} : i1
// CHECK:         %[[TOKEEP:[0-9]+]] = arith.andi %true, %{{[0-9]+}} : i1
// CHECK-NEXT:    %{{[0-9]+}} = scf.if %[[KEPT]] -> (!llvm.ptr) {
// CHECK-NEXT:      scf.yield %[[ROW]] : !llvm.ptr
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[INTO:[0-9]+]] = arith.select %[[TOKEEP]], %[[ROW]], %[[SCRATCH]] : !llvm.ptr
// CHECK:           scf.for
// CHECK:             %[[TROW:[0-9]+]] = llvm.getelementptr %[[INTO]][
// CHECK:             scf.for
// CHECK:               %[[E:[0-9]+]] = math.exp %{{[0-9]+}} : vector<16xf32>
// CHECK-NEXT:          arith.index_cast
// CHECK-NEXT:          %[[AT:[0-9]+]] = llvm.getelementptr %[[TROW]][
// CHECK-NEXT:          llvm.store %[[E]], %[[AT]]
// CHECK:           } {energy.parallel}
// CHECK-NEXT:      scf.if %[[TOKEEP]] {
// CHECK-NEXT:        arith.constant 1.000000e+00 : f32
// CHECK-NEXT:        arith.index_cast
// CHECK-NEXT:        llvm.getelementptr
// CHECK-NEXT:        llvm.store
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %[[INTO]] : !llvm.ptr
energy.model @kept_table {
  dim @B
  dim @D
  tensor @x : input [@B, @D]
  tensor @y : state [@D]
  tensor @cache.0 : state [@B, @D] = zeros {cache_flag = @cache.0.valid}
  tensor @cache.0.valid : state [] = zeros {flag_of = @cache.0}
  term @e {
    %0 = read @y : !energy.array<D>
    %1 = once @cache.0 valid @cache.0.valid {
      %3 = read @x : !energy.array<B, D>
      %4 = tabulate (%b : @B) {
        %5 = extract %3[%b] : !energy.array<B, D> -> !energy.array<D>
        %6 = exp %5 : !energy.array<D>
        yield %6 : !energy.array<D>
      } : !energy.array<B, D>
      yield %4 : !energy.array<B, D>
    } : !energy.array<B, D>
    %2 = reduce_elements sum %1 : !energy.array<B, D>
    %7 = dot %0, %0 : !energy.array<D>
    %8 = add %2, %7 : !energy.array<>, !energy.array<>
    yield %8 : !energy.array<>
  }
}
